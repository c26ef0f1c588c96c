"""`gpudrv manifests validate [--from DIR]`: every Node manifest against schemas/node-manifest.schema.json.

Every problem is reported as `file:line: message` at the label (or field) at fault, all at once, like
`matrix validate`: exit 0 valid, 2 invalid. Broken YAML in one file does not hide the other files.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.ci import github
from reconciler.adapters.files.node_manifests import check
from reconciler.commands import ERROR, OK, Output
from reconciler.render import document, manifests


def validate(folder: Path, output: Output) -> int:
    report = check(folder)
    if output is Output.GITHUB:
        github.publish(manifests.annotate(report), manifests.summary(report), manifests.verdict(report))
    elif output.structured:
        print(document.text(manifests.as_json(report), output))
    elif report.problems:
        print("\n".join(problem.text() for problem in report.problems))  # one write: 50,000 lines are many
    else:
        print(manifests.verdict(report))
    return ERROR if report.problems else OK
