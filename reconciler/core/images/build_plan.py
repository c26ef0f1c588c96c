"""The build plan for images upstream lacks: NVIDIA's precompiled recipe for each one, and the JSON a
GitHub workflow's `strategy.matrix` takes to build them.

The recipes are data (reconciler/data/precompiled-recipes.json, parsed by `parse_recipes`; every entry
cites gpu-driver-container path:line@commit). Every value of a matrix row ends up in a workflow's
`run:` steps (through `env:`), so each one must match a strict pattern; anything else is refused.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.images.tags import TAG_LENGTH, ImageKey

# An NVIDIA datacenter driver branch: 3 or 4 digits (550, 580).
BRANCH = re.compile(r"[0-9]{3,4}")
# An Ubuntu kernel release, flavour included: 5.15.0-119-generic, 6.8.0-1015-aws, 6.8.0-1020-azure-fde.
UBUNTU_KERNEL = re.compile(
    r"[0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3}-[0-9]{1,5}-[a-z0-9]{1,20}(-[a-z0-9]{1,20}){0,3}"
)
OS_TAG = re.compile(r"ubuntu[0-9]{2}\.[0-9]{2}")
FOLDER = re.compile(r"ubuntu[0-9]{2}\.[0-9]{2}/precompiled")
# A base image reference: name[:tag], lower-case name parts, no digest or spaces.
BASE_IMAGE = re.compile(r"[a-z0-9]+([._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
PLATFORMS = re.compile(r"linux/(amd64|arm64)(,linux/(amd64|arm64))?")
COMMIT = re.compile(r"[0-9a-f]{40}")
OS_PREFIX = re.compile(r"[a-z]{2,16}")
# A target repository: registry host[:port] (as core/images/registry.py reads it) and a lower-case path.
REPOSITORY = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]{1,5})?"
    r"(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)+",
)
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
REFERENCE_LENGTH = 255
# GitHub runs at most 256 jobs of one matrix per workflow run
# (https://docs.github.com/en/actions/how-tos/write-workflows/choose-what-workflows-do/run-job-variations).
MATRIX_LIMIT = 256

NO_RECIPE = "no precompiled recipe upstream for os tag {os_tag}"


class BuildPlanError(ValueError):
    """A recipe file, a repository or a matrix row that does not pass the strict patterns."""


@dataclass(frozen=True)
class Recipe:
    """NVIDIA's precompiled recipe for one os tag: the Dockerfile folder in gpu-driver-container (also
    the build context), the base image its Dockerfile defaults to, the platforms to build."""

    os_tag: str
    folder: str
    base_image: str
    platforms: str
    source: str

    @property
    def dockerfile(self) -> str:
        return f"{self.folder}/Dockerfile"


@dataclass(frozen=True)
class Recipes:
    repository: str  # gpu-driver-container, owner/name
    commit: str  # the commit the recipes were read at; the workflow checks out the same
    by_os_tag: Mapping[str, Recipe]
    without: Mapping[str, str]  # os tag prefix (rhel) -> why there is no recipe


@dataclass(frozen=True)
class BuildEntry:
    key: ImageKey
    image: str  # the full target reference, <target repository>:<tag>
    recipe: Recipe | None  # None: no recipe upstream for this image (`reason` says why)
    reason: str | None


def parse_recipes(document: Any) -> Recipes:
    """The recipe file's document; a ValueError names the first entry that does not pass."""
    if not isinstance(document, Mapping):
        raise BuildPlanError("not an object")
    upstream = _mapping(document, "upstream")
    repository = _text(upstream, "repository", re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+"))
    commit = _text(upstream, "commit", COMMIT)
    recipes: dict[str, Recipe] = {}
    for entry in _list(document, "recipes"):
        recipe = Recipe(
            os_tag=_text(entry, "os_tag", OS_TAG),
            folder=_text(entry, "dockerfile", FOLDER),
            base_image=_text(entry, "base_image", BASE_IMAGE),
            platforms=_text(entry, "platforms", PLATFORMS),
            source=_text(entry, "source", re.compile(r".+")),
        )
        if recipe.os_tag in recipes:
            raise BuildPlanError(f"recipes: os tag {recipe.os_tag} twice")
        recipes[recipe.os_tag] = recipe
    without: dict[str, str] = {}
    for entry in _list(document, "without_recipe"):
        _text(entry, "source", re.compile(r".+"))
        without[_text(entry, "os_prefix", OS_PREFIX)] = _text(entry, "reason", re.compile(r"[^\n]+"))
    return Recipes(repository, commit, recipes, without)


def build_entries(keys: Iterable[ImageKey], repository: str, recipes: Recipes) -> list[BuildEntry]:
    """One entry per image, sorted by tag, each with its recipe or the reason it has none.

    A repository that is not a plain OCI repository name is refused (BuildPlanError)."""
    if not _full(REPOSITORY, repository) or len(repository) > REFERENCE_LENGTH - TAG_LENGTH - 1:
        raise BuildPlanError(
            f"target repository {repository!r} is not an OCI repository name "
            "like registry.example/nvidia/driver"
        )
    entries = []
    for key in sorted(set(keys), key=lambda key: (key.tag, key)):
        recipe, reason = _recipe(key, recipes)
        entries.append(BuildEntry(key, f"{repository}:{key.tag}", recipe, reason))
    return entries


def github_matrix(entries: Sequence[BuildEntry]) -> dict[str, list[dict[str, str]]]:
    """`{"include": [row, ...]}` for the entries with a recipe, in tag order: what `strategy.matrix`
    takes through fromJSON. Every value is checked again; one that fails, or a tag twice, is refused
    (BuildPlanError). At most MATRIX_LIMIT rows, the first in tag order: the rest wait for the next run
    (each run builds, adds its rows, and plans again)."""
    rows = [_row(entry, entry.recipe) for entry in entries if entry.recipe is not None]
    rows.sort(key=lambda row: row["target_tag"])
    tags = [row["target_tag"] for row in rows]
    twice = next((tag for tag, after in itertools.pairwise(tags) if tag == after), None)
    if twice is not None:
        raise BuildPlanError(f"build matrix: the tag {twice} twice")
    return {"include": rows[:MATRIX_LIMIT]}


def build_line(entry: BuildEntry) -> str:
    """`BUILD <tag>: <recipe>` or `BUILD <tag>: <why there is none>`; every part is checked data."""
    if entry.recipe is None:
        return f"BUILD {entry.key.tag}: {entry.reason}"
    recipe = entry.recipe
    return f"BUILD {entry.key.tag}: {recipe.dockerfile} from {recipe.base_image} ({recipe.platforms})"


def _recipe(key: ImageKey, recipes: Recipes) -> tuple[Recipe | None, str | None]:
    recipe = recipes.by_os_tag.get(key.os_tag)
    if recipe is None:
        for prefix, reason in recipes.without.items():
            if key.os_tag.startswith(prefix):
                return None, reason
        known = ", ".join(sorted(recipes.by_os_tag))
        shown = (
            key.os_tag if _full(re.compile(r"[a-z0-9][a-z0-9._-]{0,63}"), key.os_tag) else "(not an os tag)"
        )
        return None, f"{NO_RECIPE.format(os_tag=shown)} (there are: {known})"
    if not _full(BRANCH, key.driver_branch):
        return None, "the driver branch is not an NVIDIA branch of 3 or 4 digits like 580"
    if not _full(UBUNTU_KERNEL, key.kernel):
        return None, "the kernel is not an Ubuntu kernel release like 5.15.0-119-generic or 6.8.0-1015-aws"
    if not _full(TAG, key.tag):
        return None, f"the tag is longer than {TAG_LENGTH} characters"
    return recipe, None


def _row(entry: BuildEntry, recipe: Recipe) -> dict[str, str]:
    key = entry.key
    checks = (
        (BRANCH, key.driver_branch, "driver branch"),
        (UBUNTU_KERNEL, key.kernel, "kernel"),
        (OS_TAG, key.os_tag, "os tag"),
        (TAG, key.tag, "tag"),
        (FOLDER, recipe.folder, "recipe folder"),
        (BASE_IMAGE, recipe.base_image, "base image"),
        (PLATFORMS, recipe.platforms, "platforms"),
    )
    for pattern, value, what in checks:
        if not _full(pattern, value):
            raise BuildPlanError(
                f"build matrix: the {what} of {key.as_csv()!r} does not pass {pattern.pattern}"
            )
    repository, _, tag = entry.image.rpartition(":")
    if tag != key.tag or not _full(REPOSITORY, repository) or recipe.os_tag != key.os_tag:
        raise BuildPlanError(f"build matrix: the image of {key.as_csv()!r} is not <repository>:{key.tag}")
    return {
        "branch": key.driver_branch,
        "kernel": key.kernel,
        "os_tag": key.os_tag,
        "base_image": recipe.base_image,
        "context": recipe.folder,
        "dockerfile": recipe.dockerfile,
        "platforms": recipe.platforms,
        # The build arguments, named as the Dockerfile declares them (DRIVER_VERSION is resolved in the
        # build job, as upstream's base/generate-ci-config does).
        "BASE_IMAGE": recipe.base_image,
        "DRIVER_BRANCH": key.driver_branch,
        "KERNEL_VERSION": key.kernel,
        "target_tag": key.tag,
        "image": entry.image,
    }


def _full(pattern: re.Pattern[str], value: object) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def _mapping(document: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = document.get(name)
    if not isinstance(value, Mapping):
        raise BuildPlanError(f"{name}: not an object")
    return value


def _list(document: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    value = document.get(name)
    if not isinstance(value, list) or not all(isinstance(entry, Mapping) for entry in value):
        raise BuildPlanError(f"{name}: not a list of objects")
    return value


def _text(entry: Mapping[str, Any], name: str, pattern: re.Pattern[str]) -> str:
    value = entry.get(name)
    if not _full(pattern, value):
        raise BuildPlanError(f"{name}: {value!r} does not pass {pattern.pattern}")
    assert isinstance(value, str)
    return value
