"""The CLI's shared options and argument types: the parsing half of cli.py, which wires the verbs.

Every value-taking option refuses an empty value ("" from an unset `$FLEET` would read as the
current directory); flags left unset are filled from gpudrv.yaml, then from the defaults, by
`configure` after parsing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import NoReturn

from reconciler.adapters import config
from reconciler.commands import Output
from reconciler.core import duration, label_selector
from reconciler.errors import GpudrvError

DEFAULT_MATRIX = Path("matrix/support-matrix.csv")
DEFAULT_MANIFESTS = Path("clusters")
GITHUB_HELP = "github (annotations and a step summary; the default when GITHUB_ACTIONS=true)"


class Parser(argparse.ArgumentParser):
    """argparse with gpudrv's promise for bad input: exit 2 and one line on stderr (argparse prints
    the usage too); the message flattened, as it may quote a value with a newline."""

    def error(self, message: str) -> NoReturn:
        flat = message.replace("\r", "\\r").replace("\n", "\\n")
        verb = self.prog.partition(" ")[2]
        self.exit(2, f"gpudrv: {verb + ': ' if verb else ''}{flat} (see {self.prog} --help)\n")


@dataclass(frozen=True)
class Empty:
    """An option given an empty value: `--from "$FLEET"` with FLEET unset. Refused after parsing, as
    one error line: read as a path, "" would be the current directory."""

    option: str
    what: str

    def message(self) -> str:
        return f"{self.option}: empty {self.what} (is a variable unset?)"


def path(option: str) -> Callable[[str], Path | Empty]:
    return lambda text: Path(text) if text else Empty(option, "path")


def file_path(option: str) -> Callable[[str], Path | Empty]:
    """A path that names a file: `matrix.csv/` is refused (Path() would drop the slash and read the
    file, where every other tool says "Not a directory")."""

    def convert(text: str) -> Path | Empty:
        if text.endswith(("/", "/.")) and not Path(text).is_dir():
            raise argparse.ArgumentTypeError(f"{text!r}: not a directory (a trailing slash names one)")
        return path(option)(text)

    return convert


def given(option: str, what: str) -> Callable[[str], str | Empty]:
    return lambda text: text if text else Empty(option, what)


def refuse_empty(args: argparse.Namespace) -> None:
    for value in vars(args).values():
        if isinstance(value, Empty):
            raise GpudrvError(value.message())


def configure(args: argparse.Namespace) -> None:
    """Flags win; then gpudrv.yaml (--config, $GPUDRV_CONFIG or ./gpudrv.yaml); then the defaults."""
    settings = config.load(args.config)
    if "matrix" in args and args.matrix is None:
        args.matrix = settings.matrix or DEFAULT_MATRIX
    if "operator_version" in args and args.operator_version is None:
        args.operator_version = settings.operator_version
    if "folder" in args and args.folder is None:  # manifests validate
        args.folder = settings.fleet or DEFAULT_MANIFESTS
    args.fleet = settings.fleet  # the desired state, for the commands that need it (see desired)


def desired(args: argparse.Namespace) -> Path:
    """The desired state in git: --from, else gpudrv.yaml's fleet."""
    if args.from_dir is None and args.fleet is None:
        raise GpudrvError(
            f"gpudrv {args.command} needs --from DIR (or fleet: in gpudrv.yaml): the desired state in git"
        )
    return Path(args.from_dir or args.fleet)


# --- option groups -------------------------------------------------------------------------------


def node_options(manifests: bool = True) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("nodes")
    if manifests:
        group.add_argument(
            "--from", dest="from_dir", type=path("--from"), metavar="DIR", help="read manifests under DIR"
        )
    cluster_options(group)
    group.add_argument(
        "--operator-version",
        type=given("--operator-version", "version"),
        metavar="VERSION",
        help="GPU Operator release whose image-tag rule applies, like v26.3.3 (default: gpudrv.yaml; "
        "live, the running operator's; else the newest rule)",
    )
    return options


def cluster_options(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--kubeconfig",
        type=given("--kubeconfig", "path"),
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    group.add_argument("--context", type=given("--context", "context name"), help="kubeconfig context to use")
    group.add_argument(
        "--request-timeout",
        type=seconds,
        metavar="D",
        help="give up on a single API request after D, like kubectl (e.g. 10s; 0: never; "
        "default: connect 5s, each read 15s, one answer 60s)",
    )


def selector_option() -> argparse.ArgumentParser:
    """-l/--selector, as kubectl's: for the commands that list nodes."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "-l",
        "--selector",
        type=selector,
        metavar="SELECTOR",
        help="only the nodes whose labels match, like kubectl -l (e.g. pool=a100 or 'zone in (a,b),!spare'); "
        "with --from, the labels the manifests declare",
    )
    return options


def matrix_option() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--matrix",
        type=file_path("--matrix"),
        metavar="PATH",
        help=f"support matrix (default: gpudrv.yaml's matrix, else {DEFAULT_MATRIX})",
    )
    return options


def output_option(*extra: Output, json: bool = True) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    choices = values(Output.TEXT, *((Output.JSON,) if json else ()), *extra)
    if Output.GITHUB not in extra:
        options.add_argument("-o", "--output", choices=choices, default="text", help="output format")
        return options
    # No default here: main() picks github inside GitHub Actions, else text.
    options.add_argument(
        "-o", "--output", choices=choices, help=f"{', '.join(choices[:-1])} or {GITHUB_HELP}"
    )
    return options


# --- value types ---------------------------------------------------------------------------------


def values(*members: StrEnum) -> tuple[str, ...]:
    """Plain strings for argparse: its error message shows the repr of each choice."""
    return tuple(member.value for member in members)


def seconds(text: str) -> float:
    try:
        return duration.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def selector(text: str) -> label_selector.LabelSelector | Empty:
    if not text:
        return Empty("-l/--selector", "selector")
    try:
        return label_selector.parse(text)
    except label_selector.SelectorError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)
