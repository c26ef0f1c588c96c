"""The registry's pure parts (repository names, WWW-Authenticate, Link, the comparison) and the
credentials from an auth file. HTTP itself is tested against a real registry in tests/registry."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from reconciler.adapters.files import schemas
from reconciler.adapters.registry import credentials
from reconciler.core.images import matrix, registry
from reconciler.errors import GpudrvError


@pytest.mark.parametrize(
    ("text", "host", "path"),
    [
        ("registry.example.com/nvidia/driver", "registry.example.com", "nvidia/driver"),
        ("127.0.0.1:5000/nvidia/driver", "127.0.0.1:5000", "nvidia/driver"),
        ("localhost/driver", "localhost", "driver"),
        ("nvcr.io/nvidia/driver", "nvcr.io", "nvidia/driver"),
        ("docker.io/ubuntu", "docker.io", "library/ubuntu"),
    ],
)
def test_repository(text: str, host: str, path: str) -> None:
    repository = registry.parse_repository(text)
    assert (repository.host, repository.path) == (host, path)
    assert repository.reference("x") == f"{host}/{path}:x"


def test_docker_hub_api_host() -> None:
    assert registry.parse_repository("docker.io/nvidia/driver").api_host == "registry-1.docker.io"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("nvidia/driver", "does not start with a registry host"),
        ("registry.example.com", "no repository"),
        ("https://registry.example.com/nvidia/driver", "without https://"),
        ("registry.example.com/nvidia/driver:550", "without a tag or digest"),
        ("registry.example.com/nvidia/driver@sha256:00", "without a tag or digest"),
        ("registry.example.com/Nvidia/driver", "'Nvidia' is not a repository name"),
        ("registry.example.com:port/nvidia", "does not start with a registry host"),
        ("registry.example.com/a\nb", "is not a repository name"),
    ],
)
def test_repository_refused(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        registry.parse_repository(text)


def test_challenges() -> None:
    [bearer] = registry.challenges(
        'Bearer realm="https://auth.example.com/token",service="registry.example.com",'
        'scope="repository:nvidia/driver:pull",error="invalid_token"'
    )
    assert bearer.scheme == "bearer"
    assert bearer.params == {
        "realm": "https://auth.example.com/token",
        "service": "registry.example.com",
        "scope": "repository:nvidia/driver:pull",
        "error": "invalid_token",
    }
    basic, token = registry.challenges('Basic realm="a, b \\"c\\"", Bearer realm="https://x/t" , service=reg')
    assert (basic.scheme, basic.params) == ("basic", {"realm": 'a, b "c"'})
    assert (token.scheme, token.params) == ("bearer", {"realm": "https://x/t", "service": "reg"})
    assert registry.challenges("") == []
    assert [item.scheme for item in registry.challenges("Negotiate")] == ["negotiate"]


def test_next_link() -> None:
    assert registry.next_link('</v2/nvidia/driver/tags/list?last=b&n=2>; rel="next"') == (
        "/v2/nvidia/driver/tags/list?last=b&n=2"
    )
    assert registry.next_link('<https://x/a>; rel="prev", <https://x/b>; rel=next') == "https://x/b"
    assert registry.next_link('<https://x/a>; rel="prev"') is None
    assert registry.next_link(None) is None


def test_token_and_tags_answers() -> None:
    assert registry.token_of({"token": "t", "access_token": "a"}) == "t"
    assert registry.token_of({"access_token": "a"}) == "a"
    assert registry.token_of({"token": ""}) is None
    assert registry.token_of([]) is None
    assert registry.tags_of({"name": "x", "tags": None}) == []
    assert registry.tags_of({"tags": ["a", "b"]}) == ["a", "b"]
    assert registry.tags_of({"tags": [1]}) is None
    assert registry.tags_of("x") is None


def test_verify_compares_rows_and_tags() -> None:
    row_schema = schemas.load("matrix-row")
    parsed = matrix.parse(
        "driver_branch,kernel,os_tag\n550,5.15.0-119-generic,ubuntu22.04\n535,5.15.0-107-generic,ubuntu22.04\n",
        row_schema,
    )
    repository = registry.parse_repository("registry.example.com/nvidia/driver")
    exists = {"550-5.15.0-119-generic-ubuntu22.04": True, "535-5.15.0-107-generic-ubuntu22.04": False}
    listed = ["550-5.15.0-119-generic-ubuntu22.04", "570-6.8.0-45-generic-ubuntu24.04", "latest", "r550-x-y"]
    result = registry.verify(repository, parsed, exists, listed, row_schema)
    assert [row.line for row in result.missing] == [3]
    assert (result.checked, result.present, result.ok) == (2, 1, False)
    assert [extra.tag for extra in result.extra or ()] == ["570-6.8.0-45-generic-ubuntu24.04"]
    assert result.other_tags == 2
    assert [key.as_csv() for key in result.rows_to_add()] == ["570,6.8.0-45-generic,ubuntu24.04"]
    assert registry.verify(repository, parsed, exists).extra is None


# --- credentials ---------------------------------------------------------------------------------

REPOSITORY = registry.parse_repository("registry.example.com/nvidia/driver")


def auth_file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps(document))
    return path


def encoded(pair: str) -> str:
    return base64.b64encode(pair.encode()).decode()


def test_credentials_from_auth_and_from_username_password(tmp_path: Path) -> None:
    path = auth_file(tmp_path, {"auths": {"https://registry.example.com/v1/": {"auth": encoded("u:p:w")}}})
    creds = credentials.for_repository(REPOSITORY, path)
    assert creds is not None
    assert (creds.username, creds.password, creds.source) == ("u", "p:w", path)
    path = auth_file(tmp_path, {"auths": {"registry.example.com": {"username": "v", "password": "q"}}})
    creds = credentials.for_repository(REPOSITORY, path)
    assert creds is not None
    assert (creds.username, creds.password) == ("v", "q")
    assert creds.basic() == "Basic " + encoded("v:q")


def test_the_most_specific_entry_wins(tmp_path: Path) -> None:
    path = auth_file(
        tmp_path,
        {
            "auths": {
                "registry.example.com": {"auth": encoded("host:1")},
                "registry.example.com/nvidia": {"auth": encoded("nvidia:2")},
                "other.example.com": {"auth": encoded("other:3")},
            }
        },
    )
    creds = credentials.for_repository(REPOSITORY, path)
    assert creds is not None
    assert creds.username == "nvidia"
    assert (
        credentials.for_repository(registry.parse_repository("registry.example.com/x"), path).username
        == "host"
    )  # type: ignore[union-attr]


def test_no_entry_is_anonymous(tmp_path: Path) -> None:
    assert credentials.for_repository(REPOSITORY, auth_file(tmp_path, {"auths": {}})) is None
    assert credentials.for_repository(REPOSITORY, auth_file(tmp_path, {"credsStore": "desktop"})) is None


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"credHelpers": {"registry.example.com": "ecr-login"}}, "kept by docker-credential-ecr-login"),
        (
            {"auths": {"registry.example.com": {}}, "credsStore": "desktop"},
            "kept by docker-credential-desktop",
        ),
        ({"auths": {"registry.example.com": {"auth": "!!"}}}, "auth is not base64 of username:password"),
        (
            {"auths": {"registry.example.com": {"auth": encoded("nocolon")}}},
            "not base64 of username:password",
        ),
        ({"auths": {"registry.example.com": {"identitytoken": "x"}}}, "identity token"),
        ({"auths": []}, "auths must be a JSON object"),
    ],
)
def test_credentials_refused(tmp_path: Path, document: object, complaint: str) -> None:
    with pytest.raises(GpudrvError, match=complaint):
        credentials.for_repository(REPOSITORY, auth_file(tmp_path, document))


def test_auth_file_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    assert credentials.auth_file() is None
    (tmp_path / ".docker").mkdir()
    (tmp_path / ".docker" / "config.json").write_text("{}")
    assert credentials.auth_file() == tmp_path / ".docker" / "config.json"
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "elsewhere"))
    assert credentials.auth_file() is None
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "missing.json"))
    assert credentials.auth_file() == tmp_path / "missing.json"
    with pytest.raises(GpudrvError, match=r"missing\.json: no such file"):
        credentials.for_repository(REPOSITORY)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", "")
    with pytest.raises(GpudrvError, match="empty path"):
        credentials.auth_file()


def test_not_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text('{\n  "auths": {\n')
    with pytest.raises(GpudrvError) as caught:
        credentials.for_repository(REPOSITORY, path)
    assert (caught.value.file, caught.value.line) == (str(path), 3)
