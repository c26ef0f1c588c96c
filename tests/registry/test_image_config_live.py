"""Reading the GPU workloads' image configs (adapters/registry/image_config.py, issue 27) from real
registries: distribution with TLS and token auth (htpasswd too), images pushed by crane with the
NVIDIA_REQUIRE_CUDA env the CUDA images carry, what reached the registry counted in its access log.
No mocked HTTP."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reconciler.adapters.registry.image_config import ImageConfig, read_configs
from reconciler.core.cuda import cuda_require
from tests.registry import harness
from tests.registry.harness import PASSWORD, USER, Registry

pytestmark = pytest.mark.registry

REQUIRE_128 = "cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=unknown,driver>=535,driver<536"
CUDA_128 = {
    "NVIDIA_REQUIRE_CUDA": REQUIRE_128,
    "CUDA_VERSION": "12.8.1",
    "PATH": "/usr/local/cuda/bin:/usr/bin",
}
CUDA_124 = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4", "CUDA_VERSION": "12.4.1"}
CONFIG_GET = r"/v2/nvidia/driver/blobs/sha256:[0-9a-f]{64}"


def env_of(variables: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"{name}={value}" for name, value in variables.items())


def use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_configs_of_an_index_a_single_image_and_tags_sharing_one(
    upstream: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = upstream.push_index("cuda-12.8", env=CUDA_128)
    single = upstream.push_image("cuda-12.4", CUDA_124)
    upstream.crane("tag", f"{upstream.repository}:cuda-12.4", "cuda-12.4-alias")
    plain = upstream.push_image("no-env", {})
    use(monkeypatch, harness.pair_env(tmp_path / "gpudrv", [(upstream, USER, PASSWORD)]))
    repo = upstream.repository
    requests = [
        (f"{repo}:cuda-12.8", "linux/amd64"),
        (f"{repo}:cuda-12.8", "linux/arm64"),
        (f"{repo}@{index}", "linux/arm64/v8"),
        (f"{repo}:cuda-12.4", "linux/amd64"),
        (f"{repo}:cuda-12.4-alias", "linux/amd64"),
        (f"{repo}:wrong-tag@{single}", "linux/amd64"),  # the digest wins
        (f"{repo}:no-env", "linux/amd64"),
        (f"{repo}:cuda-12.8", "linux/s390x"),
        (f"{repo}:missing", "linux/amd64"),
        (f"{repo}@sha256:{'0' * 64}", "linux/amd64"),
        ("Not A Reference", "linux/amd64"),
        (f"{repo}:cuda-12.8", "amd64"),
    ]
    found = read_configs(requests, concurrency=4)
    assert list(found) == requests

    platform_digest = {
        platform: upstream.crane("digest", "--platform", platform, f"{repo}:cuda-12.8").strip()
        for platform in harness.PLATFORMS
    }
    expected_128 = env_of(CUDA_128)
    assert found[requests[0]] == ImageConfig(*requests[0], platform_digest["linux/amd64"], expected_128)
    assert found[requests[1]] == ImageConfig(*requests[1], platform_digest["linux/arm64"], expected_128)
    assert found[requests[2]] == ImageConfig(*requests[2], platform_digest["linux/arm64"], expected_128)
    for request in requests[3:6]:
        assert found[request] == ImageConfig(*request, single, env_of(CUDA_124))
    assert found[requests[6]] == ImageConfig(*requests[6], plain, ())

    requirements = cuda_require.image_requirements(found[requests[0]].env or ())
    assert [item.text for item in requirements.requirements] == [REQUIRE_128]

    for request, note in [
        (requests[7], f"{repo}:cuda-12.8 has no linux/s390x image (its platforms: linux/amd64, linux/arm64)"),
        (requests[8], f"registry {upstream.host}: has no manifest {repo}:missing"),
        (requests[9], f"registry {upstream.host}: has no manifest {repo}@sha256:{'0' * 64}"),
        (requests[10], "'Not A Reference': path component 'Not A Reference' is not a repository name"),
        (requests[11], "'amd64' is no platform"),
    ]:
        result = found[request]
        assert (result.digest, result.env) == (None, None), result
        assert note in result.note and "\n" not in result.note, result.note

    # The manifest of cuda-12.8 once for its three platforms asked, each config once: amd64, arm64,
    # the single image (three references to it), the one without env.
    assert upstream.count("GET", CONFIG_GET, 200) == 4
    assert upstream.count("GET", r"/v2/nvidia/driver/manifests/cuda-12\.8", 200) == 1
    assert upstream.count("GET", r"/v2/nvidia/driver/manifests/cuda-12\.4", 200) == 1


def test_wrong_credentials_and_a_registry_down_are_notes_for_their_images(
    upstream: Registry,
    target: Registry,
    basic_registry: Registry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for registry in (upstream, target, basic_registry):
        registry.push_image("cuda-12.4", CUDA_124)
    users = [(upstream, USER, "wrong"), (target, USER, PASSWORD), (basic_registry, USER, PASSWORD)]
    use(monkeypatch, harness.pair_env(tmp_path / "gpudrv", users))
    target.stop()
    requests = [
        (f"{registry.repository}:{tag}", "linux/amd64")
        for registry in (upstream, target, basic_registry)
        for tag in ("cuda-12.4", "other")
    ]
    found = read_configs(requests)
    assert found[requests[4]].env == env_of(CUDA_124)  # the good registry (Basic auth) still answers
    assert found[requests[5]].note == f"registry {basic_registry.host}: has no manifest {requests[5][0]}"
    for request in requests[:2]:
        assert found[request] == ImageConfig(
            *request,
            None,
            None,
            f"registry {upstream.host}: its token service at localhost:{upstream.token_port} answered 401: "
            f"the credentials of {USER} from {tmp_path / 'gpudrv' / 'auth.json'} are refused for "
            f"{upstream.repository}",
        )
    for request in requests[2:4]:
        assert found[request] == ImageConfig(
            *request,
            None,
            None,
            f"registry {target.host}: cannot connect to {target.host}: [Errno 111] Connection refused",
        )
    assert upstream.count("GET", CONFIG_GET) == 0


def test_a_config_whose_bytes_do_not_match_its_digest_is_a_note(
    upstream: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.push_image("cuda-12.4", CUDA_124)
    upstream.push_image("cuda-12.8", CUDA_128)
    config = json.loads(upstream.crane("manifest", f"{upstream.repository}:cuda-12.4"))["config"]["digest"]
    hex_part = config.removeprefix("sha256:")
    blobs = upstream.root / "storage" / "docker" / "registry" / "v2" / "blobs" / "sha256"
    blob = blobs / hex_part[:2] / hex_part / "data"
    tampered = blob.read_bytes().replace(b"12.4.1", b"99.9.9")  # the same size, other bytes
    blob.write_bytes(tampered)
    use(monkeypatch, harness.pair_env(tmp_path / "gpudrv", [(upstream, USER, PASSWORD)]))
    requests = [(f"{upstream.repository}:{tag}", "linux/amd64") for tag in ("cuda-12.4", "cuda-12.8")]
    found = read_configs(requests)
    hashed = "sha256:" + hashlib.sha256(tampered).hexdigest()
    assert found[requests[0]] == ImageConfig(
        *requests[0],
        None,
        None,
        f"registry {upstream.host}: config {config}: the bytes of {config} hash to {hashed}",
    )
    assert found[requests[1]].env == env_of(CUDA_128)
