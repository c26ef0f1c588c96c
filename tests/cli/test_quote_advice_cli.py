"""Issue 18, item 3 through the real entry point: the advice quotes the file's text."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_gpudrv

NODE = "clusters/lab/nodes/lab-node-0.yaml"
VERSION_ID = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
REV = "nvidia.com/cuda.driver.rev"


def unquote(lab: Path, key: str, form: str) -> None:
    path = lab / NODE
    lines = path.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
    lines[index] = f"    {key}: {form}  # unquoted"
    path.write_text("\n".join(lines) + "\n")


def test_audit_and_manifests_validate_quote_what_the_file_says(lab: Path) -> None:
    unquote(lab, VERSION_ID, "22.10")
    unquote(lab, REV, "06")
    audit = run_gpudrv("audit", "--from", "clusters/lab", "-o", "text", cwd=lab)
    assert audit.returncode == 2
    assert audit.stdout == ""
    assert audit.stderr == (  # the first label at fault
        f"gpudrv: {NODE}:13: node lab-node-0: label {REV} must be a string; "
        'quote it: "06" (unquoted, YAML reads 06 as the number 6)\n'
    )
    validate = run_gpudrv("manifests", "validate", "--from", "clusters/lab", "-o", "text", cwd=lab)
    assert validate.returncode == 2
    assert validate.stderr == ""
    assert validate.stdout.splitlines() == [
        f'{NODE}:13: label {REV} must be a string; quote it: "06" (unquoted, YAML reads 06 as the number 6)',
        f"{NODE}:16: label {VERSION_ID} must be a string; "
        'quote it: "22.10" (unquoted, YAML reads 22.10 as the number 22.1)',
    ]


def test_yaml_1_1_floats_without_a_dot_give_one_line_and_no_warning(lab: Path) -> None:
    path = lab / NODE
    path.write_text("%YAML 1.1\n---\n" + path.read_text().replace('rev: "07"', "rev: 7e0"))
    result = run_gpudrv("tag", "lab-node-0", "--from", "clusters/lab", cwd=lab)
    assert result.returncode == 2
    assert result.stderr == (
        f"gpudrv: {NODE}:15: node lab-node-0: label {REV} must be a string; "
        'quote it: "7e0" (unquoted, YAML reads 7e0 as the number 7.0)\n'
    )


def test_explain_quotes_a_node_selector_value_as_written(lab: Path) -> None:
    jobs = lab / "clusters/lab/workloads/cuda-jobs.yaml"
    jobs.write_text(jobs.read_text().replace('values: ["22.04"]', "values: [22.10]"))
    result = run_gpudrv("explain", "--from", "clusters/lab", cwd=lab)
    assert result.returncode == 2
    assert result.stderr.endswith(
        ".matchExpressions[1].values[0] must be a string; "
        'quote it: "22.10" (unquoted, YAML reads 22.10 as the number 22.1)\n'
    )
    assert len(result.stderr.splitlines()) == 1
