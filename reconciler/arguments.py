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

from reconciler.adapters import config
from reconciler.adapters.registry import CONCURRENCY
from reconciler.commands import Output
from reconciler.commands import registry as registry_command
from reconciler.core import duration
from reconciler.core.registry import Repository
from reconciler.errors import GpudrvError

DEFAULT_MATRIX = Path("matrix/support-matrix.csv")
DEFAULT_MANIFESTS = Path("clusters")
GITHUB_HELP = "github (annotations and a step summary; the default when GITHUB_ACTIONS=true)"


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
    args.config_registry, args.config_path = settings.registry, settings.path  # see repository


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


def matrix_option() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--matrix",
        type=path("--matrix"),
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


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


# --- the OCI registry (matrix verify, audit --registry) -------------------------------------------

FROM_CONFIG = "from gpudrv.yaml"  # `audit --registry` without a value


def registry_options(parser: argparse.ArgumentParser, audit: bool = False) -> None:
    if audit:
        parser.add_argument(
            "--registry",
            nargs="?",
            const=FROM_CONFIG,
            type=given("--registry", "repository"),
            metavar="REPO",
            help="look the images up in the OCI repository REPO instead of the matrix "
            "(no REPO: gpudrv.yaml's registry)",
        )
    else:
        parser.add_argument(
            "--registry",
            type=given("--registry", "repository"),
            metavar="REPO",
            help="the OCI repository of the images, like registry.example.com/nvidia/driver "
            "(default: gpudrv.yaml's registry)",
        )
    parser.add_argument(
        "--concurrency",
        type=positive,
        default=CONCURRENCY,
        metavar="N",
        help=f"registry requests at a time (default {CONCURRENCY})",
    )


def repository(args: argparse.Namespace) -> Repository:
    """--registry REPO, else gpudrv.yaml's registry: one error line when neither says."""
    if args.registry not in (None, FROM_CONFIG):
        return registry_command.repository(args.registry)
    return registry_command.repository(args.config_registry, args.config_path)
