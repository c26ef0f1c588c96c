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
from typing import TYPE_CHECKING, Any

from reconciler import arguments, parsing
from reconciler.adapters import desired, kube, sources
from reconciler.adapters.ci import actions_guard, github, output
from reconciler.adapters.kube import Options
from reconciler.arguments import clusters, groups, verbs
from reconciler.arguments.reconcile import reconcile_settings
from reconciler.commands import ERROR, Output
from reconciler.core.base import github_text
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    from reconciler.commands.clusters import Target

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
OFFLINE = frozenset({"tag", "audit", "explain", "report", "impact", "preflight"})


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        parsing.refuse_extras(parser, args, extras, live_only=args.command in LIVE_ONLY)
    if "handler" not in args:  # `gpudrv` or `gpudrv matrix` alone
        parsing.missing_command(parsing.chosen(parser, args))
    handler: Handler = HANDLERS[args.handler]
    _default_output(args)
    try:
        arguments.refuse_empty(args)
        arguments.configure(args)
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


def _error_summary(args: argparse.Namespace, message: str) -> github_text.Summary:
    verb = " ".join(str(part) for part in (args.command, getattr(args, "verb", None)) if part)
    return github_text.Summary(f"gpudrv {verb}: error", github_text.text(message))


def build_parser() -> argparse.ArgumentParser:
    return verbs.build()


def _source(args: argparse.Namespace, live: bool = False) -> sources.NodeSource:
    return arguments.node_source(args, _options(args), live)


# --- the verbs: each imports its module when it runs ----------------------------------------------


def _tag(a: argparse.Namespace) -> int:
    from reconciler.commands import tag

    return tag.run(a.node, _source(a), a.output)


def _targets(a: argparse.Namespace) -> list[Target] | None:
    """The clusters of gpudrv.yaml that --cluster/--all-clusters pick; None without those flags. They
    read live clusters: --from (manifests instead of a cluster) is refused beside them."""
    if not clusters.wanted(a):
        return None
    if a.command in OFFLINE and getattr(a, "from_dir", None):
        raise GpudrvError(
            f"gpudrv {a.command}: --from reads manifests, not clusters; drop --cluster/--all-clusters"
        )
    return clusters.targets(a, a.config_clusters)


def _sections(a: argparse.Namespace, handler: Handler) -> int | None:
    """With --cluster/--all-clusters: the command once per cluster, each its own section; else None."""
    if (targets := _targets(a)) is None:
        return None
    from reconciler.commands.clusters import sections

    verb = " ".join(str(part) for part in (a.command, getattr(a, "verb", None)) if part)
    return sections(
        targets,
        verb,
        lambda target, form: handler(clusters.in_cluster(a, target, form, a.command not in OFFLINE)),
        a.output,
    )


def _audit(a: argparse.Namespace) -> int:
    if (targets := _targets(a)) is not None:
        if a.registry is not None:
            raise GpudrvError(
                "gpudrv audit --registry reads one cluster at a time; drop --cluster/--all-clusters"
            )
        from reconciler.commands import audit

        return audit.run_many(targets, a.matrix, a.output)
    if a.registry is not None:
        from reconciler.commands import registry

        return registry.audit(_source(a), groups.repository(a), a.output, a.concurrency)
    from reconciler.commands import audit

    return audit.run(_source(a), a.matrix, a.output)


def _preflight(a: argparse.Namespace) -> int:
    if (code := _sections(a, _preflight)) is not None:
        return code
    from reconciler.commands import preflight

    repository = groups.repository(a) if a.registry is not None else None
    return preflight.run(
        _source(a), a.kernel, a.matrix, a.output, repository=repository, concurrency=a.concurrency
    )


def _matrix_verify(a: argparse.Namespace) -> int:
    from reconciler.commands import registry

    repository = groups.repository(a)
    return registry.verify(
        a.matrix, repository, list_tags=a.list_tags, write=a.write, output=a.output, concurrency=a.concurrency
    )


def _matrix_fill(a: argparse.Namespace) -> int:
    from reconciler.commands import fill

    return fill.run(
        _source(a),
        a.matrix,
        groups.upstream(a),
        groups.repository(a),
        a.output,
        dry_run=a.dry_run,
        concurrency=a.concurrency,
    )


def _init(a: argparse.Namespace) -> int:
    from reconciler.commands import init

    return init.run(
        init.Settings(a.folder, a.name, a.action, a.from_cluster, _options(a), a.operator_version)
    )


def _explain(a: argparse.Namespace) -> int:
    if (code := _sections(a, _explain)) is not None:
        return code
    from reconciler.commands import explain

    return explain.run(a.target, a.namespace, _source(a), a.output, a.registry_images == "on")


def _matrix_validate(a: argparse.Namespace) -> int:
    from reconciler.commands import matrix

    return matrix.validate(a.path or a.matrix, a.output)


def _matrix_add(a: argparse.Namespace) -> int:
    from reconciler.commands import matrix

    return matrix.add(a.matrix, a.row_key(a), a.output)


def _history(a: argparse.Namespace) -> int:
    from reconciler.commands import history

    return history.run(a.matrix, a.output)


def _impact(a: argparse.Namespace) -> int:
    from reconciler.commands import impact

    arguments.fleet_nodes(a)
    return impact.run(a.base, a.matrix, _source(a), a.output, a.config_path)


def _diff(a: argparse.Namespace) -> int:
    if (code := _sections(a, _diff)) is not None:
        return code
    from reconciler.commands import diff

    return diff.run(arguments.desired_dir(a), _options(a), a.output, a.selector, arguments.pins(a))


def _manifests_validate(a: argparse.Namespace) -> int:
    from reconciler.commands import manifest_check

    return manifest_check.validate(a.folder, a.output)


def _plan(a: argparse.Namespace) -> int:
    if (code := _sections(a, _plan)) is not None:
        return code
    from reconciler.commands import plan

    return plan.run(
        arguments.desired_dir(a),
        a.matrix,
        merged_ref=a.merged_ref,
        force=a.force,
        options=_options(a),
        output=a.output,
        pins=arguments.pins(a),
        selector=a.selector,
        allow_empty=a.allow_empty,
        registry_images=a.registry_images == "on",
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

    if (targets := _targets(a)) is not None:
        return status.status_many(targets, a.matrix, a.output)
    return status.run_status(a.from_dir, a.matrix, _source(a, live=True), a.output)


def _report(a: argparse.Namespace) -> int:
    from reconciler.commands import status

    if (targets := _targets(a)) is not None:
        return status.report_many(targets, a.matrix, a.output, a.registry_images == "on")
    return status.run_report(a.matrix, _source(a), a.output, a.registry_images == "on")


def _reconcile(args: argparse.Namespace) -> int:
    from reconciler.commands import reconcile  # prometheus_client only for this command

    settings = reconcile_settings(args)
    if args.check_access:
        return reconcile.check_access(settings, _options(args), Output(args.output))
    if args.once:
        return reconcile.run_once(settings, _options(args))
    return reconcile.run(settings, _options(args))


def _apply(args: argparse.Namespace) -> int:
    if clusters.wanted(args):  # one cluster, by design: its entry's connection and fleet
        args = clusters.in_cluster(args, clusters.one_target(args, args.config_clusters), None, True)
    from reconciler.commands import apply, rollout

    settings = arguments.apply_settings(args)
    state = desired.from_git(settings.from_dir, arguments.pins(args))
    if state.operator:
        return _as_data(
            args,
            "apply",
            lambda record: rollout.run(settings, state, _options(args), record),
            dry_run=args.dry_run,
        )
    if settings.hold or settings.await_sync:
        flag = "--hold" if settings.hold else "--await-sync"
        raise GpudrvError(
            f"{flag} stages a GPU Operator rollout around a GitOps engine's sync, but "
            f"{settings.from_dir} declares no ClusterPolicy or NVIDIADriver (lab mode applies nothing "
            "a GitOps engine owns, and no Helm installation of the operator)"
        )
    return _as_data(
        args, "apply", lambda record: apply.run(settings, state, _options(args), record), dry_run=args.dry_run
    )


def _options(args: argparse.Namespace) -> Options:
    return Options(args.kubeconfig, args.context, args.request_timeout)


# The handler each parser names (arguments/verbs.py).
def _probe(a: argparse.Namespace) -> int:
    from reconciler.commands import probe

    if a.trigger and a.every is None:
        raise GpudrvError("probe: --trigger needs --every (the loop that watches it)")
    if a.every is not None and a.every < 1:
        raise GpudrvError(f"probe: --every {a.every:g}s: give 1s or more")
    return probe.run(probe.Settings(a.root, a.write, a.every, a.trigger))


HANDLERS: dict[str, Handler] = {
    "tag": _tag, "audit": _audit, "init": _init, "explain": _explain, "matrix_validate": _matrix_validate,
    "matrix_add": _matrix_add, "matrix_verify": _matrix_verify, "matrix_fill": _matrix_fill,
    "history": _history, "impact": _impact,
    "diff": _diff, "manifests_validate": _manifests_validate, "plan": _plan, "apply": _apply, "drain": _drain,
    "status": _status, "report": _report, "reconcile": _reconcile, "probe": _probe, "preflight": _preflight,
}  # fmt: skip
