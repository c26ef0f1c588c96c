"""gpudrv's requirement check against the NVIDIA Container Toolkit's own, over a few thousand cases.

The toolkit (the version tests/toolkit/go.mod pins) is built as a Go test binary with
tests/toolkit/differential_test.go.txt compiled into its internal/requirements package (harness.py,
cached; the first run builds it, about half a minute). A failed build fails these tests: they are never
skipped. `python -m tests.toolkit.differential` prints the same counts.
"""

from __future__ import annotations

import pytest

from tests.toolkit import corpus
from tests.toolkit.differential import Report, run

pytestmark = pytest.mark.toolkit


@pytest.fixture(scope="module")
def report() -> Report:
    return run()


def test_gpudrv_agrees_with_the_toolkit_on_every_case(report: Report) -> None:
    shown = "\n".join(report.mismatches[:30])
    assert not report.mismatches, f"{report.summary()}\nfirst mismatches:\n{shown}"
    assert report.agreements == report.cases == len(corpus.HAND) + corpus.GENERATED


def test_the_corpus_reaches_every_verdict_and_category(report: Report) -> None:
    """A corpus the toolkit mostly rejects as malformed (or always passes) would prove little."""
    assert set(report.by_verdict) == {"satisfied", "unsatisfied", "invalid"}, report.summary()
    assert min(report.by_verdict.values()) >= report.cases // 10, report.summary()
    assert {category for category, _, _ in corpus.HAND} <= set(report.by_category)
    generated = [name for name in report.by_category if name.startswith("generated-")]
    assert len(generated) == 4 and min(report.by_category[name] for name in generated) >= 100, (
        report.summary()
    )
