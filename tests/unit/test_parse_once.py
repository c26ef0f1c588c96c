"""Issue 18: explain, plan and diff read nodes, workloads and budgets from the same files; each file's
text is parsed once, and an edited file is parsed again."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reconciler import cli
from reconciler.adapters.files import manifests
from reconciler.commands import upgrades
from reconciler.errors import GpudrvError


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter[Path]:
    counted: Counter[Path] = Counter()
    parse = manifests._parse

    def counting(path: Path, text: str) -> Any:
        counted[path] += 1
        return parse(path, text)

    monkeypatch.setattr(manifests, "_parse", counting)
    monkeypatch.setattr(manifests, "_parsed", {})
    return counted


def test_explain_parses_each_file_once(
    lab: Path, parses: Counter[Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(lab)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert cli.main(["explain", "--from", "clusters/lab", "-o", "json"]) in (0, 1)
    capsys.readouterr()
    files = manifests.manifest_files(Path("clusters/lab"))
    assert files and parses == Counter(dict.fromkeys(files, 1))


def test_plan_and_diff_read_nodes_and_budgets_with_one_parse(lab: Path, parses: Counter[Path]) -> None:
    (lab / "clusters/lab/pdb.yaml").write_text(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: b\nspec:\n  minAvailable: 1\n"
    )
    desired = upgrades.load_declared(lab / "clusters/lab")
    assert desired.budgets and desired.nodes
    assert set(parses.values()) == {1}


def test_an_edited_file_is_parsed_again(tmp_path: Path, parses: Counter[Path]) -> None:
    path = tmp_path / "n.yaml"
    path.write_text("kind: Node\nmetadata:\n  name: a\n")
    assert [node.name for node in manifests.load_nodes(tmp_path)] == ["a"]
    assert [node.name for node in manifests.load_nodes(tmp_path)] == ["a"]
    path.write_text("kind: Node\nmetadata:\n  name: b\n")
    assert [node.name for node in manifests.load_nodes(tmp_path)] == ["b"]
    assert parses[path] == 2


def test_broken_yaml_keeps_the_documents_before_it(tmp_path: Path, parses: Counter[Path]) -> None:
    path = tmp_path / "n.yaml"
    path.write_text("kind: Node\nmetadata:\n  name: a\n---\nkind: [\n")
    for _ in range(2):
        seen: list[int] = []
        with pytest.raises(GpudrvError, match=r"n\.yaml:6: invalid YAML"):
            for line, _document in manifests.load_documents(path):
                seen.append(line)
        assert seen == [1]
    assert parses[path] == 1
