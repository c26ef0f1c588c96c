"""Would a GPU pod's image start on a node's driver? The image's own requirements (NVIDIA_REQUIRE_*),
judged as the NVIDIA Container Toolkit's Go evaluator does (core/cuda/cuda_require.py), against the facts
that driver gives the toolkit.

The facts: `driver` is the driver's version (the full one when known, else its branch); `cuda` is
the CUDA version the driver reports, exact when a live node running that branch shows it (GFD's
`nvidia.com/cuda.runtime-version.full`), else bounds from a sourced table (data/driver-cuda.json). A
requirement is judged at both bounds: the same verdict at both is the verdict, two verdicts are
UNKNOWN, which the gate refuses as it refuses a break, with the reason. The GPU's brand and compute
capability are read from no label: an alternative that needs a brand (NVIDIA's forward-compatibility
terms, `brand=tesla,driver>=535,driver<536`) never passes here, as it does not in the toolkit's Go
evaluator with an unknown brand; on the GPU Operator's default CDI fleets nothing checks the
requirement at start and only the image's compat libraries would make such a pair work
(docs/research/cuda-gate.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from reconciler.core.cuda import cuda, cuda_require
from reconciler.core.cuda.cuda import Version
from reconciler.core.cuda.cuda_require import ImageRequirements, NodeFacts
from reconciler.core.upgrades.budget import FINISHED, Pod
from reconciler.core.upgrades.upgrade import Gate, GateName

# GFD's labels for the CUDA version the driver reports (the newer key first), and its driver version.
CUDA_FULL = "nvidia.com/cuda.runtime-version.full"
CUDA_PARTS = (
    ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor"),
    ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"),
)
ARCH = "kubernetes.io/arch"  # the kubelet's: which platform of a multi-platform image the node pulls
LABELS = frozenset({CUDA_FULL, ARCH, *(key for pair in CUDA_PARTS for key in pair)})
_UNBOUNDED = "999.999"  # above every CUDA release: an open upper bound


class State(StrEnum):
    OK = "ok"
    BREAKS = "breaks"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Bounds:
    """The CUDA version a branch reports: `low` <= it <= `high` (None: unbounded that side)."""

    branch: int
    low: Version | None
    high: Version | None

    @property
    def exact(self) -> bool:
        return self.low is not None and self.low == self.high

    def __str__(self) -> str:
        if self.exact:
            return f"CUDA {self.low}"
        if self.low is not None and self.high is not None:
            return f"CUDA {self.low} to {self.high}"
        if self.low is not None:
            return f"CUDA {self.low} or later"
        if self.high is not None:
            return f"CUDA {self.high} or earlier"
        return "a CUDA version no source states"


@dataclass(frozen=True)
class BranchTable:
    """data/driver-cuda.json: per listed branch, the bounds its sources give."""

    rows: Mapping[int, Bounds]

    def bounds(self, branch: int) -> Bounds:
        """The branch's own row, narrowed by its neighbours: a newer branch never reports an older CUDA."""
        lows = [row.low for b, row in self.rows.items() if b <= branch and row.low is not None]
        highs = [row.high for b, row in self.rows.items() if b >= branch and row.high is not None]
        low = max(lows, key=lambda v: v.parts) if lows else None
        high = min(highs, key=lambda v: v.parts) if highs else None
        return Bounds(branch, low, high)


@dataclass(frozen=True)
class Driver:
    """A driver as the gate judges it: its version, and the CUDA version it reports (or its bounds)."""

    version: str  # 550.127.05, or the branch alone (550) when that is all that is known
    cuda: Bounds
    source: str  # where `cuda` comes from, for messages

    def describe(self) -> str:
        return f"driver {self.version} ({self.cuda}, {self.source})"


@dataclass(frozen=True)
class Judgement:
    state: State
    message: str  # why it breaks or is unknown; empty when OK


def parse_table(document: Any) -> BranchTable:
    """The data file's content; ValueError naming the entry at fault."""
    if not isinstance(document, Mapping) or not isinstance(document.get("branches"), list):
        raise ValueError("the top level must be an object with a list `branches`")
    rows: dict[int, Bounds] = {}
    for number, entry in enumerate(document["branches"]):
        where = f"branches[{number}]"
        if not isinstance(entry, Mapping) or not str(entry.get("branch", "")).isdigit():
            raise ValueError(f"{where} needs a numeric string `branch`")
        if not isinstance(entry.get("source"), list) or not entry["source"]:
            raise ValueError(f"{where} needs a list `source` of URLs")
        try:
            low, high = (_version(entry.get(key)) for key in ("cuda_at_least", "cuda_at_most"))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        branch = int(entry["branch"])
        if branch in rows:
            raise ValueError(f"{where}: branch {branch} is listed twice")
        rows[branch] = Bounds(branch, low, high)
    return BranchTable(rows)


def platform(labels: Mapping[str, str]) -> str:
    """The platform a node pulls: linux and its kubelet's architecture label (amd64 when it has none)."""
    return f"linux/{labels.get(ARCH) or 'amd64'}"


def branch_of(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else None


def label_cuda(labels: Mapping[str, str]) -> Version | None:
    """The CUDA version GFD shows on a node, if it shows a well-formed one."""
    candidates = [labels.get(CUDA_FULL, "")]
    candidates += [f"{labels.get(major, '')}.{labels.get(minor, '')}" for major, minor in CUDA_PARTS]
    for text in candidates:
        try:
            return Version.parse(text)
        except ValueError:
            continue
    return None


def observed(nodes: Sequence[tuple[str, Mapping[str, str]]]) -> dict[int, tuple[Version, str]]:
    """Per branch, the CUDA version a live node running it shows, and that node (the first by name)."""
    found: dict[int, tuple[Version, str]] = {}
    for name, labels in sorted(nodes, key=lambda pair: pair[0]):
        branch = branch_of(labels.get("nvidia.com/cuda.driver-version.major", "")) or branch_of(
            labels.get("nvidia.com/cuda.driver.major", "")
        )
        cuda = label_cuda(labels)
        if branch is not None and cuda is not None and branch not in found:
            found[branch] = (cuda, name)
    return found


def driver(version: str, table: BranchTable, seen: Mapping[int, tuple[Version, str]]) -> Driver | None:
    """The driver of `version` (full or a branch): its CUDA as a node shows it, else the table's bounds.
    None when the version does not start with a branch number."""
    branch = branch_of(version)
    if branch is None:
        return None
    if branch in seen:
        cuda, node = seen[branch]
        return Driver(version, Bounds(branch, cuda, cuda), f"shown by {node}'s {CUDA_FULL}")
    return Driver(version, table.bounds(branch), "data/driver-cuda.json")


def judge(image: ImageRequirements, target: Driver) -> Judgement:
    """The requirement check at both ends of the driver's CUDA bounds."""
    if image.disabled or (not image.requirements and not image.error):
        return Judgement(State.OK, "")
    low = str(target.cuda.low) if target.cuda.low is not None else ""
    high = str(target.cuda.high) if target.cuda.high is not None else _UNBOUNDED
    ends = [NodeFacts(cuda=end, driver=target.version) for end in dict.fromkeys((low, high))]
    verdicts = [(facts, cuda_require.evaluate(image, facts)) for facts in ends]
    states = {verdict.state for _, verdict in verdicts}
    if states == {"satisfied"}:
        return Judgement(State.OK, "")
    facts, failed = next((facts, verdict) for facts, verdict in verdicts if verdict.state != "satisfied")
    if "satisfied" in states:
        return Judgement(
            State.UNKNOWN,
            f"{_needs(image)}; {target.describe()}: passes at one end of that range only, "
            f"so gpudrv cannot confirm it ({_why(failed, facts)})",
        )
    if failed.state == "invalid":
        why = _why(failed, facts)
        return Judgement(State.BREAKS, f"{_needs(image)}: the toolkit refuses it on any driver: {why}")
    return Judgement(State.BREAKS, f"{_needs(image)}; {target.describe()}: {_why(failed, facts)}")


def _why(verdict: cuda_require.Verdict, facts: NodeFacts) -> str:
    """The toolkit's words for the requirement's first alternative, and that none of the others (each
    naming a brand, in NVIDIA's images) passes either."""
    if verdict.error or not verdict.failures:
        return verdict.message
    failure = verdict.failures[0]
    first, *others = _terms(failure.requirement.text)
    if failure.invalid or not others:  # one alternative: the toolkit's own words
        return failure.message
    alone = cuda_require.check(cuda_require.Requirement(failure.requirement.source, first), facts)
    lead = alone.message if alone is not None else f"{first} not met"
    return f"{lead}, and no alternative passes with no brand known"


def _needs(image: ImageRequirements) -> str:
    """`needs NVIDIA_REQUIRE_CUDA cuda>=12.8 (or 12 alternatives naming a brand)`: NVIDIA's images list
    one alternative per forward-compatible branch and brand, too many for a line."""
    shown = []
    for item in image.requirements:
        first, *others = _terms(item.text)
        more = f" (or {len(others)} alternative{'s' * (len(others) != 1)})" if others else ""
        shown.append(f"{item.source} {first}{more}")
    return f"needs {'; '.join(shown)}" if shown else f"cannot be judged: {image.error}"


def _terms(text: str) -> list[str]:
    return [term for term in text.split(" ") if term] or [text]


def _version(value: Any) -> Version | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a string")
    return Version.parse(value)


# --- the gate over the GPU pods on a node --------------------------------------------------------


@dataclass(frozen=True)
class ImageRead:
    """What the registry gave for one image: its requirements, or why they could not be read."""

    requirements: ImageRequirements | None
    note: str = ""
    attempted: bool = True  # False: not read by choice (--registry-images off), not a failed read

    @property
    def failed(self) -> bool:
        """The registry was asked and gave no requirements (down, auth, timeout, no such image)."""
        return self.attempted and self.requirements is None


NOT_READ = ImageRead(None, "not read: --registry-images off", attempted=False)
ALLOW_UNVERIFIED = "--allow-unverified-images"


@dataclass(frozen=True)
class Reading:
    """How a run's CUDA gate reads images: from their registries (--registry-images on) or only the NGC
    table, and whether an image it could not verify may pass (--allow-unverified-images)."""

    registry: bool = True
    allow_unverified: bool = False


READ_REGISTRY = Reading()  # the default: read every image, refuse on one not verified


@dataclass(frozen=True)
class PodImage:
    pod: str  # namespace/name
    image: str


@dataclass(frozen=True)
class Check:
    """One GPU pod's image against the target driver."""

    what: PodImage
    state: State | None  # None: not checked (its config could not be read, nor is it in the table)
    message: str
    fallback: bool = False  # judged by the NGC table (data/cuda-compat.json), its config unread
    # Not verified: its config could not be read (whatever the NGC table says), or it was not read and
    # the table does not know it. The gate fails closed on it unless --allow-unverified-images.
    unverified: bool = False

    def line(self) -> str:
        return f"pod {self.what.pod} image {self.what.image} {self.message}"


def pod_images(pods: Sequence[Pod]) -> list[PodImage]:
    """The GPU containers' images of the pods that run or will run on the node (not finished ones)."""
    return [
        PodImage(pod.ref, image)
        for pod in pods
        if pod.gpu and pod.phase not in FINISHED and not pod.terminating
        for image in pod.gpu_images
    ]


def checks(
    found: Sequence[PodImage], target: Driver, reads: Mapping[str, ImageRead], fallback: cuda.Table
) -> list[Check]:
    results = []
    for item in found:
        read = reads.get(item.image, NOT_READ)
        if read.requirements is not None:
            verdict = judge(read.requirements, target)
            results.append(Check(item, verdict.state, verdict.message or f"accepts {target.describe()}"))
            continue
        check = _by_table(item, target, read.note, fallback)
        results.append(replace(check, unverified=True) if read.failed or check.state is None else check)
    return results


def gate(results: Sequence[Check], target: Driver, allow_unverified: bool = False) -> Gate:
    """Refused by any image that breaks or cannot be confirmed, and (fail closed) by any image not
    verified, unless `allow_unverified` (--allow-unverified-images): then each is named in the detail as
    let through by that switch, never counted as accepting the driver."""
    refused = [check.line() for check in results if check.state in (State.BREAKS, State.UNKNOWN)]
    unverified = [
        check.line()
        for check in results
        if check.unverified and check.state not in (State.BREAKS, State.UNKNOWN)
    ]
    if refused:
        more = f"; not verified: {'; '.join(unverified)}" if unverified else ""
        return Gate(GateName.CUDA, False, "; ".join(refused) + more)
    if unverified and not allow_unverified:
        return Gate(
            GateName.CUDA,
            False,
            f"not verified (pass {ALLOW_UNVERIFIED} to let it through): " + "; ".join(unverified),
        )
    accepted = sum(check.state is State.OK and not check.unverified for check in results)
    detail = f"{accepted} GPU pod {'image accepts' if accepted == 1 else 'images accept'} {target.describe()}"
    if not results:
        detail = "no GPU pod on the node"
    if unverified:
        detail += f"; not verified, let through by {ALLOW_UNVERIFIED}: " + "; ".join(unverified)
    return Gate(GateName.CUDA, True, detail)


def unchecked(gates: Sequence[Gate]) -> bool:
    """A CUDA gate that let an unverified image through (--allow-unverified-images): a note, not an OK."""
    return any(g.name is GateName.CUDA and g.ok and ALLOW_UNVERIFIED in g.detail for g in gates)


def _by_table(item: PodImage, target: Driver, note: str, fallback: cuda.Table) -> Check:
    need = fallback.need(item.image)
    if need is None:
        return Check(item, None, f"({note}; not in data/cuda-compat.json either)")
    if Version.parse(target.version).at_least(need.floor):
        return Check(item, State.OK, f"is CUDA {need.cuda} by data/cuda-compat.json ({note})", True)
    message = (
        f"is CUDA {need.cuda} by data/cuda-compat.json ({note}), which needs driver >= {need.floor}; "
        f"target is driver {target.version}"
    )
    return Check(item, State.BREAKS, message, True)
