"""Each command's parser: its flags (derived from the settings types where it has one:
commands/settings.py), its help (usage.py) and its handler's name, which cli.py maps to the function
that runs the verb."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import __version__, parsing, usage
from reconciler.adapters.files import config
from reconciler.arguments import (
    DEFAULT_MANIFESTS,
    GITHUB_HELP,
    add,
    clusters,
    file_path,
    given,
    kernel,
    path,
    seconds,
    values,
)
from reconciler.arguments.groups import (
    allow_empty_option,
    cluster_options,
    matrix_option,
    node_options,
    output_option,
    registry_options,
    selector_option,
)
from reconciler.arguments.reconcile import reconcile_options
from reconciler.commands import Output
from reconciler.commands.settings import ApplySettings
from reconciler.core.images.tags import ImageKey
from reconciler.core.lab.executor import Options

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def build() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = parsing.Parser(  # subcommands are Parsers too (type(parser))
        prog="gpudrv", **usage.texts(usage.USAGE["gpudrv"])
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
    nodes, matrix_file, output = node_options(), matrix_option(), output_option()
    selector, empty = selector_option(), allow_empty_option()
    many = clusters.parent()

    tag_cmd = commands.add_parser("tag", parents=[nodes, output], **usage.of("tag"))
    tag_cmd.add_argument("node", type=given("NODE", "node name"), metavar="NODE")
    tag_cmd.set_defaults(handler="tag")

    audit_cmd = commands.add_parser(
        "audit",
        parents=[nodes, many, selector, empty, matrix_file, output_option(Output.GITHUB)],
        **usage.of("audit"),
    )
    registry_options(audit_cmd, audit=True)
    audit_cmd.set_defaults(handler="audit")

    _add_preflight_command(commands, [nodes, many, selector, empty, matrix_file])
    _add_matrix_commands(commands, matrix_file)
    _add_manifests_command(commands)
    _add_upgrade_commands(commands, [nodes, selector, empty], matrix_file, output)
    _add_explain_command(commands, [nodes, many, selector])
    _add_diff_command(commands, selector)
    _add_init_command(commands)
    _add_reconcile_command(commands)
    _add_probe_command(commands)
    return parser


def _add_preflight_command(commands: SubParsers, parents: list[argparse.ArgumentParser]) -> None:
    preflight_cmd = commands.add_parser(
        "preflight", parents=[*parents, output_option(Output.GITHUB)], **usage.of("preflight")
    )
    preflight_cmd.add_argument(
        "--kernel",
        required=True,
        type=kernel,
        metavar="KERNEL",
        help="the kernel to check, as NFD's kernel-version.full spells it (6.8.0-60-generic)",
    )
    registry_options(preflight_cmd, audit=True)
    preflight_cmd.set_defaults(handler="preflight")


def _add_init_command(commands: SubParsers) -> None:
    init_cmd = commands.add_parser("init", **usage.of("init"))
    init_cmd.add_argument(
        "folder", nargs="?", type=path("DIR"), default=Path(), metavar="DIR", help="default: ."
    )
    init_cmd.add_argument(
        "--name",
        default="prod",
        type=given("--name", "name"),
        help="the cluster's folder (default prod)",
    )
    init_cmd.add_argument(
        "--action",
        type=given("--action", "OWNER/NAME@COMMIT"),
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
    cluster_options(group)
    group.add_argument(
        "--operator-version",
        type=given("--operator-version", "version"),
        metavar="VERSION",
        help="GPU Operator release, like v26.3.3 (default: the running operator's)",
    )
    init_cmd.set_defaults(handler="init")


def _add_explain_command(commands: SubParsers, nodes: list[argparse.ArgumentParser]) -> None:
    explain_cmd = commands.add_parser(
        "explain",
        parents=nodes,
        **usage.of("explain"),
    )
    explain_cmd.add_argument(
        "target", nargs="?", metavar="KIND/NAME", help="e.g. pod/cuda13-job (default: every workload)"
    )
    explain_cmd.add_argument("-n", "--namespace", help="namespace (live default: default; --from: all)")
    add(explain_cmd, ApplySettings, "registry_images")
    explain_cmd.add_argument(
        "-o",
        "--output",
        choices=values(Output.TEXT, Output.JSON, Output.YAML, Output.GITHUB),
        help=f"text, json, yaml or {GITHUB_HELP}",
    )
    explain_cmd.set_defaults(handler="explain")


def _add_matrix_commands(commands: SubParsers, matrix_file: argparse.ArgumentParser) -> None:
    group = commands.add_parser("matrix", **usage.of("matrix"))
    verbs = group.add_subparsers(dest="verb", metavar="VERB")

    validate = verbs.add_parser(
        "validate",
        parents=[matrix_file, output_option(Output.GITHUB)],
        **usage.of("matrix validate"),
    )
    validate.add_argument(
        "path",
        nargs="?",
        type=file_path("PATH"),
        metavar="PATH",
        help="matrix file (default: --matrix)",
    )
    validate.set_defaults(handler="matrix_validate")

    add = verbs.add_parser(
        "add",
        parents=[matrix_file, output_option()],
        usage="gpudrv matrix add [--matrix PATH] [-o FORMAT] (BRANCH KERNEL OS_TAG | --tag TAG)",
        **usage.of("matrix add"),
    )
    add.add_argument("parts", nargs="*", metavar="BRANCH KERNEL OS_TAG")
    add.add_argument("--tag", help="the whole image tag, e.g. 550-5.15.0-119-generic-ubuntu22.04")
    add.set_defaults(handler="matrix_add", row_key=functools.partial(_row_key, add))
    _add_matrix_verify(verbs, matrix_file)
    _add_matrix_fill(verbs, matrix_file)
    _add_matrix_git_commands(verbs, matrix_file)


def _add_matrix_verify(verbs: SubParsers, matrix_file: argparse.ArgumentParser) -> None:
    verify = verbs.add_parser(
        "verify",
        parents=[matrix_file, output_option(Output.GITHUB)],
        **usage.of("matrix verify"),
    )
    registry_options(verify)
    verify.add_argument(
        "--list-tags", action="store_true", help="also list the registry's tags: note those the matrix lacks"
    )
    verify.add_argument(
        "--write", action="store_true", help="append those tags as rows (implies --list-tags)"
    )
    verify.set_defaults(handler="matrix_verify")


def _add_matrix_fill(verbs: SubParsers, matrix_file: argparse.ArgumentParser) -> None:
    fill = verbs.add_parser(
        "fill",
        parents=[
            node_options(),
            selector_option(),
            allow_empty_option(),
            matrix_file,
            output_option(Output.GITHUB, Output.GITHUB_MATRIX),
        ],
        **usage.of("matrix fill"),
    )
    fill.add_argument(
        "--upstream",
        type=given("--upstream", "repository"),
        metavar="REPO",
        help="the OCI repository to copy missing images from, like nvcr.io/nvidia/driver "
        "(default: gpudrv.yaml's upstream)",
    )
    registry_options(fill)
    fill.add_argument(
        "--dry-run", action="store_true", help="print the plan (COPY, ADD, BUILD); copy and write nothing"
    )
    fill.set_defaults(handler="matrix_fill")


def _row_key(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ImageKey:  # noqa: RET503
    if args.tag is not None and not args.parts:
        from reconciler.commands import matrix

        return matrix.key_of(args.tag)
    if args.tag is None and len(args.parts) == 3:
        return ImageKey(*args.parts)
    parser.error("give BRANCH KERNEL OS_TAG, or --tag TAG")  # exits with code 2


def _add_matrix_git_commands(verbs: SubParsers, matrix_file: argparse.ArgumentParser) -> None:
    history_cmd = verbs.add_parser(
        "history",
        parents=[matrix_file, output_option()],
        **usage.of("matrix history"),
    )
    history_cmd.set_defaults(handler="history")

    impact_cmd = verbs.add_parser(
        "impact",
        parents=[node_options(), selector_option(), allow_empty_option(), matrix_file],
        **usage.of("matrix impact"),
    )
    impact_cmd.add_argument(
        "--base",
        required=True,
        type=given("--base", "git ref"),
        metavar="REF",
        help="git ref to compare with",
    )
    impact_cmd.add_argument(
        "-o",
        "--output",
        choices=values(Output.TEXT, Output.JSON, Output.YAML, Output.MARKDOWN, Output.GITHUB),
        help=f"text, json, yaml, markdown (for a PR summary) or {GITHUB_HELP}",
    )
    impact_cmd.set_defaults(handler="impact")


def _add_diff_command(commands: SubParsers, selector: argparse.ArgumentParser) -> None:
    diff_cmd = commands.add_parser(
        "diff",
        parents=[selector, clusters.parent(), output_option(Output.GITHUB)],
        **usage.of("diff"),
    )
    diff_cmd.add_argument(
        "--from",
        dest="from_dir",
        type=path("--from"),
        metavar="DIR",
        help="manifests in git (default: gpudrv.yaml's fleet)",
    )
    cluster_options(diff_cmd)
    add(diff_cmd, ApplySettings, "operator_version")  # the rule the desired resources' images follow
    diff_cmd.set_defaults(handler="diff")


def _add_manifests_command(commands: SubParsers) -> None:
    group = commands.add_parser("manifests", **usage.of("manifests"))
    verbs = group.add_subparsers(dest="verb", metavar="VERB")
    validate = verbs.add_parser(
        "validate",
        parents=[output_option(Output.GITHUB)],
        **usage.of("manifests validate"),
    )
    validate.add_argument(
        "--from",
        dest="folder",
        type=path("--from"),
        metavar="DIR",
        help=f"*.yaml/*.yml files under DIR (default: gpudrv.yaml's fleet, else {DEFAULT_MANIFESTS})",
    )
    validate.set_defaults(handler="manifests_validate")


def _add_upgrade_commands(
    commands: SubParsers,
    nodes: list[argparse.ArgumentParser],
    matrix_file: argparse.ArgumentParser,
    output: argparse.ArgumentParser,
) -> None:
    gates = argparse.ArgumentParser(add_help=False)
    add(gates, ApplySettings, "merged_ref", "registry_images")
    add(gates, Options, "force")

    desired = [node_options(desired=True), *nodes[1:]]  # nodes: [node options, -l, --allow-empty]
    plan_cmd = commands.add_parser(
        "plan",
        parents=[*desired, clusters.parent(), matrix_file, gates, output],
        **usage.of("plan"),
    )
    plan_cmd.set_defaults(handler="plan")

    apply_cmd = commands.add_parser(
        "apply",
        parents=[*desired, clusters.parent(one=True), matrix_file, gates, output_option(Output.GITHUB)],
        **usage.of("apply"),
    )
    add(apply_cmd, ApplySettings, "dry_run")
    add(apply_cmd, Options, "max_parallel", "drain_timeout", "installer", "install_timeout")
    staged = apply_cmd.add_argument_group("with the GPU Operator's driver resources in DIR")
    add(staged, ApplySettings, "canary", "batch")
    add(staged.add_mutually_exclusive_group(), ApplySettings, "release", "hold", "await_sync")
    apply_cmd.set_defaults(handler="apply")

    cluster_only = node_options(manifests=False)
    drain_cmd = commands.add_parser("drain", parents=[cluster_only, output], **usage.of("drain"))
    drain_cmd.add_argument("node", type=given("NODE", "node name"), metavar="NODE")
    drain_cmd.add_argument(
        "--timeout", type=seconds, default=300.0, metavar="D", help="give up after D (default 5m)"
    )
    add(drain_cmd, Options, "force")
    drain_cmd.add_argument(
        "--preflight", action="store_true", help="do not cordon when a budget would refuse"
    )
    drain_cmd.set_defaults(handler="drain")

    status_cmd = commands.add_parser(
        "status", parents=[*desired, clusters.parent(), matrix_file, output], **usage.of("status")
    )
    status_cmd.set_defaults(handler="status")

    report_cmd = commands.add_parser(
        "report",
        parents=[*nodes, clusters.parent(), matrix_file, output_option(Output.HTML)],
        **usage.of("report"),
    )
    add(report_cmd, ApplySettings, "registry_images")
    report_cmd.set_defaults(handler="report")


def _add_reconcile_command(commands: SubParsers) -> None:
    reconcile_cmd = commands.add_parser("reconcile", **usage.of("reconcile"))
    reconcile_options(reconcile_cmd)
    reconcile_cmd.set_defaults(handler="reconcile")


def _add_probe_command(commands: SubParsers) -> None:
    probe_cmd = commands.add_parser("probe", **usage.of("probe"))
    probe_cmd.add_argument(
        "--root", type=path("--root"), default=Path("/"), metavar="DIR", help="the host's root (default /)"
    )
    probe_cmd.add_argument(
        "--write", type=file_path("--write"), metavar="PATH", help="the feature file (default: stdout)"
    )
    probe_cmd.add_argument(
        "--every", type=seconds, metavar="DURATION", help="run again every DURATION (5m, 1h)"
    )
    probe_cmd.add_argument(
        "--trigger",
        type=given("--trigger", "path"),
        metavar="PATH",
        help="with --every: run at once when this file under --root changes (a kernel hook touches it)",
    )
    probe_cmd.set_defaults(handler="probe")
