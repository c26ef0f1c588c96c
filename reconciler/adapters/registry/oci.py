"""The OCI registry over HTTPS: does a tag's manifest exist (HEAD), and which tags are there (tags/list);
and the requests transfer.py copies an image with (`request`, streamed bodies, push scopes).

The few calls of the OCI distribution API gpudrv needs, over urllib3 (installed with the kubernetes
client; an import contract allows it here and in the Kubernetes gateway). No OCI client library on
PyPI fits: oras-py sends requests without a timeout and retries a refused connection five times with
sleeps of up to 83 s, and keeps one token for all threads; python-dxf builds on requests with an
unmaintained header parser (www-authenticate, 2015) and tqdm. See docs/registry.md.

Authentication follows the registry's challenge: a 401 with `WWW-Authenticate: Bearer realm=...,
service=..., scope=...` is answered by a token from the realm (sending the Basic credentials, if any);
`Basic` by the credentials themselves. The credentials are credentials.py's (the auth file); without
an entry for the host gpudrv asks anonymously.

Every request has a timeout; a registry that is down, refuses or answers what the protocol does not
allow is one GpudrvError naming it (exit 2). Trust: the system's CAs, or $SSL_CERT_FILE.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler import __version__
from reconciler.adapters.registry import credentials
from reconciler.core.images.registry import (
    Challenge,
    Repository,
    challenges,
    next_link,
    tags_of,
    token_of,
    token_scopes,
)
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    import urllib3

    Response = urllib3.BaseHTTPResponse

T = TypeVar("T")
R = TypeVar("R")
Body = bytes | Callable[[], Iterable[bytes]]  # a factory: called again when a 401 makes gpudrv resend

CONCURRENCY = 8  # requests in flight at once
CONNECT_TIMEOUT = 5.0  # seconds: a host that does not answer fails fast
READ_TIMEOUT = 20.0  # seconds for an answer once connected
PAGE_SIZE = 1000  # tags per tags/list page (the registry may give fewer; Link says where the rest is)
MAX_PAGES = 10_000
USER_AGENT = {"User-Agent": f"gpudrv/{__version__}"}
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)


class RegistryFailure(GpudrvError):
    """The registry as a whole fails: down, TLS, credentials or pushes refused. Every other request to
    it would fail the same way, so a caller stops instead of trying the rest."""


# --- the client ----------------------------------------------------------------------------------


class Client:
    """One repository's registry: HEAD manifests and list tags, authenticating as challenged. Thread
    safe: requests share one connection pool and one authorization (a token, refreshed once when the
    registry refuses it)."""

    def __init__(
        self,
        repository: Repository,
        creds: credentials.Credentials | None,
        concurrency: int = CONCURRENCY,
        timeout: tuple[float, float] = (CONNECT_TIMEOUT, READ_TIMEOUT),
        scopes: Sequence[str] = (),
    ) -> None:
        import urllib3

        self.repository, self.creds, self.concurrency = repository, creds, concurrency
        # What a token must allow besides what the challenge names: pull, or pull,push on a target.
        self.scopes = tuple(scopes) or (repository.scope,)
        self.base = f"https://{repository.api_host}/v2/{repository.path}"
        self._pool = urllib3.PoolManager(
            maxsize=concurrency,
            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
            # One retry of a dropped connection; a refused one fails at once. Statuses are ours to read.
            retries=urllib3.Retry(total=2, connect=0, read=1, redirect=5, status=0, raise_on_status=False),
            headers=USER_AGENT,  # the pool's default, used when a request gives no headers: _send adds it
        )
        self._timeout = timeout
        self._authorization: str | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.clear()

    @property
    def where(self) -> str:
        return f"registry {self.repository.host}"

    # --- the two questions ---

    def exists(self, tag: str) -> bool:
        """Does the repository have a manifest for the tag? (HEAD /v2/<name>/manifests/<tag>)"""
        url = f"{self.base}/manifests/{urllib.parse.quote(tag, safe='')}"
        response = self._request("HEAD", url, {"Accept": MANIFEST_TYPES})
        if response.status == 200:
            return True
        if response.status == 404:
            return False
        raise self._unexpected(response, f"HEAD {self.repository.reference(tag)}")

    def exists_all(self, tags: Sequence[str]) -> dict[str, bool]:
        """`exists` for every tag, at most `concurrency` requests at once (see `each`)."""
        return self.each(self.exists, tags)

    def each(self, ask: Callable[[T], R], items: Sequence[T]) -> dict[T, R]:
        """`ask` for every distinct item, at most `concurrency` at once. The first goes alone, so the
        challenge is answered once and a registry that is down fails once; the first error stops the
        rest."""
        if not items:
            return {}
        answers = {items[0]: ask(items[0])}
        rest = [item for item in dict.fromkeys(items[1:]) if item not in answers]
        with concurrent.futures.ThreadPoolExecutor(self.concurrency, thread_name_prefix="gpudrv-oci") as pool:
            futures = {pool.submit(ask, item): item for item in rest}
            done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
            failed = next((future for future in done if future.exception() is not None), None)
            if failed is not None:
                pool.shutdown(wait=True, cancel_futures=True)
                raise failed.exception()  # type: ignore[misc]
            answers.update((futures[future], future.result()) for future in done)
        return answers

    def tags(self) -> list[str]:
        """Every tag of the repository, page by page as the Link header leads (a repository the
        registry does not know has none)."""
        url: str | None = f"{self.base}/tags/list?n={PAGE_SIZE}"
        found: list[str] = []
        seen: set[str] = set()
        while url is not None:
            if url in seen or len(seen) >= MAX_PAGES:
                raise GpudrvError(f"{self.where}: the tags/list pages of {self.repository} do not end")
            seen.add(url)
            response = self._request("GET", url, {"Accept": "application/json"})
            if response.status == 404:
                return found
            if response.status != 200:
                raise self._unexpected(response, f"GET the tags of {self.repository}")
            try:
                page = tags_of(json.loads(response.data))
            except (ValueError, UnicodeDecodeError):
                page = None
            if page is None:
                raise GpudrvError(f"{self.where}: the tags of {self.repository} are not a tags/list answer")
            found += page
            link = next_link(response.headers.get("Link"))
            url = self.same_origin(urllib.parse.urljoin(url, link)) if link else None
        return found

    # --- HTTP with the registry's auth challenge ---

    def _request(self, method: str, url: str, headers: Mapping[str, str]) -> urllib3.BaseHTTPResponse:
        return self.request(method, url, headers)

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: Body | None = None,
        *,
        stream: bool = False,
        write: bool = False,
    ) -> urllib3.BaseHTTPResponse:
        """One request, answering the registry's challenge. `stream`: the body is read by the caller
        (close the response); `write`: a push, whose refusal is one `refuses pushes` line."""
        sent = self._authorization
        response = self._send(method, url, headers, sent, body, stream)
        if response.status != 401:
            return response
        challenge = response.headers.get("WWW-Authenticate", "")
        response.drain_conn()
        with self._lock:
            if self._authorization == sent:  # no other thread answered the challenge meanwhile
                self._authorization = self._authorize(challenge, sent)
            authorization = self._authorization
        response = self._send(method, url, headers, authorization, body, stream)
        if response.status == 401:
            offered = challenges(response.headers.get("WWW-Authenticate", ""))
            if any(item.get("error") == "insufficient_scope" for item in offered) and self.creds is not None:
                if write:
                    raise self.refuses_pushes("answered 401 insufficient_scope")
                raise RegistryFailure(f"{self.where}: {self.repository} denies access (insufficient_scope)")
            raise self._refused()
        return response

    def _send(  # noqa: PLR0917
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        authorization: str | None,
        body: Body | None = None,
        stream: bool = False,
    ) -> urllib3.BaseHTTPResponse:
        import urllib3

        sent = {**USER_AGENT, **headers, **({"Authorization": authorization} if authorization else {})}
        data = body() if callable(body) else body
        # A body read from a stream cannot be sent twice: no retries then.
        options: dict[str, Any] = {"retries": False} if callable(body) else {}
        try:
            return self._pool.request(
                method, url, headers=sent, body=data, preload_content=not stream, **options
            )
        except urllib3.exceptions.HTTPError as exc:
            raise RegistryFailure(f"{self.where}: {self._failure(exc, url)}") from None

    def refuses_pushes(self, detail: str) -> RegistryFailure:
        """The one line for a registry that will not take writes from these credentials."""
        host = self.repository.host
        who = (
            f"for {self.creds.username} from {self.creds.source}"
            if self.creds is not None
            else f"without credentials (none for {host}: docker login {host}, or ${credentials.AUTH_FILE})"
        )
        return RegistryFailure(f"{self.where}: refuses pushes to {self.repository} {who} ({detail})")

    def _failure(self, exc: Exception, url: str) -> str:
        import urllib3

        reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason else exc
        origin = urllib.parse.urlsplit(url).netloc
        if isinstance(reason, urllib3.exceptions.SSLError):
            return (
                f"TLS with {origin} failed: {_last_words(reason)} (a private CA: point $SSL_CERT_FILE at its "
                "certificate)"
            )
        # Subclasses first: NameResolutionError is a NewConnectionError, which is a ConnectTimeoutError.
        if isinstance(reason, urllib3.exceptions.NameResolutionError):
            return f"cannot resolve {origin.rsplit(':', 1)[0]}"
        if isinstance(reason, urllib3.exceptions.NewConnectionError):
            return f"cannot connect to {origin}: {_last_words(reason)}"
        if isinstance(reason, urllib3.exceptions.ConnectTimeoutError):
            return f"{origin} did not accept a connection within {self._timeout[0]:g} s"
        if isinstance(reason, urllib3.exceptions.ReadTimeoutError):
            return f"{origin} did not answer within {self._timeout[1]:g} s"
        return f"request to {origin} failed: {_last_words(reason)}"

    def _authorize(self, header: str, refused: str | None) -> str:
        """The Authorization that answers the challenge (the caller holds the lock)."""
        offered = challenges(header)
        bearer = next((item for item in offered if item.scheme == "bearer"), None)
        if bearer is not None:
            return "Bearer " + self._token(bearer)
        if any(item.scheme == "basic" for item in offered):
            if self.creds is None or refused is not None:
                raise self._refused()
            return self.creds.basic()
        schemes = ", ".join(sorted({item.scheme for item in offered})) or "none"
        raise GpudrvError(
            f"{self.where}: answered 401 with an authentication scheme gpudrv does not speak ({schemes}); "
            "it speaks Bearer (token) and Basic"
        )

    def _token(self, challenge: Challenge) -> str:
        import urllib3

        realm = challenge.get("realm") or ""
        parts = urllib.parse.urlsplit(realm)
        if parts.scheme != "https" or not parts.netloc:
            raise GpudrvError(
                f"{self.where}: its token service {realm!r} is not an https URL; gpudrv sends no "
                "credentials there"
            )
        service = challenge.get("service")
        query = [("service", service)] if service else []
        query += [("scope", scope) for scope in token_scopes(challenge.get("scope"), self.scopes)]
        separator = "&" if parts.query else "?"
        url = realm + separator + urllib.parse.urlencode(query)
        headers = {**USER_AGENT, "Accept": "application/json"}
        if self.creds is not None:
            headers["Authorization"] = self.creds.basic()
        try:
            response = self._pool.request("GET", url, headers=headers)
        except urllib3.exceptions.HTTPError as exc:
            raise RegistryFailure(f"{self.where}: its token service: {self._failure(exc, url)}") from None
        if response.status in (401, 403):
            raise self._refused(f"its token service at {parts.netloc} answered {response.status}")
        if response.status != 200:
            raise self._unexpected(response, f"a token from {parts.netloc}")
        try:
            token = token_of(json.loads(response.data))
        except (ValueError, UnicodeDecodeError):
            token = None
        if token is None:
            raise GpudrvError(f"{self.where}: its token service at {parts.netloc} gave no token")
        return token

    def _refused(self, how: str = "answered 401") -> RegistryFailure:
        if self.creds is None:
            return RegistryFailure(
                f"{self.where}: {how}: {self.repository} needs credentials, and there are none for "
                f"{self.repository.host} (docker login {self.repository.host}, or ${credentials.AUTH_FILE})"
            )
        return RegistryFailure(
            f"{self.where}: {how}: the credentials of {self.creds.username} from {self.creds.source} "
            f"are refused for {self.repository}"
        )

    def chunks(self, response: urllib3.BaseHTTPResponse, url: str, size: int) -> Iterator[bytes]:
        """A streamed answer's body in pieces, each read under the client's read timeout."""
        import urllib3

        try:
            yield from response.stream(size)
        except urllib3.exceptions.HTTPError as exc:
            raise RegistryFailure(f"{self.where}: {self._failure(exc, url)}") from None

    def unexpected(self, response: urllib3.BaseHTTPResponse, what: str) -> GpudrvError:
        return self._unexpected(response, what)

    def _unexpected(self, response: urllib3.BaseHTTPResponse, what: str) -> GpudrvError:
        status = f"{response.status} {response.reason or ''}".strip()
        if response.status == 403:
            return GpudrvError(f"{self.where}: {what}: access denied ({status})")
        return GpudrvError(f"{self.where}: {what}: answered {status}")

    def same_origin(self, url: str, what: str = "its next tags/list page") -> str:
        """A Link to the next page (an upload's Location) stays on the registry: credentials go nowhere
        else."""
        if urllib.parse.urlsplit(url).netloc != urllib.parse.urlsplit(self.base).netloc:
            raise GpudrvError(f"{self.where}: {what} is on another host")
        return url


def _last_words(exc: BaseException) -> str:
    """The useful end of an exception's text: `[Errno 111] Connection refused`, not the object repr."""
    text = str(exc)
    if "[Errno" in text:
        return text[text.index("[Errno") :].strip()
    marker = "Failed to establish a new connection: "
    return text.rsplit(marker, 1)[-1].strip() if marker in text else text.strip() or type(exc).__name__


@contextmanager
def connect(
    repository: Repository, concurrency: int = CONCURRENCY, scopes: Sequence[str] = ()
) -> Iterator[Client]:
    """A client for the repository with the credentials the auth file has for it (or none); `scopes`
    for a token beyond pulling the repository (transfer.connect_target asks to push)."""
    client = Client(repository, credentials.for_repository(repository), concurrency, scopes=scopes)
    try:
        yield client
    finally:
        client.close()
