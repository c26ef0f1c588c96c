"""The docs site: `mkdocs build --strict` passes, every page under docs/ is in the nav, and no relative
link of the README or the docs is dead (mkdocs.yml's `validation` makes a dead link or anchor, and a page
left out of the nav, a warning; strict mode makes a warning fail the build)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2.0, not ours
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("mkdocs")),
            "build",
            "--strict",
            "-f",
            str(config),
            "-d",
            str(site),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def nav_pages(entries: object) -> Iterator[str]:
    if isinstance(entries, str):
        yield entries
    elif isinstance(entries, list):
        for entry in entries:
            yield from nav_pages(entry)
    elif isinstance(entries, dict):
        for value in entries.values():
            yield from nav_pages(value)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    built = mkdocs(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-5000:]
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_page_is_in_the_nav_once() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    listed = list(nav_pages(config["nav"]))
    pages = sorted(str(path.relative_to(REPO / "docs")) for path in (REPO / "docs").rglob("*.md"))
    assert sorted(set(listed)) == pages
    assert len(listed) == len(set(listed))


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        ("[gone](nowhere.md)", "nowhere.md"),
        ("[gone](index.md#no-such-heading)", "no-such-heading"),
        ("[outside](../README.md)", "README.md"),
    ],
)
def test_the_strict_build_fails_on_a_dead_link(tmp_path: Path, page: str, problem: str) -> None:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    config = yaml.safe_load((tmp_path / "mkdocs.yml").read_text())
    target = tmp_path / "docs" / next(iter(nav_pages(config["nav"])))
    target.write_text(target.read_text() + f"\n{page}\n")
    built = mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert problem in built.stderr


def test_the_strict_build_fails_on_a_page_not_in_the_nav(tmp_path: Path) -> None:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "forgotten.md").write_text("# Forgotten\n")
    built = mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "forgotten.md" in built.stderr


def github_anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    outside_code, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            outside_code.append(line)
    return {github_anchor(line.lstrip("#")) for line in outside_code if re.match(r"#{1,6} ", line)}


def leads_nowhere(target: str) -> bool:
    path, _, anchor = target.partition("#")
    file = REPO / path if path else REPO / "README.md"
    if not file.exists():
        return True
    return bool(anchor) and file.suffix == ".md" and anchor not in anchors(file.read_text())


def test_the_readmes_relative_links_lead_somewhere() -> None:
    targets = LINK.findall((REPO / "README.md").read_text())
    relative = [target for target in targets if not re.match(r"[a-z]+:", target)]
    assert relative, "the README links to the docs pages"
    assert [target for target in relative if leads_nowhere(target)] == []
