"""`gpudrv apply --from DIR` on a GPU Operator fleet: gate, stage and watch the operator's own upgrade.

gpudrv never writes the upgrade-state label here: the operator's upgrade controller owns it. The
rollout's order and decisions are core/rollout/staging.py's (Staging); its ports on the cluster and
stdout are adapters/cluster/staging.py's: ClusterStaging reads the nodes and writes the holds and the
driver resources (server-side apply, field manager gpudrv), the node watch feeds its WatchInbox, and
Printed sends its lines to stdout and its outcomes to the -o json record. This module builds them
and runs the loop: the upgrade policy it follows, the CUDA gate before it, and --release.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.adapters import desired, kube
from reconciler.adapters.cluster import gpu_operator
from reconciler.adapters.cluster.fleet import Fleet, SystemHost
from reconciler.adapters.cluster.staging import ClusterStaging, Printed, say
from reconciler.adapters.sources import no_gpu_node
from reconciler.commands import FINDINGS, OK, cuda_gates, upgrades
from reconciler.commands.settings import ApplySettings
from reconciler.core.contract.desired import HELM_KINDS, Desired
from reconciler.core.contract.operator import Kind
from reconciler.core.rollout import supervise
from reconciler.core.rollout.staging import Staging
from reconciler.core.rollout.supervise import HELD
from reconciler.core.upgrades.upgrade import SKIP_LABEL
from reconciler.errors import GpudrvError


def run(
    settings: ApplySettings, state: Desired, options: kube.Options, record: upgrades.Record | None = None
) -> int:
    """The staged rollout of `state` (adapters/desired.py: operator mode); `record` (-o json, yaml,
    github) gets the outcome of each node it moves."""
    record = record or upgrades.Record()
    images = upgrades.load_images(settings.matrix, settings.merged_ref)
    fleet = upgrades.connect(options)
    if settings.release:
        return _release_all(fleet, settings, record)
    state = desired.on_cluster(state, fleet.gateway)
    record.mode, record.desired = str(state.mode), state.as_json()
    settings = _helm_owned(settings, state)
    rules = _policy(fleet, state)
    cluster = ClusterStaging(fleet, state, settings.selector, images.working)
    staging = Staging(cluster, SystemHost(), Printed(record), settings, rules=rules, images=images)
    facts = staging.start()
    if not facts and not settings.allow_empty:
        matching = f" matching -l {settings.selector.text()}" if settings.selector else ""
        where = f"in the cluster at {fleet.host}{matching} is selected by the driver resources in"
        raise no_gpu_node(f"no GPU node {where} {settings.from_dir}")
    refused = cuda_gates.operator_refusals(fleet, state, settings.selector, settings.cuda)
    for name, detail in refused:
        say(f"{name}: cuda gate: {detail}")
        record.note(name, "blocked", detail)
    if refused:
        say("nothing was changed")
        return FINDINGS
    return OK if staging.run() else FINDINGS


def _helm_owned(settings: ApplySettings, state: Desired) -> ApplySettings:
    """Resources a Helm installation renders are Helm's (or its GitOps engine's) to write, never
    gpudrv's: without --hold, apply waits for that sync (--await-sync) and says so. A fleet that also
    declares driver resources of its own: gpudrv applies those, and awaits the rendered ones."""
    if not state.rendered or not settings.applies:
        return settings
    owners = ", ".join(dict.fromkeys(source.where for source in state.sources if source.kind in HELM_KINDS))
    rendered = ", ".join(item.ref for item in state.rendered)
    if state.declared:
        declared = ", ".join(item.ref for item in state.declared)
        say(
            f"{rendered} rendered from Helm values ({owners}): gpudrv never applies them and waits for Helm "
            f"or the GitOps engine to; it applies the resources declared in {settings.from_dir} ({declared})"
        )
        return settings
    say(
        f"the driver resources are rendered from Helm values ({owners}): gpudrv never applies them; it "
        "holds the moving nodes and waits for Helm or the GitOps engine to apply them (--await-sync)"
    )
    return replace(settings, await_sync=True)


def _policy(fleet: Fleet, state: Desired) -> supervise.Policy:
    """The upgrade policy the operator will follow: the ClusterPolicy in git (the one that hands over to
    NVIDIADrivers too), else the live one."""
    policies = [item for item in (*state.declared, *state.rendered) if item.kind is Kind.CLUSTER_POLICY]
    if not policies:
        policies = [
            item for item in gpu_operator.live_resources(fleet.gateway) if item.kind is Kind.CLUSTER_POLICY
        ]
    if not policies:
        raise GpudrvError("no ClusterPolicy in DIR or in the cluster: the operator has no upgrade policy")
    rules = supervise.policy(policies[0].upgrade_policy)
    if not rules.auto_upgrade:
        raise GpudrvError(
            f"{policies[0].where}: spec.driver.upgradePolicy.autoUpgrade is not true, so the operator's "
            "upgrade controller rolls nothing out (it removes the state labels); set it to stage a rollout"
        )
    return rules


def _release_all(fleet: Fleet, settings: ApplySettings, record: upgrades.Record) -> int:
    held = [
        live.node.name
        for live in fleet.gpu_nodes(settings.selector)
        if live.node.labels.get(SKIP_LABEL) == "true" and HELD in live.annotations
    ]
    for name in held:
        fleet.patch_node(name, labels={SKIP_LABEL: None}, annotations={HELD: None})
        print(f"{name}: released (gpudrv's skip label removed)")
        record.note(name, "released")
    print(f"released {len(held)} node(s) gpudrv held; the operator upgrades them now")
    return OK
