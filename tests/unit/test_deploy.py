"""deploy/ and the Dockerfile read as files: the containers' arguments are ones gpudrv takes, the
probes ask what the loop serves, the pods run as nobody on a read-only root filesystem.
(tests/e2e/reconcile renders them with kubectl kustomize and has the API server check them.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.cli import build_parser
from tests.conftest import REPO

DEPLOY = REPO / "deploy"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in YAML(typ="safe", pure=True).load_all(path.read_text()) if doc]


def container(kind: str) -> dict[str, Any]:
    path = DEPLOY / ("base/deployment.yaml" if kind == "Deployment" else "cronjob/cronjob.yaml")
    (doc,) = documents(path)
    spec = (
        doc["spec"]["template"]["spec"]
        if kind == "Deployment"
        else doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    )
    (found,) = spec["containers"]
    return {"pod": spec, **found}


def parsed(args: list[str]) -> Any:
    """As the kubelet expands $(VAR) from the container's env, then gpudrv's parser."""
    expanded = [re.sub(r"\$\((\w+)\)", lambda m: f"value-of-{m.group(1)}", arg) for arg in args]
    return build_parser().parse_args(expanded)


def test_the_deployment_runs_the_loop_with_arguments_gpudrv_takes() -> None:
    found = container("Deployment")
    args = parsed(found["args"])
    assert args.command == "reconcile" and not args.apply and not args.once
    assert args.repo == "value-of-GPUDRV_REPO" and str(args.workdir) == "/var/lib/gpudrv"
    port = int(args.listen.rpartition(":")[2])
    assert {p["name"]: p["containerPort"] for p in found["ports"]} == {"metrics": port}
    assert found["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert found["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {item["name"] for item in found["env"]}
    assert {"POD_NAME", "POD_NAMESPACE", "GPUDRV_REPO", "GPUDRV_BRANCH"} <= env
    (deployment,) = documents(DEPLOY / "base/deployment.yaml")
    assert deployment["spec"]["replicas"] == 2


def test_the_cronjob_audits_once() -> None:
    args = parsed(container("CronJob")["args"])
    assert args.command == "reconcile" and args.once


@pytest.mark.parametrize("kind", ["Deployment", "CronJob"])
def test_non_root_read_only_with_resources(kind: str) -> None:
    found = container(kind)
    pod_security = found["pod"]["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] != 0
    assert pod_security["seccompProfile"]["type"] == "RuntimeDefault"
    security = found["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= set(found["resources"]["requests"]) and "memory" in found["resources"][
        "limits"
    ]
    # The only writable places are emptyDirs: the clone and /tmp.
    volumes = {volume["name"]: volume for volume in found["pod"]["volumes"]}
    writable = [mount for mount in found["volumeMounts"] if not mount.get("readOnly")]
    assert {mount["mountPath"] for mount in writable} == {"/var/lib/gpudrv", "/tmp"}
    assert all("emptyDir" in volumes[mount["name"]] for mount in writable)


def test_the_apply_overlay_adds_apply_and_only_writes() -> None:
    (kustomization,) = documents(DEPLOY / "overlays/apply/kustomization.yaml")
    assert "--apply" in kustomization["patches"][0]["patch"]
    role, _binding = documents(DEPLOY / "overlays/apply/apply-role.yaml")
    resources = {resource for rule in role["rules"] for resource in rule["resources"]}
    assert "secrets" not in resources and "pods/eviction" in resources
    verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert "delete" not in verbs and "*" not in verbs


def test_no_role_in_deploy_grants_secrets_or_wildcards() -> None:
    for path in DEPLOY.rglob("*.yaml"):
        for doc in documents(path):
            for rule in doc.get("rules") or []:
                assert "secrets" not in rule["resources"], path
                assert "*" not in rule["verbs"] and "*" not in rule["resources"], path


def test_the_dockerfile_is_slim_python_and_non_root() -> None:
    text = (REPO / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", text, re.M)
    assert bases and all(base.startswith("python:3.11-slim") for base in bases)
    (user,) = re.findall(r"^USER (\S+)", text, re.M)
    assert user.split(":")[0] not in ("0", "root")
    assert re.search(r'^ENTRYPOINT \["gpudrv"\]', text, re.M)


# --- deploy/probe: the next-kernel probe on every GPU node (issue 24) ---------------------------------

PROBE = DEPLOY / "probe"
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"  # NFD's local source (local.go 65)


def probe_pod() -> dict[str, Any]:
    (doc,) = documents(PROBE / "daemonset.yaml")
    assert doc["kind"] == "DaemonSet"
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def test_the_probe_daemonset_runs_the_probe_with_arguments_gpudrv_takes() -> None:
    (found,) = probe_pod()["containers"]
    args = parsed(found["args"])
    assert args.command == "probe" and args.every == 600 and str(args.root) == "/host"
    assert str(args.write.parent) == FEATURES_D and not args.write.name.startswith(".")  # NFD skips dot files
    mounts = {mount["mountPath"]: mount for mount in found["volumeMounts"]}
    assert mounts[FEATURES_D].get("readOnly") is not True
    trigger = f"{args.root}/{args.trigger}"
    assert any(trigger.startswith(path + "/") and mounts[path]["readOnly"] for path in mounts)


def test_the_probe_reads_the_host_read_only_with_no_capabilities_on_gpu_nodes_only() -> None:
    pod = probe_pod()
    (found,) = pod["containers"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    for mount in found["volumeMounts"]:
        host_path = volumes[mount["name"]]["hostPath"]["path"]
        if mount["mountPath"] != FEATURES_D:
            assert mount["readOnly"] is True and mount["mountPath"] == "/host" + host_path
        else:
            assert host_path == FEATURES_D
    security = found["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"] and "add" not in security["capabilities"]
    assert not security.get("privileged") and not pod.get("hostPID") and not pod.get("hostNetwork")
    assert pod["automountServiceAccountToken"] is False
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "memory" in found["resources"]["limits"]


def test_the_kernel_hooks_run_after_the_boot_loader_s_own() -> None:
    hooks = PROBE / "hooks"
    debian, rhel = hooks / "zzz-gpudrv-probe", hooks / "99-zzz-gpudrv-probe.install"
    # run-parts: names of [A-Za-z0-9_-] only, C-locale order; after zz-update-grub.
    assert re.fullmatch(r"[A-Za-z0-9_-]+", debian.name) and debian.name > "zz-update-grub"
    # kernel-install: `sort -V` (the same as this key for these names); after 99-grub-mkconfig.install.
    assert sorted(["99-grub-mkconfig.install", "20-grub.install", rhel.name])[-1] == rhel.name
    for hook in (debian, rhel):
        assert hook.stat().st_mode & 0o111 and hook.read_text().rstrip().endswith("exit 0")
        assert "/var/lib/gpudrv-probe/trigger" in hook.read_text()
