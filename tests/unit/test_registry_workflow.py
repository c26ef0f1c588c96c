"""The scheduled audit workflow verifies the matrix against the registry (issue 15); actionlint and
zizmor check the whole file in test_workflows.py."""

from __future__ import annotations

from tests.unit.test_workflows import steps


def test_audit_workflow_verifies_the_matrix_against_the_registry() -> None:
    [verify] = [step for step in steps("audit.yml") if "gpudrv matrix verify" in step.get("run", "")]
    assert verify["if"] == "${{ !cancelled() }}"  # also after an audit that found a node without its image
    assert verify["env"] == {"REGISTRY_AUTH_DATA": "${{ secrets.REGISTRY_AUTH }}"}
    script = verify["run"]
    assert "umask 077" in script
    assert "trap 'rm -f \"$auth\"' EXIT" in script
    assert 'export REGISTRY_AUTH_FILE="$auth"' in script
