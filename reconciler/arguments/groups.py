"""The option groups several commands share: nodes and cluster, -l, --allow-empty, --matrix, -o and the
OCI registry's. Where a settings type has the flag (commands/settings.py), it is derived from there."""

from __future__ import annotations

import argparse

from reconciler.adapters import kube
from reconciler.adapters.registry.oci import CONCURRENCY
from reconciler.arguments import GITHUB_HELP, Group, add, given, path, positive, values
from reconciler.commands import Output
from reconciler.commands.settings import ApplySettings
from reconciler.core.images.registry import Repository
from reconciler.core.lab.executor import Options
from reconciler.errors import GpudrvError


def node_options(manifests: bool = True, desired: bool = False) -> argparse.ArgumentParser:
    """--from and the cluster's options. `desired`: the command reads the live cluster, and --from
    names the desired state in git (plan, apply, status), not a replacement for the cluster."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("nodes")
    if desired:
        add(group, ApplySettings, "from_dir")
    elif manifests:
        what = "read manifests under DIR, not the cluster"
        group.add_argument("--from", dest="from_dir", type=path("--from"), metavar="DIR", help=what)
    cluster_options(group)
    add(group, ApplySettings, "operator_version")
    return options


def cluster_options(group: Group) -> None:
    add(group, kube.Options, "kubeconfig", "context", "request_timeout")


def selector_option() -> argparse.ArgumentParser:
    """-l/--selector, as kubectl's: for the commands that list nodes."""
    options = argparse.ArgumentParser(add_help=False)
    add(options, ApplySettings, "selector")
    return options


def allow_empty_option() -> argparse.ArgumentParser:
    """--allow-empty, for the commands that check GPU nodes: finding none is exit 2 without it."""
    options = argparse.ArgumentParser(add_help=False)
    add(options, ApplySettings, "allow_empty")
    return options


def gate_options() -> argparse.ArgumentParser:
    """The gates of plan and apply: where the image gate reads the matrix, the CUDA gate's registry
    reads and whether an image it could not verify may pass, and --force (past a budget)."""
    options = argparse.ArgumentParser(add_help=False)
    add(options, ApplySettings, "merged_ref", "registry_images", "allow_unverified_images")
    add(options, Options, "force")
    return options


def matrix_option() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    add(options, ApplySettings, "matrix")  # not required: configure fills it from gpudrv.yaml
    return options


def output_option(*extra: Output) -> argparse.ArgumentParser:
    """-o text, json, yaml and `extra`: every command that prints results prints them as data too."""
    options = argparse.ArgumentParser(add_help=False)
    choices = values(Output.TEXT, Output.JSON, Output.YAML, *extra)
    if Output.GITHUB not in extra:
        options.add_argument("-o", "--output", choices=choices, default="text", help="output format")
        return options
    # No default here: main() picks github inside GitHub Actions, else text.
    options.add_argument(
        "-o", "--output", choices=choices, help=f"{', '.join(choices[:-1])} or {GITHUB_HELP}"
    )
    return options


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
    from reconciler.commands import registry  # only for the verbs that read a registry

    if args.registry not in (None, FROM_CONFIG):
        return registry.repository(args.registry)
    return registry.repository(args.config_registry, args.config_path)


def upstream(args: argparse.Namespace) -> Repository:
    """matrix fill's --upstream REPO, else gpudrv.yaml's upstream."""
    from reconciler.commands import registry

    if args.upstream is not None:
        return registry.repository(args.upstream, what="upstream")
    if not args.config_upstream:
        raise GpudrvError(
            "no upstream registry to copy from: give --upstream REPO (NVIDIA's is nvcr.io/nvidia/driver) "
            "or set upstream: in gpudrv.yaml"
        )
    return registry.repository(args.config_upstream, args.config_path, what="upstream")
