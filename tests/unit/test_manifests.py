from pathlib import Path

import pytest

from reconciler.adapters.files import manifests
from reconciler.errors import GpudrvError

NODE = """apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    nvidia.com/gpu.present: "true"
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def names(folder: Path) -> list[str]:
    return sorted(node.name for node in manifests.load_nodes(folder))


def test_nodes_lists_multidoc_nested_and_yml(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", NODE.format(name="a") + "---\n" + NODE.format(name="b"))
    write(tmp_path, "sub/deeper/c.yml", NODE.format(name="c"))
    items = "\n".join(
        "  - " + line if i == 0 else "    " + line
        for i, line in enumerate(NODE.format(name="d").splitlines())
    )
    write(tmp_path, "list.yaml", f"apiVersion: v1\nkind: List\nitems:\n{items}\n")
    write(tmp_path, "notes.txt", NODE.format(name="ignored"))
    write(
        tmp_path, "pdb.yaml", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: x\n---\n"
    )
    assert names(tmp_path) == ["a", "b", "c", "d"]


def test_origin_is_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "# comment\n" + NODE.format(name="a") + "---\n" + NODE.format(name="b"))
    origins = {node.name: node.origin for node in manifests.load_nodes(tmp_path)}
    assert origins == {"a": f"{path}:2", "b": f"{path}:9"}


def test_labels_are_read(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", NODE.format(name="a"))
    (node,) = manifests.load_nodes(tmp_path)
    assert node.labels == {"nvidia.com/gpu.present": "true"}
    assert node.gpu_present


def test_node_without_labels(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "kind: Node\nmetadata:\n  name: bare\n")
    (node,) = manifests.load_nodes(tmp_path)
    assert node.labels == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Node\nmetadata:\n  name: a\n  labels:\n    x: [1\n", ":6: invalid YAML"),
        ("kind: Node\nmetadata:\n  name: a\n  name: b\n", ":4: invalid YAML"),
        ("kind: Node\nmetadata:\n  labels: {}\n", ":1: Node without metadata.name"),
        ("kind: Node\nmetadata:\n  name: a\n  labels: [x]\n", "node a: metadata.labels must be a mapping"),
        (
            "kind: Node\nmetadata:\n  name: a\n  labels:\n    ok: x\n    nvidia.com/cuda.driver.major: 550\n",
            ':6: node a: label nvidia.com/cuda.driver.major must be a string; quote it: "550"',
        ),
        (
            "kind: Node\nmetadata:\n  name: a\n  labels:\n    nvidia.com/gpu.present: true\n",
            ':5: node a: label nvidia.com/gpu.present must be a string; quote it: "true"',
        ),
    ],
)
def test_bad_manifests_give_one_line_with_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(GpudrvError) as error:
        manifests.load_nodes(tmp_path)
    assert str(error.value).startswith(str(path))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_node_declared_twice(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", NODE.format(name="a"))
    write(tmp_path, "b.yaml", NODE.format(name="a"))
    with pytest.raises(GpudrvError, match=r"b.yaml:1: node a is declared twice \(also .*a.yaml:1\)"):
        manifests.load_nodes(tmp_path)


def test_missing_directory_and_file_instead_of_directory(tmp_path: Path) -> None:
    with pytest.raises(GpudrvError, match="no such directory"):
        manifests.load_nodes(tmp_path / "nope")
    with pytest.raises(GpudrvError, match="not a directory"):
        manifests.load_nodes(write(tmp_path, "a.yaml", ""))


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_bytes(b"kind: Node\nmetadata:\n  name: \xff\n")
    with pytest.raises(GpudrvError, match=r"a.yaml:3: not UTF-8 text"):
        manifests.load_nodes(tmp_path)
