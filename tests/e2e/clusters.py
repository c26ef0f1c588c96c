"""Two local clusters and a fleet repository that names them, for trying many clusters by hand (the
door docs/clusters.md shows) and for tests/e2e/test_clusters_live.py, which runs that page's block.

    python -m tests.e2e.clusters DIR          start eu and us (etcd and kube-apiserver each, from the
                                              e2e tier's cached binaries), give each the lab's three
                                              GPU nodes (us a fourth, on a kernel the matrix has no
                                              image for) and write DIR/gpudrv.yaml and DIR/matrix/
    python -m tests.e2e.clusters DIR --down   stop them

Then `cd DIR && gpudrv audit --all-clusters`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from ruamel.yaml import YAML

from tests.conftest import REPO
from tests.e2e.conftest import PlaneKube

NAMES = ("eu", "us")
NEW_NODE = "gpu-us-9"  # us's node on a kernel the matrix has no image for
NEW_KERNEL = "6.8.0-52-generic"
NEW_TAG = "550-6.8.0-52-generic-ubuntu24.04"


def lab_nodes() -> list[dict[str, object]]:
    yaml = YAML(typ="safe")
    return [yaml.load(path.read_text()) for path in sorted((REPO / "clusters/lab/nodes").glob("*.yaml"))]


def load(plane: PlaneKube, nodes: list[dict[str, object]]) -> None:
    plane.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))


def us_nodes() -> list[dict[str, object]]:
    nodes = lab_nodes()
    extra = json.loads(json.dumps(nodes[2]))
    extra["metadata"]["name"] = NEW_NODE
    extra["metadata"]["labels"]["feature.node.kubernetes.io/kernel-version.full"] = NEW_KERNEL
    return [*nodes, extra]


def write_fleet(root: Path, kubeconfigs: dict[str, Path]) -> None:
    """DIR/matrix/ (the lab's) and DIR/gpudrv.yaml naming each cluster by its kubeconfig file."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "matrix", root / "matrix", dirs_exist_ok=True)
    entries = "".join(f"  - {{name: {name}, kubeconfig: {path}}}\n" for name, path in kubeconfigs.items())
    (root / "gpudrv.yaml").write_text(f"matrix: matrix/support-matrix.csv\nclusters:\n{entries}")


def up(root: Path) -> dict[str, PlaneKube]:
    planes = {}
    for name in NAMES:
        (root / ".clusters" / name).mkdir(parents=True, exist_ok=True)
        planes[name] = PlaneKube.start(root / ".clusters" / name, name)
    load(planes["eu"], lab_nodes())
    load(planes["us"], us_nodes())
    write_fleet(root, {name: plane.kubeconfig for name, plane in planes.items()})
    return planes


def down(root: Path) -> None:
    for name in NAMES:
        folder = root / ".clusters" / name
        if folder.is_dir():
            PlaneKube(folder / "kubeconfig", Path("kubectl"), root=folder, context=name).stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.e2e.clusters", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--down", action="store_true", help="stop the two clusters")
    args = parser.parse_args(argv)
    if args.down:
        down(args.folder)
        return 0
    up(args.folder.absolute())
    print(f"two clusters, eu and us, in {args.folder}/gpudrv.yaml; then:")
    print(f"  cd {args.folder} && gpudrv audit --all-clusters")
    print(f"  python -m tests.e2e.clusters {args.folder} --down   # to stop them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
