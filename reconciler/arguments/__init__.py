"""The parsing half of cli.py: argument types, flags derived from the settings types (commands/settings.py),
and gpudrv.yaml's defaults; groups.py has the shared option groups, verbs.py each command's parser.

Every value-taking option refuses an empty value ("" from an unset `$FLEET` would read as the
current directory); flags left unset are filled from gpudrv.yaml, then from the defaults, by
`configure` after parsing.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from reconciler.adapters import desired, kube
from reconciler.adapters.files import config
from reconciler.adapters.sources import NodeSource
from reconciler.commands.settings import DEFAULT_MATRIX, ApplySettings
from reconciler.core.base import duration, flags, label_selector
from reconciler.core.base.flags import Kind
from reconciler.core.images import tags
from reconciler.errors import GpudrvError

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
    """Flags win; then gpudrv.yaml (--config, $GPUDRV_CONFIG or the nearest gpudrv.yaml up to the
    repository root); then the defaults, read from the found gpudrv.yaml's directory."""
    found = config.load(args.config)
    if "matrix" in args and args.matrix is None:
        args.matrix = found.matrix or found.root / DEFAULT_MATRIX
    if "operator_version" in args and args.operator_version is None:
        args.version_from_config = found.operator_version is not None
        args.operator_version = found.operator_version
    args.helm = found.helm  # gpudrv.yaml's helm: values files, read with --from
    if "folder" in args and args.folder is None:  # manifests validate
        args.folder = found.fleet or found.root / DEFAULT_MANIFESTS
    args.fleet = found.fleet  # the desired state, for the commands that need it (see desired)
    args.config_registry, args.config_path = found.registry, found.path  # see repository
    args.config_upstream = found.upstream  # see groups.upstream
    args.config_clusters = found.clusters  # see clusters.targets


def pins(args: argparse.Namespace) -> desired.Pins:
    """What pins the operator release, from the flags and gpudrv.yaml (adapters/desired.py)."""
    version = getattr(args, "operator_version", None)
    from_config = getattr(args, "version_from_config", False)
    return desired.Pins(
        flag=None if from_config else version,
        config=version if from_config else None,
        helm=getattr(args, "helm", None),
        config_origin=str(getattr(args, "config_path", None) or "gpudrv.yaml"),
    )


def node_source(args: argparse.Namespace, options: kube.Options, live: bool = False) -> NodeSource:
    """Nodes from manifests or from the cluster: one or the other, never both (`live`: the cluster
    always, for commands whose --from names the desired state instead)."""
    if not live and args.from_dir and (args.kubeconfig or args.context):
        raise GpudrvError(
            f"gpudrv {args.command}: --from reads manifests, not the cluster; drop --kubeconfig/--context"
        )
    return NodeSource(
        None if live else args.from_dir,
        options,
        args.operator_version,
        getattr(args, "selector", None),
        getattr(args, "allow_empty", False),
        version_from_config=getattr(args, "version_from_config", False),
        helm=getattr(args, "helm", None),
        desired_dir=getattr(args, "from_dir", None) if live else None,  # live nodes, git's desired state
        config_origin=str(getattr(args, "config_path", None) or "gpudrv.yaml"),
    )


def fleet_nodes(args: argparse.Namespace) -> None:
    """matrix impact: with no --from and no --kubeconfig/--context, gpudrv.yaml's fleet is the nodes."""
    if args.from_dir is None and args.fleet is not None and not (args.kubeconfig or args.context):
        args.from_dir = args.fleet


def desired_dir(args: argparse.Namespace) -> Path:
    """The desired state in git: --from, else gpudrv.yaml's fleet."""
    if args.from_dir is None and args.fleet is None:
        found = (
            f"{args.config_path} has no fleet:" if args.config_path else f"no gpudrv.yaml {config.searched()}"
        )
        raise GpudrvError(
            f"gpudrv {args.command} needs --from DIR (or fleet: in gpudrv.yaml): the desired state in git; "
            f"{found}"
        )
    return Path(args.from_dir or args.fleet)


# --- value types ---------------------------------------------------------------------------------


def values(*members: StrEnum) -> tuple[str, ...]:
    """Plain strings for argparse: its error message shows the repr of each choice."""
    return tuple(member.value for member in members)


def seconds(text: str) -> float:
    try:
        value = duration.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not math.isfinite(value):  # 400 digits: a float says inf, which no wait takes
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: too long")
    return value


def selector(text: str) -> label_selector.LabelSelector | Empty:
    if not text:
        return Empty("-l/--selector", "selector")
    try:
        return label_selector.parse(text)
    except label_selector.SelectorError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def kernel(text: str) -> str | Empty:
    """preflight's --kernel: a kernel as NFD's kernel-version.full reports one (tags.kernel_problem)."""
    if not text:
        return Empty("--kernel", "kernel")
    problem = tags.kernel_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


# --- flags from the settings types ---------------------------------------------------------------

Group = argparse.ArgumentParser | argparse._ArgumentGroup


def add(group: Group, of: type, *dests: str, relay: bool = False) -> None:
    """The flags of `of`'s fields `dests`, in that order, as the settings type says (`relay`: with
    the help of a command that passes them on)."""
    for dest in dests:
        spec = flags.spec(of, dest)
        found = spec.flag
        names = [found.short, found.name] if found.short else [found.name]
        options: dict[str, Any] = {"dest": dest, "help": found.relay if relay else found.help}
        if found.kind is Kind.SWITCH:
            group.add_argument(*names, action="store_true", **options)
            continue
        if found.metavar:
            options["metavar"] = found.metavar
        if found.required:
            options["required"] = True
        if found.choices:
            options["choices"] = found.choices
        else:
            options["type"] = _type(found)
        has_default = spec.default is not dataclasses.MISSING and spec.default is not None
        group.add_argument(*names, **options, **({"default": spec.default} if has_default else {}))


def _type(found: flags.Flag) -> Callable[[str], Any]:
    option = f"{found.short}/{found.name}" if found.short else found.name
    kinds: dict[Kind, Callable[[str], Any]] = {
        Kind.TEXT: given(option, found.what),
        Kind.PATH: path(option),
        Kind.FILE: file_path(option),
        Kind.SECONDS: seconds,
        Kind.COUNT: positive,
        Kind.SELECTOR: selector,
    }
    return kinds[found.kind]


def apply_settings(args: argparse.Namespace) -> ApplySettings:
    """apply's settings from its parsed flags, after `configure` (the desired state: see desired)."""
    return flags.build(ApplySettings, vars(args), from_dir=desired_dir(args))
