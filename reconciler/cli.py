"""The command line: parse, call one command with plain values, turn GpudrvError into exit 2.

A verb's module is imported when that verb runs, not before: `gpudrv audit` does not pay for the
imports of apply, history or impact (the fixed cost of a live command is measured: docs/scale.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from reconciler import __version__, parsing, usage
from reconciler import arguments as args_
from reconciler.adapters import kube, sources
from reconciler.adapters.ci import actions_guard, github, output
from reconciler.adapters.files import config
from reconciler.adapters.kube import Options
from reconciler.commands import ERROR, Installer, Output
from reconciler.core.tags import ImageKey
from reconciler.errors import GpudrvError

Handler = Callable[[argparse.Namespace], int]


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
# Commands whose --from reads manifests instead of the cluster (for the others it is the desired state).
OFFLINE = frozenset({"tag", "audit", "explain", "report", "impact"})


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        parsing.refuse_extras(parser, args, extras, live_only=args.command in LIVE_ONLY)
    if "handler" not in args:  # `gpudrv` or `gpudrv matrix` alone
        parsing.missing_command(parsing.chosen(parser, args))
    handler: Handler = args.handler
    _default_output(args)
    try:
        args_.refuse_empty(args)
        args_.configure(args)
        return handler(args)
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
    verb = getattr(args, "verb", None) or args.command
    if verb in OFFLINE:
        return f"{kube.NO_CLUSTER}: pass --kubeconfig or --context, set KUBECONFIG, or use --from DIR"
    name = " ".join(part for part in (args.command, getattr(args, "verb", None)) if part)
    if verb == "init":
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


def _error_summary(args: argparse.Namespace, message: str) -> github.Summary:
    verb = " ".join(str(part) for part in (args.command, getattr(args, "verb", None)) if part)
    return github.Summary(f"gpudrv {verb}: error", github.text(message))


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = parsing.Parser(  # subcommands are Parsers too (type(parser))
        prog="gpudrv", **usage.texts(usage.USAGE["gpudrv"])
    )
    parser.add_argument("--version", action="version", version=f"gpudrv {__version__}")
    parser.add_argument(
        "--config",
        type=args_.given("--config", "path"),  # a name, checked as a file by config.load
        metavar="PATH",
        help=f"flag defaults (default: ${config.ENVIRONMENT}, else {config.DEFAULT_NAME} in this directory "
        "or above it, up to the repository root)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")  # none: the list, exit 2
    nodes, matrix_file, output = args_.node_options(), args_.matrix_option(), args_.output_option()
    selector, empty = args_.selector_option(), args_.allow_empty_option()

    tag_cmd = commands.add_parser("tag", parents=[nodes, output], **usage.of("tag"))
    tag_cmd.add_argument("node", type=args_.given("NODE", "node name"), metavar="NODE")
    tag_cmd.set_defaults(handler=_tag)

    audit_cmd = commands.add_parser(
        "audit",
        parents=[nodes, selector, empty, matrix_file, args_.output_option(Output.GITHUB)],
        **usage.of("audit"),
    )
    args_.registry_options(audit_cmd, audit=True)
    audit_cmd.set_defaults(handler=_audit)

    _add_matrix_commands(commands, matrix_file)
    _add_manifests_command(commands)
    _add_upgrade_commands(commands, [nodes, selector, empty], matrix_file, output)
    _add_explain_command(commands, [nodes, selector])
    _add_diff_command(commands, selector)
    _add_init_command(commands)
    _add_reconcile_command(commands)
    _add_probe_command(commands)
    return parser


def _add_init_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init_cmd = commands.add_parser("init", **usage.of("init"))
    init_cmd.add_argument(
        "folder", nargs="?", type=args_.path("DIR"), default=Path(), metavar="DIR", help="default: ."
    )
    init_cmd.add_argument(
        "--name",
        default="prod",
        type=args_.given("--name", "name"),
        help="the cluster's folder (default prod)",
    )
    init_cmd.add_argument(
        "--action",
        type=args_.given("--action", "OWNER/NAME@COMMIT"),
        metavar="OWNER/NAME@COMMIT",
        help="the gpudrv the workflows and hooks use (default: the repository and commit this gpudrv "
        "was built from)",
    )
    init_cmd.add_argument(
        "--from-cluster",
        action="store_true",
        help="the GPU nodes, driver resources and images of the live cluster, instead of an example",
    )
    group = init_cmd.add_argument_group("cluster (with --from-cluster)")
    args_.cluster_options(group)
    group.add_argument(
        "--operator-version",
        type=args_.given("--operator-version", "version"),
        metavar="VERSION",
        help="GPU Operator release, like v26.3.3 (default: the running operator's)",
    )
    init_cmd.set_defaults(handler=_init)


def _add_explain_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], nodes: list[argparse.ArgumentParser]
) -> None:
    explain_cmd = commands.add_parser(
        "explain",
        parents=nodes,
        **usage.of("explain"),
    )
    explain_cmd.add_argument(
        "target", nargs="?", metavar="KIND/NAME", help="e.g. pod/cuda13-job (default: every workload)"
    )
    explain_cmd.add_argument("-n", "--namespace", help="namespace (live default: default; --from: all)")
    explain_cmd.add_argument(
        "-o",
        "--output",
        choices=args_.values(Output.TEXT, Output.JSON, Output.YAML, Output.GITHUB),
        help=f"text, json, yaml or {args_.GITHUB_HELP}",
    )
    explain_cmd.set_defaults(handler=_explain)


def _add_matrix_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], matrix_file: argparse.ArgumentParser
) -> None:
    group = commands.add_parser("matrix", **usage.of("matrix"))
    verbs = group.add_subparsers(dest="verb", metavar="VERB")

    validate = verbs.add_parser(
        "validate",
        parents=[matrix_file, args_.output_option(Output.GITHUB)],
        **usage.of("matrix validate"),
    )
    validate.add_argument(
        "path",
        nargs="?",
        type=args_.file_path("PATH"),
        metavar="PATH",
        help="matrix file (default: --matrix)",
    )
    validate.set_defaults(handler=_matrix_validate)

    add = verbs.add_parser(
        "add",
        parents=[matrix_file, args_.output_option()],
        usage="gpudrv matrix add [--matrix PATH] [-o FORMAT] (BRANCH KERNEL OS_TAG | --tag TAG)",
        **usage.of("matrix add"),
    )
    add.add_argument("parts", nargs="*", metavar="BRANCH KERNEL OS_TAG")
    add.add_argument("--tag", help="the whole image tag, e.g. 550-5.15.0-119-generic-ubuntu22.04")
    add.set_defaults(handler=lambda a: _matrix_add(a, _row_key(add, a)))
    _add_matrix_verify(verbs, matrix_file)
    _add_matrix_git_commands(verbs, matrix_file)


def _add_matrix_verify(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], matrix_file: argparse.ArgumentParser
) -> None:
    verify = verbs.add_parser(
        "verify",
        parents=[matrix_file, args_.output_option(Output.GITHUB)],
        **usage.of("matrix verify"),
    )
    args_.registry_options(verify)
    verify.add_argument(
        "--list-tags", action="store_true", help="also list the registry's tags: note those the matrix lacks"
    )
    verify.add_argument(
        "--write", action="store_true", help="append those tags as rows (implies --list-tags)"
    )
    verify.set_defaults(
        handler=lambda a: _registry().verify(
            a.matrix,
            args_.repository(a),
            list_tags=a.list_tags,
            write=a.write,
            output=a.output,
            concurrency=a.concurrency,
        )
    )


def _row_key(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ImageKey:  # noqa: RET503
    if args.tag is not None and not args.parts:
        from reconciler.commands import matrix

        return matrix.key_of(args.tag)
    if args.tag is None and len(args.parts) == 3:
        return ImageKey(*args.parts)
    parser.error("give BRANCH KERNEL OS_TAG, or --tag TAG")  # exits with code 2


def _add_matrix_git_commands(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], matrix_file: argparse.ArgumentParser
) -> None:
    history_cmd = verbs.add_parser(
        "history",
        parents=[matrix_file, args_.output_option()],
        **usage.of("matrix history"),
    )
    history_cmd.set_defaults(handler=_history)

    impact_cmd = verbs.add_parser(
        "impact",
        parents=[args_.node_options(), args_.selector_option(), args_.allow_empty_option(), matrix_file],
        **usage.of("matrix impact"),
    )
    impact_cmd.add_argument(
        "--base",
        required=True,
        type=args_.given("--base", "git ref"),
        metavar="REF",
        help="git ref to compare with",
    )
    impact_cmd.add_argument(
        "-o",
        "--output",
        choices=args_.values(Output.TEXT, Output.JSON, Output.YAML, Output.MARKDOWN, Output.GITHUB),
        help=f"text, json, yaml, markdown (for a PR summary) or {args_.GITHUB_HELP}",
    )
    impact_cmd.set_defaults(handler=_impact)


def _add_diff_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], selector: argparse.ArgumentParser
) -> None:
    diff_cmd = commands.add_parser(
        "diff",
        parents=[selector, args_.output_option(Output.GITHUB)],
        **usage.of("diff"),
    )
    diff_cmd.add_argument(
        "--from",
        dest="from_dir",
        type=args_.path("--from"),
        metavar="DIR",
        help="manifests in git (default: gpudrv.yaml's fleet)",
    )
    args_.cluster_options(diff_cmd)
    diff_cmd.set_defaults(handler=_diff)


def _add_manifests_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("manifests", **usage.of("manifests"))
    verbs = group.add_subparsers(dest="verb", metavar="VERB")
    validate = verbs.add_parser(
        "validate",
        parents=[args_.output_option(Output.GITHUB)],
        **usage.of("manifests validate"),
    )
    validate.add_argument(
        "--from",
        dest="folder",
        type=args_.path("--from"),
        metavar="DIR",
        help=f"*.yaml/*.yml files under DIR (default: gpudrv.yaml's fleet, else {args_.DEFAULT_MANIFESTS})",
    )
    validate.set_defaults(handler=_manifests_validate)


def _source(args: argparse.Namespace, live: bool = False) -> sources.NodeSource:
    """Nodes from manifests or from the cluster: one or the other, never both (`live`: the cluster
    always, for commands whose --from names the desired state instead)."""
    selector, empty = getattr(args, "selector", None), getattr(args, "allow_empty", False)
    if live:
        return sources.NodeSource(None, _options(args), args.operator_version, selector, empty)
    if args.from_dir and (args.kubeconfig or args.context):
        raise GpudrvError(
            f"gpudrv {args.command}: --from reads manifests, not the cluster; drop --kubeconfig/--context"
        )
    return sources.NodeSource(
        args.from_dir,
        _options(args),
        args.operator_version,
        selector,
        empty,
        version_from_config=getattr(args, "version_from_config", False),
        helm=getattr(args, "helm", None),
    )


def _add_upgrade_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    nodes: list[argparse.ArgumentParser],
    matrix_file: argparse.ArgumentParser,
    output: argparse.ArgumentParser,
) -> None:
    gates = argparse.ArgumentParser(add_help=False)
    gates.add_argument(
        "--merged-ref",
        type=args_.given("--merged-ref", "git ref"),
        metavar="REF",
        help="where the image gate reads the matrix (default: origin/main, else main)",
    )
    gates.add_argument("--force", action="store_true", help="also delete pods that have no controller")

    desired = [args_.node_options(desired=True), *nodes[1:]]  # nodes: [node options, -l, --allow-empty]
    plan_cmd = commands.add_parser(
        "plan",
        parents=[*desired, matrix_file, gates, output],
        **usage.of("plan"),
    )
    plan_cmd.set_defaults(handler=_plan)

    apply_cmd = commands.add_parser(
        "apply",
        parents=[*desired, matrix_file, gates, args_.output_option(Output.GITHUB)],
        **usage.of("apply"),
    )
    apply_cmd.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    apply_cmd.add_argument(
        "--max-parallel", type=args_.positive, default=1, metavar="N", help="nodes at a time (default 1)"
    )
    apply_cmd.add_argument(
        "--drain-timeout", type=args_.seconds, default=300.0, metavar="D", help="per drain step (default 5m)"
    )
    apply_cmd.add_argument(
        "--installer",
        choices=args_.values(*Installer),
        default="labels",
        help="how the driver gets installed",
    )
    apply_cmd.add_argument(
        "--timeout",
        type=args_.seconds,
        default=600.0,
        metavar="D",
        help="installer=wait: how long (default 10m); with the GPU Operator: per batch",
    )
    staged = apply_cmd.add_argument_group("with the GPU Operator's driver resources in DIR")
    staged.add_argument(
        "--canary",
        type=args_.positive,
        default=1,
        metavar="N",
        help="nodes the operator takes first (default 1)",
    )
    staged.add_argument(
        "--batch",
        type=args_.positive,
        default=None,
        metavar="N",
        help="nodes released per batch after the canary (default: all the rest; the operator's "
        "maxParallelUpgrades and maxUnavailable still pace them)",
    )
    engine = staged.add_mutually_exclusive_group()
    engine.add_argument(
        "--release", action="store_true", help="remove every skip label gpudrv set, and stop staging"
    )
    engine.add_argument(
        "--hold",
        action="store_true",
        help="a GitOps engine or Helm applies the driver resources: gate and hold the moving nodes "
        "but the canary, then stop (run before the engine's sync, e.g. an Argo CD PreSync hook)",
    )
    engine.add_argument(
        "--await-sync",
        action="store_true",
        help="never apply the driver resources: hold, wait until the engine has applied them, then "
        "canary and batches (run after --hold, e.g. an Argo CD PostSync hook)",
    )
    apply_cmd.set_defaults(handler=_apply)

    cluster_only = args_.node_options(manifests=False)
    drain_cmd = commands.add_parser("drain", parents=[cluster_only, output], **usage.of("drain"))
    drain_cmd.add_argument("node", type=args_.given("NODE", "node name"), metavar="NODE")
    drain_cmd.add_argument(
        "--timeout", type=args_.seconds, default=300.0, metavar="D", help="give up after D (default 5m)"
    )
    drain_cmd.add_argument("--force", action="store_true", help="also delete pods that have no controller")
    drain_cmd.add_argument(
        "--preflight", action="store_true", help="do not cordon when a budget would refuse"
    )
    drain_cmd.set_defaults(handler=_drain)

    status_cmd = commands.add_parser("status", parents=[*desired, matrix_file, output], **usage.of("status"))
    status_cmd.set_defaults(handler=_status)

    report_cmd = commands.add_parser(
        "report",
        parents=[*nodes, matrix_file, args_.output_option(Output.HTML)],
        **usage.of("report"),
    )
    report_cmd.set_defaults(handler=_report)


# --- the verbs: each imports its module when it runs ----------------------------------------------


def _tag(a: argparse.Namespace) -> int:
    from reconciler.commands import tag

    return tag.run(a.node, _source(a), a.output)


def _audit(a: argparse.Namespace) -> int:
    if a.registry is not None:
        from reconciler.commands import registry

        return registry.audit(_source(a), args_.repository(a), a.output, a.concurrency)
    from reconciler.commands import audit

    return audit.run(_source(a), a.matrix, a.output)


def _registry() -> Any:
    from reconciler.commands import registry

    return registry


def _init(a: argparse.Namespace) -> int:
    from reconciler.commands import init

    return init.run(
        init.Settings(a.folder, a.name, a.action, a.from_cluster, _options(a), a.operator_version)
    )


def _explain(a: argparse.Namespace) -> int:
    from reconciler.commands import explain

    return explain.run(a.target, a.namespace, _source(a), a.output)


def _matrix_validate(a: argparse.Namespace) -> int:
    from reconciler.commands import matrix

    return matrix.validate(a.path or a.matrix, a.output)


def _matrix_add(a: argparse.Namespace, key: ImageKey) -> int:
    from reconciler.commands import matrix

    return matrix.add(a.matrix, key, a.output)


def _history(a: argparse.Namespace) -> int:
    from reconciler.commands import history

    return history.run(a.matrix, a.output)


def _impact(a: argparse.Namespace) -> int:
    from reconciler.commands import impact

    args_.fleet_nodes(a)
    return impact.run(a.base, a.matrix, _source(a), a.output, a.config_path)


def _diff(a: argparse.Namespace) -> int:
    from reconciler.commands import diff

    return diff.run(args_.desired(a), _options(a), a.output, a.selector)


def _manifests_validate(a: argparse.Namespace) -> int:
    from reconciler.commands import manifest_check

    return manifest_check.validate(a.folder, a.output)


def _plan(a: argparse.Namespace) -> int:
    from reconciler.commands import plan

    return plan.run(
        args_.desired(a),
        a.matrix,
        merged_ref=a.merged_ref,
        force=a.force,
        options=_options(a),
        output=a.output,
        operator_version=a.operator_version,
        selector=a.selector,
        allow_empty=a.allow_empty,
    )


def _drain(a: argparse.Namespace) -> int:
    from reconciler.commands import drain

    def run(record: Any) -> int:
        return drain.run(a.node, a.timeout, a.force, a.preflight, _options(a), record=record)

    return _as_data(a, "drain", run, node=a.node)


def _as_data(a: argparse.Namespace, kind: str, run: Callable[[Any], int], **fields: Any) -> int:
    """-o json/yaml for apply and drain: progress to stderr, one object on stdout at the end."""
    from reconciler.commands import upgrades

    if a.output is Output.GITHUB:
        return upgrades.with_summary(kind, run)
    if not a.output.structured:
        return run(None)
    return upgrades.as_data(a.output, kind, run, **fields)


def _status(a: argparse.Namespace) -> int:
    from reconciler.commands import status

    return status.run_status(a.from_dir, a.matrix, _source(a, live=True), a.output)


def _report(a: argparse.Namespace) -> int:
    from reconciler.commands import status

    return status.run_report(a.matrix, _source(a), a.output)


def _add_probe_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    probe_cmd = commands.add_parser("probe", **usage.of("probe"))
    probe_cmd.add_argument(
        "--root",
        type=args_.path("--root"),
        default=Path("/"),
        metavar="DIR",
        help="the host's root (default /)",
    )
    probe_cmd.add_argument(
        "--write", type=args_.file_path("--write"), metavar="PATH", help="the feature file (default: stdout)"
    )
    probe_cmd.add_argument(
        "--every", type=args_.seconds, metavar="DURATION", help="run again every DURATION (5m, 1h)"
    )
    probe_cmd.add_argument(
        "--trigger",
        type=args_.given("--trigger", "path"),
        metavar="PATH",
        help="with --every: run at once when this file under --root changes (a kernel hook touches it)",
    )
    probe_cmd.set_defaults(handler=_probe)


def _probe(a: argparse.Namespace) -> int:
    from reconciler.commands import probe

    if a.trigger and a.every is None:
        raise GpudrvError("probe: --trigger needs --every (the loop that watches it)")
    if a.every is not None and a.every < 1:
        raise GpudrvError(f"probe: --every {a.every:g}s: give 1s or more")
    return probe.run(probe.Settings(a.root, a.write, a.every, a.trigger))


def _add_reconcile_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    reconcile_cmd = commands.add_parser("reconcile", **usage.of("reconcile"))
    args_.reconcile_options(reconcile_cmd)
    reconcile_cmd.set_defaults(handler=_reconcile)


def _reconcile(args: argparse.Namespace) -> int:
    from reconciler.commands import reconcile  # prometheus_client only for this command

    settings = args_.reconcile_settings(args)
    if args.check_access:
        return reconcile.check_access(settings, _options(args), Output(args.output))
    if args.once:
        return reconcile.run_once(settings, _options(args))
    return reconcile.run(settings, _options(args))


def _apply(args: argparse.Namespace) -> int:
    from reconciler.commands import apply, rollout
    from reconciler.core.supervise import Stages

    if rollout.wanted(args_.desired(args)):
        staged = rollout.Settings(
            from_dir=args_.desired(args),
            matrix=args.matrix,
            merged_ref=args.merged_ref,
            dry_run=args.dry_run,
            stages=Stages(args.canary, args.batch or 0),
            timeout=args.timeout,
            selector=args.selector,
            operator_version=args.operator_version,
            release=args.release,
            hold_only=args.hold,
            await_sync=args.await_sync,
            allow_empty=args.allow_empty,
        )
        return _as_data(
            args, "apply", lambda record: rollout.run(staged, _options(args), record), dry_run=args.dry_run
        )
    if args.hold or args.await_sync:
        flag = "--hold" if args.hold else "--await-sync"
        raise GpudrvError(
            f"{flag} stages a GPU Operator rollout around a GitOps engine's sync, but "
            f"{args_.desired(args)} declares no ClusterPolicy or NVIDIADriver (lab mode applies nothing "
            "a GitOps engine owns)"
        )
    settings = apply.Settings(
        from_dir=args_.desired(args),
        matrix=args.matrix,
        merged_ref=args.merged_ref,
        dry_run=args.dry_run,
        max_parallel=args.max_parallel,
        drain_timeout=args.drain_timeout,
        installer=Installer(args.installer),
        install_timeout=args.timeout,
        force=args.force,
        selector=args.selector,
        allow_empty=args.allow_empty,
    )
    return _as_data(
        args, "apply", lambda record: apply.run(settings, _options(args), record), dry_run=args.dry_run
    )


def _options(args: argparse.Namespace) -> Options:
    return Options(args.kubeconfig, args.context, args.request_timeout)
