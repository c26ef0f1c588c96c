"""POST /sync on the real `gpudrv reconcile` process (issue 30, item 3): a signed push webhook and a
bearer token fetch at once; unsigned, wrongly signed, replayed and oversized requests are refused and
fetch nothing; stuck clients do not keep the probes from answering."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket

from tests.e2e.reconcile.conftest import FAST, SYNC_SECRET, Deployed, Loop, Loops, Remote, wait_until


def commit_in_force(loop: Loop) -> str | None:
    found = loop.series("gpudrv_commit_info")
    return found[0]["commit"] if found else None


def counted(loop: Loop, result: str) -> float:
    return loop.value("gpudrv_sync_requests_total", result=result) or 0.0


def signed(body: bytes, secret: str = SYNC_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_only_a_verified_caller_makes_the_loop_fetch(
    deployed: Deployed, remote: Remote, loops: Loops
) -> None:
    # --interval 1h: a fetch within the test is the one /sync asked for, nothing else.
    loop = loops.start(
        "a", "--no-leader-election", *FAST, "--interval", "1h", kubeconfig=deployed.kubeconfig, remote=remote
    )
    wait_until("the loop ready", lambda: loop.get("/readyz")[0] == 200, 60, [loop])
    first = commit_in_force(loop)

    pushed = remote.push_row("550,6.2.0-9-generic,ubuntu22.04")
    push = json.dumps({"ref": "refs/heads/main", "after": pushed}).encode()
    refused = {
        "unsigned": loop.post("/sync", push, {}),
        "wrong secret": loop.post("/sync", push, {"X-Hub-Signature-256": signed(push, "guess")}),
        "wrong token": loop.post("/sync", b"", {"Authorization": "Bearer guess"}),
    }
    assert refused == {"unsigned": 401, "wrong secret": 401, "wrong token": 401}
    assert counted(loop, "unauthorized") == 3
    assert commit_in_force(loop) == first  # nothing was fetched

    # The git host's push webhook, signed: fetched at once.
    headers = {"X-Hub-Signature-256": signed(push), "X-GitHub-Delivery": "e2e-1", "X-GitHub-Event": "push"}
    assert loop.post("/sync", push, headers) == 202
    wait_until("the pushed commit in force", lambda: commit_in_force(loop) == pushed, 20, [loop])
    assert loop.post("/sync", push, headers) == 409  # the same delivery again
    assert counted(loop, "replayed") == 1

    # An oversized body is refused before it is read.
    with socket.create_connection(("127.0.0.1", loop.port), timeout=5) as raw:
        raw.sendall(
            b"POST /sync HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\n"
            b"Content-Length: 104857600\r\n\r\n"
        )
        assert raw.recv(1024).split(b" ", 2)[1] == b"413"

    # A CI job with the bearer token.
    second = remote.push_row("550,6.2.0-10-generic,ubuntu22.04")
    assert loop.post("/sync") in (202,)
    wait_until("the second commit in force", lambda: commit_in_force(loop) == second, 30, [loop])
    assert loop.stop() == 0


def test_stuck_clients_do_not_starve_the_probes(deployed: Deployed, remote: Remote, loops: Loops) -> None:
    loop = loops.start("a", "--no-leader-election", *FAST, kubeconfig=deployed.kubeconfig, remote=remote)
    wait_until("the loop ready", lambda: loop.get("/readyz")[0] == 200, 60, [loop])
    stuck = []
    try:
        for number in range(300):  # connections that never finish their request
            raw = socket.create_connection(("127.0.0.1", loop.port), timeout=5)
            raw.sendall(b"POST /sync HTTP/1.1\r\n" if number % 2 else b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            stuck.append(raw)
        # A kubelet probe waits 1 s by default (timeoutSeconds): each answers within it.
        for path in ("/healthz", "/readyz", "/metrics"):
            with socket.create_connection(("127.0.0.1", loop.port), timeout=1) as probe:
                probe.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                assert probe.recv(64).split(b" ", 2)[1] == b"200", path
    finally:
        for raw in stuck:
            raw.close()
    assert loop.stop() == 0
