"""README.md is the door: what gpudrv is, the main job on the bundled fleet, the whole test suite, and
links to the docs, where the detail lives. Read from the README itself: its size, its commands, and
the number of workflows it (with the docs and `gpudrv init --help`) says `gpudrv init` writes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import REPO, run_main
from tests.docs import examples
from tests.docs.test_examples import pages

README = REPO / "README.md"
MOST_LINES = 250
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
# "four workflows", "3 GitHub workflows", "the four thin workflows": a count of workflows, in any text.
WORKFLOW_COUNT = re.compile(rf"\b({'|'.join(NUMBERS)}|\d+)\s+(?:[\w-]+\s+)?workflows\b", re.IGNORECASE)
# `.github/workflows/{pr,audit}.yml`: the workflow files by name.
WORKFLOW_NAMES = re.compile(r"\.github/workflows/\{([\w,-]+)\}\.yml")


def readme_blocks() -> list[examples.Block]:
    return examples.blocks(README)


def test_the_readme_is_a_door_not_a_manual() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MOST_LINES, f"README.md has {lines} lines: move detail to docs/ and link to it"


def test_the_readme_runs_the_main_job_on_the_bundled_fleet() -> None:
    """An example of the README (tests/docs/test_examples.py runs it and compares its output) audits the
    bundled fleet offline, before anything else it shows."""
    ran = [step.command for block in readme_blocks() if block.is_example for step in block.steps()]
    assert ran, "the README shows no example"
    audits = [index for index, command in enumerate(ran) if command == "gpudrv audit --from clusters/lab"]
    assert audits, "the README's examples never run the audit of the bundled fleet (clusters/lab)"
    assert (REPO / "clusters" / "lab" / "nodes").is_dir()


def test_the_readmes_test_command_is_what_ci_runs() -> None:
    """The README's one command for the whole suite is the command .ci/run (CI's entry point) runs, and
    the README says so."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Run the tests") :]
    shell = next(
        block for block in readme_blocks() if block.language == "sh" and f"\n{block.lines[0]}" in section
    )
    assert [line for line in shell.lines if line.strip()] == ["scripts/test"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert shlex.split(commands[-1]) == ["exec", "scripts/test"], "the last thing .ci/run does"
    assert "`.ci/run` runs exactly this" in " ".join(section.split())
    assert (REPO / "scripts" / "test").stat().st_mode & 0o111


def written_workflows(tmp_path: Path) -> list[str]:
    """The workflow files `gpudrv init` writes into an empty folder."""
    commit = "45df63a07729a75716753416f6199c4e98a69883"
    result = run_main("init", str(tmp_path / "fleet"), "--action", f"acme/gpudrv@{commit}")
    assert result.returncode == 0, result.stderr
    return sorted(path.stem for path in (tmp_path / "fleet" / ".github" / "workflows").glob("*.yml"))


def number(word: str) -> int:
    return NUMBERS[word.lower()] if word.lower() in NUMBERS else int(word)


def test_the_number_of_workflows_said_is_the_number_init_writes(tmp_path: Path) -> None:
    """Wherever the README, a docs page or `gpudrv init --help` counts workflows ("four workflows") or
    lists them (`.github/workflows/{pr,audit}.yml`), that is what `gpudrv init` writes."""
    written = written_workflows(tmp_path)
    texts = {str(page.relative_to(REPO)): page.read_text(encoding="utf-8") for page in pages()}
    texts["gpudrv init --help"] = run_main("init", "--help").stdout
    counts: list[tuple[str, int]] = []
    lists: list[tuple[str, list[str]]] = []
    for name, text in texts.items():
        flat = " ".join(text.split())  # a count or a list may be broken across lines
        counts += [(name, number(found[1])) for found in WORKFLOW_COUNT.finditer(flat)]
        lists += [
            (name, sorted(found[1].split(","))) for found in WORKFLOW_NAMES.finditer(flat.replace(" ", ""))
        ]
    assert "README.md" in dict(counts), "the README says how many workflows init writes"
    assert "gpudrv init --help" in dict(lists), "init's help names the workflows it writes"
    wrong = [f"{name}: {said} workflows" for name, said in counts if said != len(written)]
    wrong += [f"{name}: {{{','.join(said)}}}" for name, said in lists if said != written]
    assert wrong == [], f"gpudrv init writes {len(written)} workflows: {', '.join(written)}"
