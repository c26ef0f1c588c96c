"""What `gpudrv COMMAND --help` says: a one-line summary (also the line in `gpudrv --help`), what the
command reads and its exit codes, and examples. tests/cli/test_conventions.py parses every example.

The examples use the bundled files (clusters/lab, matrix/) where they can, so they run as shown.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from typing import Any

WIDTH = 78
LIVE = "Reads the live cluster (--kubeconfig, --context, $KUBECONFIG, ~/.kube/config or in-cluster)."
DESIRED = "--from DIR is the desired state in git (default: gpudrv.yaml's fleet)."


@dataclass(frozen=True)
class Usage:
    summary: str  # one line, lower case, no full stop: argparse lists it under COMMAND
    details: str = ""
    examples: tuple[tuple[str, str], ...] = ()  # (command line, what it shows)


USAGE: dict[str, Usage] = {
    "gpudrv": Usage(
        "precompiled GPU driver images on Kubernetes: tags, matrix audits, safe upgrades",
        "Most commands read the live cluster, or the manifests in git with --from DIR. Exit codes: 0 ok, "
        "1 findings, 2 a usage, input or connection error. Defaults for the flags come from gpudrv.yaml, "
        "found in the current directory or above it, up to the repository root. gpudrv COMMAND --help: "
        "what one command reads, its exit codes, examples.",
        (
            ("gpudrv audit --from clusters/lab", "every GPU node's image is in the matrix"),
            ("gpudrv matrix validate", "the support matrix is well-formed"),
            ("gpudrv report --from clusters/lab", "NODES, SKEW, MATRIX_ROWS"),
        ),
    ),
    "tag": Usage(
        "print the driver image tag a node needs",
        "From the node's labels: driver branch, kernel, OS (<branch>-<kernel>-<os-tag>). Live, or the "
        "Node manifest under --from DIR. Exit 0, or 2 with one line naming the label at fault.",
        (
            ("gpudrv tag lab-node-0 --from clusters/lab", "550-5.15.0-119-generic-ubuntu22.04"),
            ("gpudrv tag gpu-node-7 --context prod", "the live node"),
        ),
    ),
    "audit": Usage(
        "check every GPU node's image is in the matrix",
        "Every node labelled nvidia.com/gpu.present=true, live or under --from DIR: `NODE MISSING TAG` for "
        "each image the matrix (or, with --registry, the registry) lacks; `NODE NEXT-MISSING TAG (kernel K, "
        "at its next reboot)` for the image of the kernel a node boots next (the label "
        "gpudrv.dev/kernel-version.next). Exit 0 all there, 1 missing, 2 "
        "an error or no GPU node at all (--allow-empty for a fleet that really has none). The OK line "
        "says what was checked; in lab mode (no GPU Operator driver resource) it is the lab's one word.",
        (
            ("gpudrv audit --from clusters/lab", "OK"),
            ("gpudrv audit -l pool=a100 -o json", "live, one pool, as JSON"),
            ("gpudrv audit --registry registry.example.com/nvidia/driver", "the registry instead"),
            ("gpudrv audit --all-clusters", "gpudrv.yaml's clusters, side by side: CLUSTER/NODE"),
        ),
    ),
    "preflight": Usage(
        "before a kernel bump: the image each GPU node would need on kernel K, by pool",
        "Every node labelled nvidia.com/gpu.present=true (live or under --from DIR, -l to narrow), moved to "
        "kernel K with its own OS and driver, under the driver contract in force (lab, ClusterPolicy or "
        "NVIDIADriver, and the operator release's os-tag rule). Each pool (OS, driver) whose image is not "
        "in the matrix (or, with --registry, the registry): a heading with the image, then `NODE MISSING "
        "IMAGE` per node. Exit 0 every node ready (`OK: N GPU nodes ready for kernel K`), 1 a node without "
        "its image or without a tag, 2 an error, a kernel that cannot be part of a tag, or no GPU node "
        "(--allow-empty).",
        (
            ("gpudrv preflight --from clusters/lab --kernel 5.15.0-119-generic", "the pools that lack it"),
            ("gpudrv preflight -l pool=a100 --kernel 6.8.0-60-generic", "live, one pool"),
            ("gpudrv preflight --kernel 6.8.0-60-generic --registry", "gpudrv.yaml's registry instead"),
        ),
    ),
    "matrix": Usage(
        "validate, extend, verify and trace the support matrix",
        "The support matrix is a CSV of the driver images that were built: driver_branch,kernel,os_tag.",
        (
            ("gpudrv matrix validate", "matrix/support-matrix.csv is well-formed"),
            ("gpudrv matrix add 550 6.8.0-52-generic ubuntu24.04", "append a row"),
        ),
    ),
    "matrix validate": Usage(
        "check the matrix file",
        "Every problem as FILE:LINE: message. Exit 0 valid, 2 invalid.",
        (
            ("gpudrv matrix validate", "matrix/support-matrix.csv (or gpudrv.yaml's matrix)"),
            ("gpudrv matrix validate matrix/gpu-operator.csv", "another file"),
        ),
    ),
    "matrix add": Usage(
        "append a row for an image that was built",
        "Checked before writing, under a lock; the rest of the file is left as it is. Exit 0 added (or "
        "already there), 2 refused.",
        (
            ("gpudrv matrix add 550 6.8.0-52-generic ubuntu24.04", "by its parts"),
            ("gpudrv matrix add --tag 550-6.8.0-52-generic-ubuntu24.04", "by its image tag"),
        ),
    ),
    "matrix verify": Usage(
        "check every row's image is in the OCI registry",
        "HEAD of each row's manifest in the registry (credentials from $REGISTRY_AUTH_FILE or the docker "
        "config, else anonymous). Exit 0 all there, 1 a row without its image, 2 an error.",
        (
            ("gpudrv matrix verify --registry registry.example.com/nvidia/driver", "every row's image"),
            ("gpudrv matrix verify --list-tags", "also the tags the matrix lacks (gpudrv.yaml's registry)"),
        ),
    ),
    "matrix fill": Usage(
        "copy the images the fleet lacks from an upstream registry, plan the builds of the rest",
        "For each image the GPU nodes need and the matrix lacks (MISSING, NEXT-MISSING): ADD the row if "
        "the target registry (--registry) has it, COPY it from --upstream (every platform, digests "
        "verified) and add the row, or BUILD it (-o github-matrix: a workflow's build matrix). Rows are "
        "added only for images verified in the target. Exit 0 all filled, 1 a build needed or a copy "
        "failed, 2 an error.",
        (
            ("gpudrv matrix fill --upstream nvcr.io/nvidia/driver --dry-run", "the plan"),
            ("gpudrv matrix fill --upstream nvcr.io/nvidia/driver", "copy, verify, add the rows"),
            (
                "gpudrv matrix fill -o github-matrix",
                "the builds, for strategy.matrix (gpudrv.yaml's registries)",
            ),
        ),
    ),
    "matrix history": Usage(
        "every row ever in the matrix: added and removed by which commit, author, date, PR",
        "One pass over the first-parent git history of the matrix file (needs a full clone). A merged "
        "pull request's rows belong to the commit that landed them.",
        (("gpudrv matrix history", "a table"), ("gpudrv matrix history -o json", "as JSON")),
    ),
    "matrix impact": Usage(
        "rows added/removed since REF, and each GPU node's audit status before and after",
        "The nodes: under --from DIR, else gpudrv.yaml's fleet, else live (also live with --kubeconfig or "
        "--context). Exit 1 when a node that had its image at REF would lose it, 2 an error or no GPU "
        "node (--allow-empty).",
        (
            ("gpudrv matrix impact --base main --from clusters/lab", "the working tree against main"),
            ("gpudrv matrix impact --base origin/main -o markdown", "for a pull request's summary"),
        ),
    ),
    "manifests": Usage(
        "check the Node manifests of the desired fleet",
        "",
        (("gpudrv manifests validate --from clusters/lab", "every Node manifest against its schema"),),
    ),
    "manifests validate": Usage(
        "check every Node manifest against schemas/node-manifest.schema.json",
        "Every problem as FILE:LINE: message, at the label at fault. Exit 0 valid, 2 invalid.",
        (
            ("gpudrv manifests validate --from clusters/lab", "the lab's nodes"),
            ("gpudrv manifests validate", "gpudrv.yaml's fleet, else clusters/"),
        ),
    ),
    "plan": Usage(
        "the upgrades git asks for, their steps and gates",
        f"{LIVE} {DESIRED} Exit 0 nothing blocked, 1 an upgrade blocked by a gate (image, budget), 2 an "
        "error or no GPU node (--allow-empty).",
        (
            ("gpudrv plan --from clusters/lab", "each node to upgrade: target, steps, gates"),
            ("gpudrv plan --merged-ref origin/main -o json", "gpudrv.yaml's fleet, as JSON"),
        ),
    ),
    "apply": Usage(
        "upgrade nodes to their desired driver",
        f"{LIVE} {DESIRED} In the lab gpudrv runs each step; with the GPU Operator's driver resources in "
        "DIR it stages the operator's rollout (canary, batches); --hold / --await-sync when a GitOps "
        "engine applies the driver resources. -o json/yaml: the progress on stderr, one object at the end; "
        "-o github: a step summary too. Exit 0 done, 1 blocked or failed, 2 an error or no GPU node "
        "(--allow-empty).",
        (
            ("gpudrv apply --from clusters/lab --dry-run", "the plan; nothing changes"),
            ("gpudrv apply --from clusters/prod --canary 1 --batch 5", "the operator's rollout, staged"),
            ("gpudrv apply --from clusters/prod --hold", "before Argo CD or Flux syncs: hold the nodes"),
            ("gpudrv apply --from clusters/prod --await-sync", "after the sync: canary and batches"),
        ),
    ),
    "drain": Usage(
        "cordon and evict, naming the budget that refuses",
        f"{LIVE} Like kubectl drain, through the eviction API. Exit 0 drained, 1 refused (the node stays "
        "cordoned unless --preflight) or timed out, 2 an error.",
        (
            ("gpudrv drain lab-node-1 --preflight", "refuse before cordoning when a budget would"),
            ("gpudrv drain lab-node-1 --timeout 20s", "give up after 20 seconds"),
        ),
    ),
    "status": Usage(
        "one line per GPU node: driver, desired driver, image, upgrade state, what blocks it",
        f"{LIVE} --from DIR adds the desired driver from git. Exit 0, 2 an error or no GPU node "
        "(--allow-empty).",
        (
            ("gpudrv status --from clusters/lab", "the lab, live, against its manifests"),
            ("gpudrv status -l pool=a100 -o json", "one pool, as JSON"),
        ),
    ),
    "report": Usage(
        "NODES, SKEW, MATRIX_ROWS, per-node tag; -o html: the fleet page",
        "Live, or offline with --from DIR. -o html writes one self-contained HTML page (coverage grid, "
        "upgrade states, matrix history). Exit 0, 2 an error or no GPU node (--allow-empty).",
        (
            ("gpudrv report --from clusters/lab", "the lab's numbers"),
            ("gpudrv report -o html > fleet.html", "the fleet page, live"),
        ),
    ),
    "explain": Usage(
        "which nodes a workload may run on, why not the others, and CUDA driver checks",
        "Pods, Jobs, CronJobs, Deployments and StatefulSets (their pod templates) from --from DIR, or live "
        "pods. Exit 1 when a workload fits no node or a node's driver is too old for its CUDA image (with "
        "-o github only the latter: fitting no node is a warning there).",
        (
            ("gpudrv explain pod/cuda13-job --from clusters/lab", "why it stays Pending"),
            ("gpudrv explain -n gpu-drv", "every live pod of a namespace"),
        ),
    ),
    "diff": Usage(
        "node labels, PDB specs and GPU Operator driver resources in git against the live cluster",
        f"{LIVE} {DESIRED} Like kubectl diff: '-' live, '+' desired. Exit 0 no drift, 1 drift, 2 error.",
        (
            ("gpudrv diff --from clusters/lab", "the lab in git against the cluster"),
            ("gpudrv diff -l pool=a100 -o json", "gpudrv.yaml's fleet, one pool, as JSON"),
        ),
    ),
    "init": Usage(
        "start a fleet repository: gpudrv.yaml, the matrix, a cluster, workflows, pre-commit",
        "Writes gpudrv.yaml, matrix/support-matrix.csv, clusters/NAME/ (driver resources, Node manifests), "
        ".github/workflows/{pr,audit,apply}.yml and .pre-commit-config.yaml (a local hook: the gpudrv on "
        "PATH). The workflows are pinned to this gpudrv's commit, or --action. Never overwrites: a file "
        "already there is exit 2, and nothing is written.",
        (
            ("gpudrv init fleet", "an example fleet in ./fleet"),
            ("gpudrv init --from-cluster --context prod", "the live cluster's GPU nodes and images"),
        ),
    ),
    "reconcile": Usage(
        "run in the cluster: pull the fleet repo, watch GPU nodes, report (metrics, events)",
        "A long-running loop: fetches --branch of --repo every --interval (or on POST /sync), lists and "
        "watches the GPU nodes, audits each node the moment it joins or its labels change, and serves "
        "/metrics, /healthz and /readyz; Node events DriverImageMissing. One replica acts (Lease leader "
        f"election). Audit only, unless --apply. SIGTERM stops it between steps. {LIVE}",
        (
            ("gpudrv reconcile --repo https://github.com/acme/fleet --once", "one audit, as a CronJob"),
            ("gpudrv reconcile --repo https://github.com/acme/fleet --check-access", "its RBAC, checked"),
        ),
    ),
    "probe": Usage(
        "run on a node: the kernel it boots next, as an NFD feature file",
        "Reads the boot loader's files under --root (GRUB's grub.cfg and grubenv on Debian and Ubuntu, BLS "
        "entries on RHEL 8 and 9) as the boot loader would, and prints (or --write writes, atomically) "
        "a features.d file with gpudrv.dev/kernel-version.next=KERNEL, absent when the next kernel is "
        "the running one. Exit 0 decided, 2 cannot decide (one line saying why; --write removes the file).",
        (
            ("gpudrv probe --root /host", "print the feature file"),
            ("gpudrv probe --root /host --write /features.d/gpudrv-next-kernel", "write it atomically"),
            (
                "gpudrv probe --root /host --write /features.d/gpudrv-next-kernel --every 10m",
                "the DaemonSet's loop",
            ),
        ),
    ),
}


def of(name: str) -> dict[str, Any]:
    """add_parser's keyword arguments for `name` ("audit", "matrix add"): help, description, epilog."""
    usage = USAGE[name]
    return {"help": usage.summary, **texts(usage)}


def texts(usage: Usage) -> dict[str, Any]:
    """description and epilog, kept as written (argparse would join the example lines)."""
    summary = usage.summary[0].upper() + usage.summary[1:] + "."
    details = textwrap.fill(usage.details, WIDTH) if usage.details else ""
    width = max(len(line) for line, _ in usage.examples)
    examples = [f"  {line:<{width}}  # {what}" for line, what in usage.examples]
    return {
        "description": summary + (f"\n\n{details}" if details else ""),
        "epilog": "examples:\n" + "\n".join(examples),
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
