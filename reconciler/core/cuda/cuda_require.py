"""An image's CUDA requirements, read and judged the way the NVIDIA Container Toolkit v1.20.2 does.

An image's environment (`config.Env` of its OCI config: `KEY=VALUE` strings) names its requirements:
every `NVIDIA_REQUIRE_*` variable except `NVIDIA_REQUIRE_JETPACK*`, and for a legacy image (a
`CUDA_VERSION` and no or an empty `NVIDIA_REQUIRE_CUDA`) `cuda>=MAJOR.MINOR` of that version. A true
`NVIDIA_DISABLE_REQUIRE` (Go's strconv.ParseBool) turns them all off.

Each requirement is ORed terms separated by single spaces, each term ANDed factors separated by commas:
`cuda>=12.4 brand=tesla,driver>=470,driver<471` passes with CUDA 12.4 or on a Tesla board with a 470
driver. A factor is PROPERTY OPERATOR VALUE; a property other than cuda, driver, arch or brand (exact
spelling) is skipped; a factor without an operator character, or a version that does not parse, makes
the whole check fail as invalid. All requirements must pass. The node's facts are versions (cuda,
driver, arch) and a string (brand) compared byte by byte; an unknown fact is the empty string, which
fails every version comparison. docs/research/cuda-requirements.md cites the sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from reconciler.core.cuda import toolkit_semver

REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
JETPACK = "NVIDIA_REQUIRE_JETPACK"
REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
CUDA_VERSION = "CUDA_VERSION"
DISABLE_REQUIRE = "NVIDIA_DISABLE_REQUIRE"
VERSION_PROPERTIES = ("cuda", "arch", "driver")
STRING_PROPERTIES = ("brand",)
_OPERATORS = ("!=", "<=", ">=", "=", "<", ">")  # the toolkit's order: the first that prefixes wins
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_UINT32_MAX = 2**32 - 1
# Go's strings.TrimSpace: unicode.IsSpace (Python's str.strip also strips U+001C..U+001F).
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
_GO_SPACE += "\u2028\u2029\u202f\u205f\u3000"

State = Literal["satisfied", "unsatisfied", "invalid"]


@dataclass(frozen=True)
class NodeFacts:
    """What the toolkit asks the node: cuDriverGetVersion as MAJOR.MINOR, the NVIDIA driver version,
    the GPU's compute capability (MAJOR.MINOR) and its brand (tesla, nvidia, geforce...). Empty:
    unknown."""

    cuda: str = ""
    driver: str = ""
    arch: str = ""
    brand: str = ""

    def value(self, name: str) -> str:
        return str(getattr(self, name))


@dataclass(frozen=True)
class Requirement:
    source: str  # the variable it came from (CUDA_VERSION for the legacy rule)
    text: str


@dataclass(frozen=True)
class ImageRequirements:
    requirements: tuple[Requirement, ...]
    disabled: bool = False
    error: str = ""  # the environment or CUDA_VERSION cannot be read: the toolkit refuses the container


@dataclass(frozen=True)
class Failure:
    requirement: Requirement
    message: str  # the toolkit's own text, e.g. "unsatisfied condition: cuda>=12.8 (cuda=12.4)"
    invalid: bool  # malformed requirement (fails whatever the node) rather than an unmet condition


@dataclass(frozen=True)
class Verdict:
    state: State
    failures: tuple[Failure, ...] = ()  # every failing requirement, in the image's order
    error: str = ""  # ImageRequirements.error

    @property
    def message(self) -> str:
        """One line like the toolkit's: the first malformed requirement, else the first unmet one."""
        if self.error:
            return self.error
        return self.failures[0].message if self.failures else ""


def image_requirements(env: Sequence[str]) -> ImageRequirements:
    """The requirements an image's (or container's) environment declares, as GetRequirements finds them."""
    variables: dict[str, str] = {}
    for entry in env:
        key, sep, value = entry.partition("=")
        if not sep:
            return ImageRequirements((), error=f"invalid environment variable: {entry}")
        variables[key] = value
    if variables.get(DISABLE_REQUIRE, "") in _TRUE:
        return ImageRequirements((), disabled=True)
    found = [
        Requirement(key, value)
        for key, value in variables.items()
        if key.startswith(REQUIRE_PREFIX) and not key.startswith(JETPACK)
    ]
    legacy = variables.get(CUDA_VERSION, "")
    if legacy and not variables.get(REQUIRE_CUDA, ""):
        try:
            found.append(Requirement(CUDA_VERSION, f"cuda>={_major_minor(legacy)}"))
        except ValueError as error:
            message = f"failed to get version: invalid CUDA version {legacy}: {error}"
            return ImageRequirements((), error=message)
    return ImageRequirements(tuple(found))


def evaluate(image: ImageRequirements, node: NodeFacts) -> Verdict:
    """Whether a container of this image starts on this node, per the toolkit's requirement check."""
    if image.error:
        return Verdict("invalid", error=image.error)
    failures = tuple(
        failure for requirement in image.requirements if (failure := check(requirement, node)) is not None
    )
    if any(failure.invalid for failure in failures):
        invalid = tuple(failure for failure in failures if failure.invalid)
        return Verdict("invalid", invalid + tuple(failure for failure in failures if not failure.invalid))
    return Verdict("unsatisfied", failures) if failures else Verdict("satisfied")


def check(requirement: Requirement, node: NodeFacts) -> Failure | None:
    """One requirement: None when it passes (or names nothing the toolkit knows)."""
    try:
        terms = _parse(requirement.text)
    except ValueError as error:
        return Failure(requirement, str(error), invalid=True)
    if not terms:
        return None
    results = [_assert_term(term, node) for term in terms]
    if len(terms) == 1:
        message = results[0]
        return None if message is None else Failure(requirement, message, invalid=False)
    if any(message is None for message in results):
        return None
    shown = "||".join("&&".join(_show(factor) for factor in term) for term in terms)
    return Failure(requirement, f"{shown} not met", invalid=False)


Factor = tuple[str, str, str]  # property, operator ("" when none matched), value


def _parse(text: str) -> list[list[Factor]]:
    if not _go_trim(text):
        return []
    terms: list[list[Factor]] = []
    for term in text.split(" "):
        factors = [factor for raw in term.split(",") if (factor := _parse_factor(raw)) is not None]
        if factors:
            terms.append(factors)
    return terms


def _parse_factor(condition: str) -> Factor | None:
    if not _go_trim(condition):
        return None
    end = min((index for index in map(condition.find, "<>=!") if index >= 0), default=-1)
    if end < 0:
        raise ValueError(f"invalid constraint: {condition}")
    name, rest = condition[:end], condition[end:]
    if name not in VERSION_PROPERTIES and name not in STRING_PROPERTIES:
        return None
    operator = next((candidate for candidate in _OPERATORS if rest.startswith(candidate)), "")
    value = rest[len(operator) :]
    if name in VERSION_PROPERTIES:
        try:
            toolkit_semver.parse(value)
        except toolkit_semver.VersionError as error:
            raise ValueError(f"invalid version string: {error}") from None
    return name, operator, value


def _assert_term(term: list[Factor], node: NodeFacts) -> str | None:
    for factor in term:
        message = _assert_factor(factor, node)
        if message is not None:
            return message
    return None


def _assert_factor(factor: Factor, node: NodeFacts) -> str | None:
    name, operator, value = factor
    have = node.value(name)
    if name in VERSION_PROPERTIES:
        try:
            compared = toolkit_semver.parse(have).compare(toolkit_semver.parse(value))
        except toolkit_semver.VersionError as error:
            return f"invalid value for {name}: {error}"
    else:
        compared = (have > value) - (have < value)
    outcome = {
        "=": compared == 0,
        "!=": compared != 0,
        "<": compared < 0,
        "<=": compared <= 0,
        ">": compared > 0,
        ">=": compared >= 0,
    }.get(operator)
    if outcome is None:
        return f"invalid operator {operator}"
    return None if outcome else f"unsatisfied condition: {_show(factor)} ({name}={have})"


def _show(factor: Factor) -> str:
    return "".join(factor)


def _major_minor(version: str) -> str:
    try:
        parsed = toolkit_semver.parse(version)
    except toolkit_semver.VersionError as error:
        raise ValueError(f"invalid version string: {error}") from None
    if parsed.major > _UINT32_MAX:
        raise ValueError("invalid major version")
    if parsed.minor > _UINT32_MAX:
        raise ValueError("invalid minor version")
    return f"{parsed.major}.{parsed.minor}"


def _go_trim(text: str) -> str:
    return text.strip(_GO_SPACE)
