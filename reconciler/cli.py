"""The command line: parse, call one command with plain values, turn GpudrvError into exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from reconciler import __version__
from reconciler.adapters.cluster import Options
from reconciler.commands import ERROR, audit, matrix, sources, tag
from reconciler.core.tags import ImageKey
from reconciler.errors import GpudrvError

DEFAULT_MATRIX = Path("matrix/support-matrix.csv")
Handler = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "from_dir", None) and (args.kubeconfig or args.context):
        parser.error("--from reads manifests; it cannot be combined with --kubeconfig or --context")
    handler: Handler = args.handler
    try:
        return handler(args)
    except GpudrvError as exc:
        print(f"gpudrv: {exc}", file=sys.stderr)
        return ERROR
    except KeyboardInterrupt:
        print("gpudrv: interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpudrv",
        description="Precompiled GPU driver images on Kubernetes: tags, matrix audits, safe upgrades.",
    )
    parser.add_argument("--version", action="version", version=f"gpudrv {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    nodes, matrix_file, output = _node_options(), _matrix_option(), _output_option()

    tag_cmd = commands.add_parser("tag", parents=[nodes], help="print the driver image tag a node needs")
    tag_cmd.add_argument("node", metavar="NODE")
    tag_cmd.set_defaults(handler=lambda a: tag.run(a.node, _source(a)))

    audit_cmd = commands.add_parser(
        "audit", parents=[nodes, matrix_file, output], help="check every GPU node's image is in the matrix"
    )
    audit_cmd.set_defaults(handler=lambda a: audit.run(_source(a), a.matrix, a.output))

    _add_matrix_commands(commands, matrix_file)
    return parser


def _add_matrix_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], matrix_file: argparse.ArgumentParser
) -> None:
    group = commands.add_parser("matrix", help="validate or extend the support matrix")
    verbs = group.add_subparsers(dest="matrix_command", required=True, metavar="VERB")

    validate = verbs.add_parser("validate", parents=[matrix_file], help="check the matrix file")
    validate.add_argument(
        "path", nargs="?", type=Path, metavar="PATH", help="matrix file (default: --matrix)"
    )
    validate.set_defaults(handler=lambda a: matrix.validate(a.path or a.matrix))

    add = verbs.add_parser(
        "add",
        parents=[matrix_file],
        help="append a row for an image that was built",
        usage="gpudrv matrix add [--matrix PATH] (BRANCH KERNEL OS_TAG | --tag TAG)",
    )
    add.add_argument("parts", nargs="*", metavar="BRANCH KERNEL OS_TAG")
    add.add_argument("--tag", help="the whole image tag, e.g. 550-5.15.0-119-generic-ubuntu22.04")
    add.set_defaults(handler=lambda a: matrix.add(a.matrix, _row_key(add, a)))


def _row_key(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ImageKey:  # noqa: RET503
    if args.tag is not None and not args.parts:
        return matrix.key_of(args.tag)
    if args.tag is None and len(args.parts) == 3:
        return ImageKey(*args.parts)
    parser.error("give BRANCH KERNEL OS_TAG, or --tag TAG")  # exits with code 2


def _node_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("nodes")
    group.add_argument(
        "--from", dest="from_dir", type=Path, metavar="DIR", help="read Node manifests under DIR"
    )
    group.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    group.add_argument("--context", help="kubeconfig context to use")
    return options


def _matrix_option() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--matrix",
        type=Path,
        default=DEFAULT_MATRIX,
        metavar="PATH",
        help=f"support matrix (default: {DEFAULT_MATRIX})",
    )
    return options


def _output_option() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    return options


def _source(args: argparse.Namespace) -> sources.NodeSource:
    return sources.NodeSource(args.from_dir, Options(args.kubeconfig, args.context))
