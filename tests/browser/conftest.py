"""The browser tier: headless Chromium from Debian's packages, installed here when it is missing.

Nothing here skips: if Chromium cannot be had, every browser test fails with the reason."""

from __future__ import annotations

import pytest

from tests.browser import chromium


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.path):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser_binary() -> str:
    try:
        return chromium.install()
    except chromium.Unavailable as exc:
        pytest.fail(f"headless Chromium is needed for the browser tests: {exc}", pytrace=False)
