"""The command line: parse, hand the parsed flags to the verb's module (reconciler/verbs), turn
GpudrvError into exit 2.

A verb's module imports the work (reconciler/commands) when the verb runs, not before: `gpudrv audit`
does not pay for the imports of apply, history or impact (the fixed cost of a live command is
measured: docs/scale.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from reconciler import __version__, arguments, parsing, usage, verbs
from reconciler.adapters import files, kube
from reconciler.adapters.ci import actions_guard, github, output
from reconciler.adapters.files import config
from reconciler.arguments import given
from reconciler.commands import ERROR, Output
from reconciler.core.base import github_text
from reconciler.errors import GpudrvError


def main(argv: Sequence[str] | None = None) -> int:
    # stdout's own failures (a closed pipe, a full disk) are handled round everything (output.py).
    return output.run(lambda: _guarded_main(argv))


def _guarded_main(argv: Sequence[str] | None) -> int:
    # A CI runner reads both streams for workflow commands (GITHUB_ACTIONS set or not: a container
    # step does not pass it): guard them before anything (argparse's usage errors included) can quote
    # a value.
    with actions_guard.guarded():
        return _main(argv)


# Commands that only read the live cluster and have no --from at all.
LIVE_ONLY = frozenset({"drain"})


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        parsing.refuse_extras(parser, args, extras, live_only=args.command in LIVE_ONLY)
    if "handler" not in args:  # `gpudrv` or `gpudrv matrix` alone
        parsing.missing_command(parsing.chosen(parser, args))
    _default_output(args)
    try:
        # Every verb reads from the current directory (gpudrv.yaml is looked for there, --from and
        # --matrix are relative to it): one that was deleted is one line here, not a traceback later.
        files.cwd()
        arguments.refuse_empty(args)
        arguments.configure(args)
        return int(args.handler.main(args))
    except kube.NoCluster as exc:
        return _error(args, GpudrvError(_no_cluster(args, exc)))
    except GpudrvError as exc:
        return _error(args, exc)
    except KeyboardInterrupt:
        print("gpudrv: interrupted", file=sys.stderr)
        return 130


def _default_output(args: argparse.Namespace) -> None:
    """Commands with GitHub output default to it inside GitHub Actions, else to text."""
    if "output" not in args:
        return
    if args.output is None:
        args.output = Output.GITHUB if os.environ.get("GITHUB_ACTIONS") == "true" else Output.TEXT
    args.output = Output(args.output)


def _no_cluster(args: argparse.Namespace, error: kube.NoCluster) -> str:
    """Say that the command reads the live cluster; offer --from only where it reads manifests."""
    if args.handler.FROM_READS_MANIFESTS:
        return f"{kube.NO_CLUSTER}: pass --kubeconfig or --context, set KUBECONFIG, or use --from DIR"
    name = verbs.name(args)
    if args.command == "init":
        name += " --from-cluster"
    desired = " (--from DIR is the desired state in git)" if "from_dir" in args else ""
    return f"{name} reads the live cluster{desired}: {error}"


def _error(args: argparse.Namespace, error: GpudrvError) -> int:
    # One line, whatever the message carries: a value with a newline must not start a line of its
    # own (in GitHub Actions such a line could be a workflow command).
    message = str(error)
    flat = message.replace("\r", "\\r").replace("\n", "\\n")
    print(f"gpudrv: {flat}", file=sys.stderr)
    if getattr(args, "output", None) is Output.GITHUB:
        with contextlib.suppress(GpudrvError):  # an unwritable summary: the error is already out
            github.publish([github.error_annotation(error)], _error_summary(args, message), "gpudrv: failed")
    return ERROR


def _error_summary(args: argparse.Namespace, message: str) -> github_text.Summary:
    return github_text.Summary(f"gpudrv {verbs.name(args)}: error", github_text.text(message))


def build_parser() -> argparse.ArgumentParser:
    """`gpudrv`'s parser: the global flags, then each verb's, in the order `gpudrv --help` lists them."""
    from reconciler.verbs import (
        apply,
        audit,
        diff,
        drain,
        explain,
        init,
        manifests,
        matrix,
        plan,
        preflight,
        probe,
        reconcile,
        report,
        status,
        tag,
    )

    parser: argparse.ArgumentParser = parsing.Parser(  # subcommands are Parsers too (type(parser))
        prog="gpudrv", **usage.texts(usage.GPUDRV)
    )
    parser.add_argument("--version", action="version", version=f"gpudrv {__version__}")
    parser.add_argument(
        "--config",
        type=given("--config", "path"),  # a name, checked as a file by config.load
        metavar="PATH",
        help=f"flag defaults (default: ${config.ENVIRONMENT}, else {config.DEFAULT_NAME} in this directory "
        "or above it, up to the repository root)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")  # none: the list, exit 2
    for verb in (tag, audit, preflight, matrix, manifests, plan, apply, drain, status, report, explain, diff,
                 init, reconcile, probe):  # fmt: skip
        verb.register(commands)
    return parser
