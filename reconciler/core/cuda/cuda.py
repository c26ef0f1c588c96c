"""CUDA is only forward compatible: which driver a CUDA image needs, and the admitted nodes short of it.

Since CUDA 11 a runtime runs on any driver of its major family's minimum (minor-version
compatibility: 12.x on >= 525, 13.x on >= 580), with some features missing below the driver its
toolkit shipped with. So a node under the family's minimum is an error, and a node between the two
only a warning. The facts come from a data file with a source for every entry (parse_table).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.core.cuda.placement import Placement
from reconciler.core.images.tags import DRIVER_MAJOR, DRIVER_MINOR, DRIVER_REV, Node

# Conditions on any of these labels count as a driver condition (also GFD's cuda.driver-version.*).
DRIVER_LABEL_PREFIX = "nvidia.com/cuda.driver"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Version:
    """A dotted version compared numerically per component (550.90.07 < 555.42.06), missing ones as 0."""

    text: str
    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Version:
        if re.fullmatch(r"[0-9]+(\.[0-9]+)*", text) is None:
            raise ValueError(f"{text!r} is not a version like 555.42.06")
        return cls(text, tuple(int(part) for part in text.split(".")))

    @property
    def major(self) -> int:
        return self.parts[0]

    def at_least(self, other: Version) -> bool:
        width = max(len(self.parts), len(other.parts))
        return _padded(self.parts, width) >= _padded(other.parts, width)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Need:
    """What one CUDA image asks of the driver."""

    image: str
    cuda: Version
    floor: Version  # the minimum of its CUDA major (minor-version compatibility)
    toolkit: Version | None  # the minimum of its exact toolkit, when the data knows it


@dataclass(frozen=True)
class Table:
    """The data file: family minimums, toolkit minimums, and the CUDA version of known images."""

    family_minimum: Mapping[int, Version]
    toolkit_minimum: Mapping[Version, Version]
    images: Mapping[str, Version]

    def need(self, image: str) -> Need | None:
        cuda = self.images.get(image_key(image))
        if cuda is None:
            return None
        return Need(image, cuda, self.family_minimum[cuda.major], self.toolkit_minimum.get(cuda))


@dataclass(frozen=True)
class Finding:
    severity: Severity
    image: str
    cuda: str
    nodes: tuple[str, ...]  # the admitted nodes concerned; empty for a missing driver condition
    message: str


def image_key(image: str) -> str:
    """The image as the data file names it: a digest pin does not change the CUDA inside."""
    return image.split("@", 1)[0]


def node_driver(node: Node) -> Version | None:
    """major.minor.rev from the node's labels; None when the major is missing or not a number.
    A missing minor or rev shortens the version (compared as 0): the node may be short of a minimum."""
    parts: list[str] = []
    for key in (DRIVER_MAJOR, DRIVER_MINOR, DRIVER_REV):
        value = node.labels.get(key, "")
        if not value.isascii() or not value.isdigit():
            break
        parts.append(value)
    return Version.parse(".".join(parts)) if parts else None


def check(
    images: Iterable[str], placement: Placement, admitted: Sequence[Node], table: Table
) -> list[Finding]:
    """Driver findings for every known CUDA image of a workload, against the nodes its placement admits.
    Nodes without a readable driver label are not judged: they are no CUDA nodes gpudrv can vouch for."""
    findings: list[Finding] = []
    drivers = [(node.name, driver) for node in admitted if (driver := node_driver(node)) is not None]
    for need in _needs(images, table):
        findings.extend(_short_nodes(need, drivers))
        if not any(key.startswith(DRIVER_LABEL_PREFIX) for key in placement.label_keys()):
            findings.append(_unconditioned(need))
    return findings


def parse_table(document: Any) -> Table:
    """The data file's content; ValueError naming the entry at fault."""
    if not isinstance(document, Mapping):
        raise ValueError("the top level must be an object")
    families = {v.major: m for v, m in _entries(document, "family_minimum_driver", "cuda_major", "driver")}
    toolkits = dict(_entries(document, "toolkit_minimum_driver", "cuda", "driver"))
    images = _images(document)
    for cuda in [*toolkits, *images.values()]:
        if cuda.major not in families:
            raise ValueError(f"CUDA {cuda}: no family_minimum_driver entry for CUDA {cuda.major}.x")
    return Table(families, toolkits, {image_key(image): cuda for image, cuda in images.items()})


def _needs(images: Iterable[str], table: Table) -> list[Need]:
    unique = dict.fromkeys(images)  # a sidecar with the same image is one need
    return [need for image in unique if (need := table.need(image)) is not None]


def _short_nodes(need: Need, drivers: Sequence[tuple[str, Version]]) -> list[Finding]:
    findings: list[Finding] = []
    too_old = [(name, driver) for name, driver in drivers if not driver.at_least(need.floor)]
    if too_old:
        message = f"{_what(need)} needs driver >= {need.floor}; {_listed(too_old)} cannot run it"
        findings.append(_finding(Severity.ERROR, need, too_old, message))
    toolkit = need.toolkit
    if toolkit is None:
        return findings
    degraded = [(n, d) for n, d in drivers if d.at_least(need.floor) and not d.at_least(toolkit)]
    if degraded:
        message = (
            f"{_what(need)} was built for driver >= {toolkit}; {_listed(degraded)} "
            f"would run it in minor-version compatibility mode, without the features that need a newer driver"
        )
        findings.append(_finding(Severity.WARNING, need, degraded, message))
    return findings


def _unconditioned(need: Need) -> Finding:
    message = (
        f"{_what(need)} needs driver >= {need.floor}, but the placement states no "
        f"{DRIVER_LABEL_PREFIX}.* condition, so nothing keeps it off an older driver"
    )
    return Finding(Severity.WARNING, need.image, need.cuda.text, (), message)


def _finding(severity: Severity, need: Need, nodes: Sequence[tuple[str, Version]], message: str) -> Finding:
    return Finding(severity, need.image, need.cuda.text, tuple(name for name, _ in nodes), message)


def _what(need: Need) -> str:
    return f"{need.image} is CUDA {need.cuda}, which"


def _listed(nodes: Sequence[tuple[str, Version]]) -> str:
    return ", ".join(f"{name} ({driver})" for name, driver in nodes)


def _padded(parts: tuple[int, ...], width: int) -> tuple[int, ...]:
    return parts + (0,) * (width - len(parts))


def _entries(
    document: Mapping[str, Any], section: str, key: str, value: str
) -> list[tuple[Version, Version]]:
    pairs = _pairs(document, section, key, value)
    try:
        return [(Version.parse(k), Version.parse(v)) for k, v in pairs]
    except ValueError as exc:
        raise ValueError(f"{section}: {exc}") from None


def _images(document: Mapping[str, Any]) -> dict[str, Version]:
    pairs = _pairs(document, "images", "image", "cuda")
    try:
        return {image: Version.parse(cuda) for image, cuda in pairs}
    except ValueError as exc:
        raise ValueError(f"images: {exc}") from None


def _pairs(document: Mapping[str, Any], section: str, key: str, value: str) -> list[tuple[str, str]]:
    entries = document.get(section)
    if not isinstance(entries, list):
        raise ValueError(f"{section} must be a list")
    pairs: list[tuple[str, str]] = []
    for number, entry in enumerate(entries):
        where = f"{section}[{number}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} must be an object")
        fields = [entry.get(name) for name in (key, value, "source")]
        if not all(isinstance(field, str) and field for field in fields):
            raise ValueError(f"{where} needs the strings {key}, {value} and source (a URL)")
        pairs.append((str(fields[0]), str(fields[1])))
    return pairs
