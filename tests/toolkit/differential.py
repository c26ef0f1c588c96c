"""gpudrv's requirement check (reconciler/core/cuda/cuda_require.py) against the toolkit's, case by case.

    python -m tests.toolkit.differential    # builds the toolkit's test binary if needed, prints counts

Per case the two must agree on: the environment's error, NVIDIA_DISABLE_REQUIRE, the requirements found
(as a multiset: the toolkit reads a map), each requirement alone (its parse error or its unmet-condition
text, verbatim), and the whole verdict (satisfied, unsatisfied or invalid) with a message the toolkit
could have printed (with several failing requirements the toolkit's map order picks one).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.core.cuda.cuda_require import NodeFacts, Requirement, check, evaluate, image_requirements
from tests.toolkit import corpus, harness


@dataclass
class Report:
    cases: int = 0
    agreements: int = 0
    by_category: Counter[str] = field(default_factory=Counter)
    agreed_by_category: Counter[str] = field(default_factory=Counter)
    by_verdict: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        lines = [
            f"{self.cases} cases, {self.agreements} agreements, {len(self.mismatches)} mismatches "
            f"({self.seconds:.1f} s with the toolkit run)",
            "toolkit verdicts: "
            + ", ".join(f"{name} {count}" for name, count in sorted(self.by_verdict.items())),
        ]
        lines += [
            f"  {name}: {self.agreed_by_category[name]}/{count}"
            for name, count in sorted(self.by_category.items())
        ]
        return "\n".join(lines)


def toolkit_state(verdict: Mapping[str, Any]) -> str:
    if verdict["image_error"] or verdict["requirements_error"]:
        return "invalid"
    if verdict["ok"]:
        return "satisfied"
    return "invalid" if any(one["parse_error"] for one in verdict["requirements"]) else "unsatisfied"


def disagreements(case: Mapping[str, Any], verdict: Mapping[str, Any]) -> list[str]:
    """What gpudrv says differently from the toolkit's verdict on this case (empty: they agree)."""
    node = NodeFacts(cuda=case["cuda"], driver=case["driver"], arch=case["arch"], brand=case["brand"])
    image = image_requirements(case["env"])
    ours = evaluate(image, node)
    found: list[str] = []
    theirs_error = verdict["image_error"] or verdict["requirements_error"]
    if image.error != theirs_error:
        found.append(f"environment error: toolkit {theirs_error!r}, gpudrv {image.error!r}")
    if not theirs_error and image.disabled != verdict["disabled"]:
        found.append(f"NVIDIA_DISABLE_REQUIRE: toolkit {verdict['disabled']}, gpudrv {image.disabled}")
    theirs_texts = sorted(one["text"] for one in verdict["requirements"])
    ours_texts = sorted(requirement.text for requirement in image.requirements)
    if theirs_texts != ours_texts:
        found.append(f"requirements: toolkit {theirs_texts!r}, gpudrv {ours_texts!r}")
    for one in verdict["requirements"]:
        failure = check(Requirement("", one["text"]), node)
        parse = failure.message if failure and failure.invalid else ""
        unmet = failure.message if failure and not failure.invalid else ""
        if (parse, unmet) != (one["parse_error"], one["assert_error"]):
            found.append(
                f"requirement {one['text']!r}: toolkit parse {one['parse_error']!r} assert "
                f"{one['assert_error']!r}, gpudrv parse {parse!r} assert {unmet!r}"
            )
    state = toolkit_state(verdict)
    if state != ours.state:
        found.append(f"verdict: toolkit {state}, gpudrv {ours.state}")
    elif state != "satisfied":
        possible = (
            {ours.error}
            if ours.error
            else {f.message for f in ours.failures if f.invalid == (state == "invalid")}
        )
        message = theirs_error or verdict["error"]
        if message not in possible:
            found.append(f"message: toolkit {message!r}, gpudrv could say {sorted(possible)!r}")
    return found


def run(cases: list[dict[str, Any]] | None = None) -> Report:
    cases = corpus.generate() if cases is None else cases
    binary = harness.ensure_built()
    report = Report()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpudrv-toolkit-") as work:
        plain = [{key: value for key, value in case.items() if key != "category"} for case in cases]
        verdicts = harness.toolkit_verdicts(binary, plain, Path(work))
    if len(verdicts) != len(cases):
        raise harness.BuildError(f"the toolkit judged {len(verdicts)} of {len(cases)} cases")
    for case, verdict in zip(cases, verdicts, strict=True):
        report.cases += 1
        report.by_category[case["category"]] += 1
        report.by_verdict[toolkit_state(verdict)] += 1
        found = disagreements(case, verdict)
        if found:
            report.mismatches.append(
                f"{case['id']} ({case['category']}) env={case['env']!r} node="
                f"{ {k: case[k] for k in ('cuda', 'driver', 'arch', 'brand')} }: " + "; ".join(found)
            )
        else:
            report.agreements += 1
            report.agreed_by_category[case["category"]] += 1
    report.seconds = time.monotonic() - started
    return report


def main() -> int:
    report = run()
    print(report.summary())
    for line in report.mismatches[:50]:
        print(line)
    return 1 if report.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
