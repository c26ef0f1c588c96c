"""The next kernel through the real Node Feature Discovery (v0.17.3, tests/e2e/nfd.py): `gpudrv probe`
writes its feature file on a fixture host root, nfd-worker's local source reads it and publishes a
NodeFeature object, nfd-master labels the kwok node, and `gpudrv audit` reads the label live, as does
`gpudrv reconcile` (tests/e2e/reconcile/conftest.py), whose metric is the reboot gate."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from reconciler.core.boot import Memory
from tests.conftest import REPO
from tests.e2e.conftest import FakeNodes, Kube
from tests.e2e.nfd import Nfd
from tests.e2e.reconcile.conftest import FAST, Deployed, Loops, Remote, wait_until
from tests.unit.boot_roots import ubuntu

NEXT = "gpudrv.dev/kernel-version.next"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
VERSION_ID = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
# nfd-master's record of the labels it owns (api/nfd/v1alpha1/annotations_labels.go:50-51).
NFD_LABELS = "nfd.node.kubernetes.io/feature-labels"
RUNNING = "6.8.0-45-generic"
UPCOMING = "6.8.0-52-generic"  # what the fixture's grub.cfg boots first
NEXT_SERIES = "gpudrv_node_next_kernel_image_missing"  # the reconciler's reboot gate


def host_root(folder: Path, root: Memory) -> Path:
    for path, data in root.files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data or b"")
    return folder


def probe(kube: Kube, root: Path, memory: Memory, out: Path) -> None:
    """`gpudrv probe --write` on a host root made of `memory`."""
    result = kube.gpudrv("probe", "--root", str(host_root(root, memory)), "--write", str(out))
    assert result.returncode == 0, result.stderr


def labels(kube: Kube, node: str) -> dict[str, str]:
    found: dict[str, str] = kube.get("node", node)["metadata"].get("labels") or {}
    return found


def wait_for_label(kube: Kube, nfd: Nfd, node: str, value: str | None) -> None:
    def there() -> bool:
        nfd.check_running()
        return labels(kube, node).get(NEXT) == value

    try:
        kube.wait_for(f"node {node} to have {NEXT}={value}", there, timeout=90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; node labels {labels(kube, node)}\n{nfd.logs()}") from None


def test_nfd_labels_the_next_kernel_and_audit_and_the_reconciler_see_it(  # noqa: PLR0917 (fixtures)
    kube: Kube,
    nodes: FakeNodes,
    nfd: Nfd,
    deployed: Deployed,
    remote: Remote,
    loops: Loops,
    unique: str,
    tmp_path: Path,
) -> None:
    # The reconciler first, as deploy/'s ServiceAccount, following the fleet repository: it starts
    # while NFD does.
    loop = loops.start(
        "a", "--lease-namespace", deployed.namespace, *FAST, kubeconfig=deployed.kubeconfig, remote=remote
    )
    node = nodes.add_gpu(f"{unique}-gpu", {KERNEL: RUNNING, VERSION_ID: "24.04"})
    features = tmp_path / "features.d"
    features.mkdir()
    feature_file = features / "gpudrv-next-kernel"
    probe(kube, tmp_path / "host", ubuntu(running=RUNNING), feature_file)
    assert feature_file.read_text().splitlines()[-1] == f"{NEXT}={UPCOMING}"

    nfd.start(node, features)
    wait_for_label(kube, nfd, node, UPCOMING)
    # NFD's own path: the worker's NodeFeature object in its namespace, the master's record on the node.
    feature = kube.get("nodefeatures.nfd.k8s-sigs.io", node, "-n", nfd.namespace)
    assert feature["spec"]["labels"] == {NEXT: UPCOMING}
    assert feature["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": node}
    assert kube.get("node", node)["metadata"]["annotations"][NFD_LABELS] == NEXT
    assert labels(kube, node)[KERNEL] == RUNNING  # the test's own labels are not NFD's to remove

    # The fleet's matrix has the running kernel's image (550, RUNNING, ubuntu24.04), not the next one's.
    def audit() -> tuple[int, str, str]:
        result = kube.gpudrv("audit", "--matrix", str(remote.matrix), "-l", nodes.selector)
        return result.returncode, result.stdout, result.stderr

    tag = f"550-{UPCOMING}-ubuntu24.04"
    assert audit() == (1, f"{node} NEXT-MISSING {tag} (kernel {UPCOMING}, at its next reboot)\n", "")
    wait_until(
        "the next-kernel series",
        lambda: loop.series(NEXT_SERIES, node=node) == [{"node": node, "kernel": UPCOMING, "tag": tag}],
        60,
        [loop],
    )
    assert loop.series("gpudrv_node_image_missing", node=node) == []  # the running kernel has its image

    # The image is built and its row added with `matrix add`, committed and pushed to the fleet
    # repository: audit passes, and the reconciler's series goes at its next fetch (--interval 1s).
    added = kube.gpudrv("matrix", "add", "--matrix", str(remote.matrix), "--tag", tag)
    assert added.returncode == 0, added.stderr
    assert audit() == (0, "OK\n", "")
    commit = remote.push(f"matrix: {tag}")
    took = wait_until(
        "the next-kernel series gone", lambda: not loop.series(NEXT_SERIES, node=node), 15, [loop]
    )
    print(f"push -> next-kernel series gone: {took:.2f}s")
    assert loop.series("gpudrv_commit_info")[0]["commit"] == commit

    # The node reboots into that kernel: NFD's kernel source would move the running label, and the
    # probe, run again, finds the next kernel is the running one and writes the file without the
    # label; nfd-master removes it from the node.
    kube.run("label", "node", node, f"{KERNEL}={UPCOMING}", "--overwrite")
    probe(kube, tmp_path / "rebooted", ubuntu(running=UPCOMING), feature_file)
    assert NEXT not in feature_file.read_text()
    wait_for_label(kube, nfd, node, None)
    assert NFD_LABELS not in (kube.get("node", node)["metadata"].get("annotations") or {})
    assert audit() == (0, "OK\n", "")
    assert loop.stop() == 0


def test_the_probe_daemonset_writes_where_nfd_reads(nfd_module: Path) -> None:
    """deploy/probe's features.d is the directory NFD's local source reads (source/local/local.go) and
    the hostPath NFD's own manifests mount there (deployment/components/common/worker-mounts.yaml)."""
    local = (nfd_module / "source/local/local.go").read_text()
    (read,) = re.findall(r'^\s*featureFilesDir\s*=\s*"([^"]+)"', local, re.M)
    nfd_mounts = yaml.safe_load((nfd_module / "deployment/components/common/worker-mounts.yaml").read_text())
    nfd_host = {v["name"]: v.get("hostPath", {}).get("path") for v in nfd_mounts[0]["value"]}["features-d"]
    nfd_mount = {m["name"]: m["mountPath"] for m in nfd_mounts[1]["value"]}["features-d"]
    assert read.rstrip("/") == nfd_host.rstrip("/") == nfd_mount.rstrip("/")

    pod = yaml.safe_load((REPO / "deploy/probe/daemonset.yaml").read_text())["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "features"]
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "features"]
    (write,) = [a.removeprefix("--write=") for a in container["args"] if a.startswith("--write=")]
    assert volume["hostPath"]["path"] == read.rstrip("/")
    assert not mount.get("readOnly") and Path(write).parent == Path(mount["mountPath"])
