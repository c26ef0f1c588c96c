"""The parts of the copy (adapters/registry/transfer.py) that need no registry: which repository a
blob mounts from, and the blobs tags copied at once share (sent by one, counted present by the rest)."""

from __future__ import annotations

import threading

import pytest

from reconciler.adapters.registry import transfer
from reconciler.core.images.oci_image import digest_of
from reconciler.core.images.registry import Repository

BLOB = digest_of(b"layer")


def test_a_mount_is_only_between_two_repositories_of_one_registry() -> None:
    source = Repository("registry.example.com", "nvidia/driver")
    assert (
        transfer.mounts_from(source, Repository("registry.example.com", "mirror/driver")) == "nvidia/driver"
    )
    assert transfer.mounts_from(source, Repository("registry.example.com:5000", "mirror/driver")) is None
    assert transfer.mounts_from(source, source) is None


def test_a_shared_blob_is_sent_once_and_the_others_count_it_present() -> None:
    shared = transfer.SharedBlobs()
    started, release = threading.Event(), threading.Event()
    sent: list[str] = []

    def send() -> str:
        started.set()
        release.wait(10)
        sent.append("sent")
        return "sent"

    outcomes: list[str] = []
    first = threading.Thread(target=lambda: outcomes.append(shared.ensure(BLOB, send)))
    first.start()
    started.wait(10)
    second = threading.Thread(target=lambda: outcomes.append(shared.ensure(BLOB, send)))
    second.start()
    release.set()
    first.join(10)
    second.join(10)
    assert sent == ["sent"]
    assert sorted(outcomes) == ["present", "sent"]
    assert shared.ensure(BLOB, send) == "present"


def test_after_a_failed_send_the_next_tag_tries_itself() -> None:
    shared = transfer.SharedBlobs()

    def fail() -> str:
        raise RuntimeError("the upload broke")

    with pytest.raises(RuntimeError):
        shared.ensure(BLOB, fail)
    assert shared.ensure(BLOB, lambda: "sent") == "sent"
