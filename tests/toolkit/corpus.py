"""The differential's corpus: hand-written edge cases and seeded combinations around the boundaries.

A case is an image environment (OCI `config.Env` strings) and a node's facts (cuda, driver, arch,
brand), with a category for the counts. The generator is seeded, so a run is reproducible; the same
cases go to the toolkit and to gpudrv.
"""

from __future__ import annotations

import random
from typing import Any

SEED = 27
GENERATED = 3000

# NVIDIA_REQUIRE_CUDA as the CUDA base images write it: the CUDA version, or a Tesla board on an older
# datacenter branch (forward compatibility), one brand,driver range per space-separated alternative.
BRAND_GROUPS = " ".join(
    f"brand={brand},driver>={branch},driver<{branch + 1}"
    for branch in (470, 525, 535, 550)
    for brand in ("tesla", "unknown", "nvidia", "nvidiartx", "geforce", "quadro", "titan")
)
REAL_CUDA_12_8 = f"cuda>=12.8 {BRAND_GROUPS}"
NODES = {
    "550": {"cuda": "12.4", "driver": "550.127.05", "arch": "8.0", "brand": "tesla"},
    "535": {"cuda": "12.2", "driver": "535.230.02", "arch": "9.0", "brand": "tesla"},
    "570": {"cuda": "12.8", "driver": "570.124.06", "arch": "9.0", "brand": "nvidia"},
    "580": {"cuda": "13.0", "driver": "580.65.06", "arch": "10.0", "brand": "tesla"},
    "470-geforce": {"cuda": "11.4", "driver": "470.256.02", "arch": "8.6", "brand": "geforce"},
    "unknown": {"cuda": "", "driver": "", "arch": "", "brand": ""},
}

HAND: list[tuple[str, list[str], str]] = [
    ("real-12.8", [f"NVIDIA_REQUIRE_CUDA={REAL_CUDA_12_8}", "CUDA_VERSION=12.8.1"], "550"),
    ("real-12.8", [f"NVIDIA_REQUIRE_CUDA={REAL_CUDA_12_8}", "CUDA_VERSION=12.8.1"], "570"),
    ("real-12.8", [f"NVIDIA_REQUIRE_CUDA={REAL_CUDA_12_8}", "CUDA_VERSION=12.8.1"], "535"),
    ("real-12.8", [f"NVIDIA_REQUIRE_CUDA={REAL_CUDA_12_8}", "CUDA_VERSION=12.8.1"], "470-geforce"),
    ("real-12.8", [f"NVIDIA_REQUIRE_CUDA={REAL_CUDA_12_8}", "CUDA_VERSION=12.8.1"], "unknown"),
    ("real-12.4", ["NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471"], "550"),
    ("legacy", ["CUDA_VERSION=12.8.1"], "550"),
    ("legacy", ["CUDA_VERSION=12.4.1"], "550"),
    ("legacy", ["CUDA_VERSION=12.8.1", "NVIDIA_REQUIRE_CUDA="], "550"),
    ("legacy", ["CUDA_VERSION=v12.8"], "570"),
    ("legacy", ["CUDA_VERSION=12"], "570"),
    ("legacy", ["CUDA_VERSION=12.8.1.2"], "570"),
    ("legacy", ["CUDA_VERSION=4294967296.1"], "570"),
    ("legacy", ["CUDA_VERSION=12.4", "NVIDIA_DISABLE_REQUIRE=true"], "535"),
    ("disabled", ["NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=1"], "550"),
    ("disabled", ["NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=yes"], "550"),
    ("disabled", ["NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=tRUE"], "550"),
    ("disabled", ["NVIDIA_REQUIRE_CUDA=notvalid", "NVIDIA_DISABLE_REQUIRE=True"], "550"),
    ("malformed", ["NVIDIA_REQUIRE_CUDA=notvalid"], "550"),
    ("malformed", ["NVIDIA_REQUIRE_CUDA=cuda>=12.4\tbrand=tesla"], "550"),
    ("malformed", ["NVIDIA_REQUIRE_CUDA=cuda!12.4"], "550"),
    ("malformed", ["NVIDIA_REQUIRE_CUDA=brand!tesla"], "550"),
    ("malformed", ["NVIDIA_REQUIRE_CUDA=cuda=>12.4"], "550"),
    ("malformed", ["NVIDIA_REQUIRE_CUDA=foo=bar cuda>=1.2.3.4"], "550"),
    ("malformed", ["NVIDIA_REQUIRE_CUDA=cuda>=12.4", "PATH"], "550"),
    ("ignored", ["NVIDIA_REQUIRE_CUDA=foo=bar"], "550"),
    ("ignored", ["NVIDIA_REQUIRE_CUDA=CUDA>=99"], "550"),
    ("ignored", ["NVIDIA_REQUIRE_JETPACK=csv-mounts=all"], "550"),
    ("ignored", ["NVIDIA_REQUIRE_JETPACK_X=cuda>=99"], "550"),
    ("ignored", ["nvidia_require_cuda=cuda>=99"], "550"),
    ("ignored", ["NVIDIA_REQUIRE_CUDA=  "], "550"),
    ("ignored", ["NVIDIA_REQUIRE_CUDA=\u00a0"], "550"),
    ("ignored", ["NVIDIA_REQUIRE_CUDA=\x1c"], "550"),
    ("multi-var", ["NVIDIA_REQUIRE_CUDA=cuda>=12.0", "NVIDIA_REQUIRE_ARCH=arch>=9.0"], "550"),
    ("multi-var", ["NVIDIA_REQUIRE_A=cuda>=13", "NVIDIA_REQUIRE_B=driver>=600"], "550"),
    ("multi-var", ["NVIDIA_REQUIRE_A=cuda>=12", "NVIDIA_REQUIRE_A=cuda>=99"], "550"),
    ("versions", ["NVIDIA_REQUIRE_DRIVER=driver>=550.127.5"], "550"),
    ("versions", ["NVIDIA_REQUIRE_DRIVER=driver=550.127.05"], "550"),
    ("versions", ["NVIDIA_REQUIRE_CUDA=cuda=12.4.0"], "550"),
    ("versions", ["NVIDIA_REQUIRE_CUDA=cuda>12.4-rc1"], "550"),
    ("versions", ["NVIDIA_REQUIRE_CUDA=cuda>=12.4+build.1"], "550"),
    ("versions", ["NVIDIA_REQUIRE_CUDA=cuda>=12.4-01"], "550"),
    ("versions", ["NVIDIA_REQUIRE_CUDA=cuda>=18446744073709551616"], "550"),
    ("versions", ["NVIDIA_REQUIRE_CUDA=brand=Tesla"], "550"),
    ("versions", ["NVIDIA_REQUIRE_CUDA=brand>=tesla"], "550"),
]

REQUIRE_NAMES = ("CUDA", "CUDA", "DRIVER", "ARCH", "BRAND", "X", "JETPACK", "JETPACK_1")
PROPERTIES = ("cuda", "cuda", "cuda", "driver", "driver", "arch", "brand", "brand", "Cuda", "foo", "")
OPERATORS = (">=", ">=", "<", "<", "<=", ">", "=", "!=")
ODD_OPERATORS = ("!", "=>", "==", "<>", "")
VERSIONS = {
    "cuda": ("12.4", "12.8", "12.3", "12", "12.4.0", "12.4.1", "13.0", "11.8", "v12.4", "12.4-rc1"),
    "driver": ("470", "471", "535", "550", "550.127.05", "550.127.5", "550.127.06", "551", "580.65.06"),
    "arch": ("8.0", "9.0", "7.5", "8", "10.0"),
}
ODD_VALUES = ("", "x", "1.2.3.4", "01.2", "12.4 ", "12.4-01", "18446744073709551616", "12.4+meta")
BRANDS = ("tesla", "nvidia", "Tesla", "geforce", "", "nvidiartx")
NODE_VALUES = {
    "cuda": ("11.8", "12.2", "12.4", "12.8", "13.0", "", "12", "12.4.1", "abc"),
    "driver": ("470.256.02", "535.230.02", "550.127.05", "550.54.14", "570.124.06", "580.65.06", "", "550"),
    "arch": ("8.0", "9.0", "7.5", "8.6", ""),
    "brand": ("tesla", "nvidia", "geforce", "", "Tesla"),
}
CUDA_VERSIONS = ("12.8.1", "12.4", "11.0.3", "", "abc", "12.8.1.2", "v12", "13.0.0")
DISABLE = ("true", "1", "false", "yes", "TRUE", "0", "", "t")


def _factor(rng: random.Random) -> str:
    name = rng.choice(PROPERTIES)
    operator = rng.choice(ODD_OPERATORS if rng.random() < 0.04 else OPERATORS)
    if rng.random() < 0.04:
        value = rng.choice(ODD_VALUES)
    elif name == "brand":
        value = rng.choice(BRANDS)
    else:
        value = rng.choice(VERSIONS.get(name.lower(), VERSIONS["cuda"]))
    return f"{name}{operator}{value}"


def _requirement(rng: random.Random, malformed: float) -> str:
    terms = []
    for _ in range(rng.choice((1, 1, 2, 3, 4))):
        factors = [_factor(rng) for _ in range(rng.choice((1, 1, 2, 3)))]
        terms.append(",".join(factors))
    joined = " ".join(terms)
    if rng.random() < malformed:
        joined = rng.choice(
            (
                joined + " ",
                " " + joined,
                joined.replace(" ", "  ", 1),
                joined + ",",
                "," + joined,
                "garbage " + joined,
            )
        )
    return joined


def _node(rng: random.Random) -> dict[str, str]:
    if rng.random() < 0.5:
        return dict(rng.choice(list(NODES.values())))
    return {name: rng.choice(values) for name, values in NODE_VALUES.items()}


def _category(env: list[str]) -> str:
    keys = [entry.partition("=")[0] for entry in env]
    if "NVIDIA_DISABLE_REQUIRE" in keys:
        return "generated-disable"
    if "CUDA_VERSION" in keys:
        return "generated-legacy"
    if sum(key.startswith("NVIDIA_REQUIRE_") for key in keys) > 1:
        return "generated-multi-var"
    return "generated-one-var"


def generate(count: int = GENERATED, seed: int = SEED) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for index, (category, env, node) in enumerate(HAND):
        cases.append({"id": f"hand-{index}", "category": category, "env": env, **NODES[node]})
    for index in range(count):
        env = [
            f"NVIDIA_REQUIRE_{rng.choice(REQUIRE_NAMES)}={_requirement(rng, 0.15)}"
            for _ in range(rng.choice((0, 1, 1, 1, 2, 3)))
        ]
        if rng.random() < 0.25:
            env.append(f"CUDA_VERSION={rng.choice(CUDA_VERSIONS)}")
        if rng.random() < 0.1:
            env.append(f"NVIDIA_DISABLE_REQUIRE={rng.choice(DISABLE)}")
        if rng.random() < 0.01:
            env.append("NO_EQUALS_SIGN")
        rng.shuffle(env)
        env.insert(0, "PATH=/usr/local/nvidia/bin:/usr/bin")
        cases.append({"id": f"gen-{index}", "category": _category(env), "env": env, **_node(rng)})
    return cases
