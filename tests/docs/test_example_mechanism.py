"""The example runner itself, on small pages written here: what it reads, runs, masks and rewrites."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.docs import examples

PAGE = """# A page

Some text.

```console
$ echo one; echo two >&2
one
two
$ false
$ echo $?
1
```

```console title="live cluster"
$ gpudrv audit
OK
```

- a list item with an indented block:

  ```console
  $ cd sub && echo \\
    continued
  continued
  $ basename "$PWD"
  sub
  ```

```yaml
entry: gpudrv matrix validate
```

```text
$ gpudrv audit
```

```sh
gpudrv report -o html > fleet.html
```
"""


@pytest.fixture
def page(tmp_path: Path) -> Path:
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    return path


@pytest.fixture
def template(tmp_path: Path) -> Path:
    folder = tmp_path / "template" / "gpudrv"
    (folder / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=folder, check=True)
    return folder


def test_blocks_languages_titles_and_steps(page: Path) -> None:
    found = examples.blocks(page)
    assert [(b.language, b.title, b.line, b.indent) for b in found] == [
        ("console", "", 5, ""),
        ("console", "live cluster", 14, ""),
        ("console", "", 21, "  "),
        ("yaml", "", 29, ""),
        ("text", "", 33, ""),
        ("sh", "", 37, ""),
    ]
    assert [b.is_example for b in found] == [True, False, True, False, False, False]
    assert found[0].steps() == [
        examples.Step("echo one; echo two >&2", ("one", "two")),
        examples.Step("false", ()),
        examples.Step("echo $?", ("1",)),
    ]
    assert found[2].steps()[0] == examples.Step("cd sub && echo \\\n  continued", ("continued",))


def test_a_block_that_does_not_start_with_a_command_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_text("```console\nOK\n$ true\n```\n")
    [block] = examples.blocks(path)
    with pytest.raises(ValueError, match="starts with a `\\$ ` command line"):
        block.steps()


def test_which_blocks_show_a_gpudrv_command(page: Path) -> None:
    shown = [examples.shows_gpudrv_command(block) for block in examples.blocks(page)]
    assert shown == [False, True, False, False, True, True]


def test_hashes_and_dates_are_masked_and_nothing_else() -> None:
    lines = [
        "550-5.15.0-119-generic 2025-03-03 99f9751b Ana (#12)  ",
        "deadbeef 1234567 at 2025-04-02T11:00:00+00:00",
    ]
    assert examples.normalise(lines) == [
        "550-5.15.0-119-generic <date> <hash> Ana (#12)",
        "deadbeef 1234567 at <date>",
    ]


def test_a_block_runs_in_one_shell_in_a_copy(page: Path, template: Path, tmp_path: Path) -> None:
    first, _, indented = examples.blocks(page)[:3]
    assert examples.run(first, template, tmp_path / "a") == [["one", "two"], [], ["1"]]
    assert examples.mismatch(first, examples.run(first, template, tmp_path / "b")) is None
    assert examples.run(indented, template, tmp_path / "c") == [["continued"], ["sub"]]


def test_a_wrong_output_is_a_mismatch_and_rewrite_puts_the_real_one(
    page: Path, template: Path, tmp_path: Path
) -> None:
    page.write_text(PAGE.replace("  continued\n  continued\n", "  continued\n  something else\n"))
    indented = examples.blocks(page)[2]
    actual = examples.run(indented, template, tmp_path / "run")
    difference = examples.mismatch(indented, actual)
    assert difference is not None
    assert "something else" in difference
    examples.rewrite(indented, actual)
    assert page.read_text() == PAGE


def test_rewrite_refuses_a_block_that_changed_meanwhile(page: Path, template: Path, tmp_path: Path) -> None:
    block = examples.blocks(page)[0]
    actual = examples.run(block, template, tmp_path / "run")
    page.write_text(PAGE.replace("$ false", "$ true"))
    with pytest.raises(RuntimeError, match="changed while the examples ran"):
        examples.rewrite(block, actual)


@pytest.mark.parametrize(
    ("line", "calls"),
    [
        ("gpudrv audit --from clusters/lab", [["audit", "--from", "clusters/lab"]]),
        ("cd fleet && gpudrv init --from-cluster   # a comment", [["init", "--from-cluster"]]),
        ("GITHUB_ACTIONS=true .venv/bin/gpudrv audit 2>&1 | tee out", [["audit"]]),
        ("gpudrv report -o html > fleet.html; echo $?", [["report", "-o", "html"]]),
        ("for n in 0 1; do gpudrv tag lab-node-$n; done", [["tag", "lab-node-$n"]]),
        ("gpudrv matrix add 'a b' && gpudrv audit", [["matrix", "add", "a b"], ["audit"]]),
        ("kubectl get nodes", []),
    ],
)
def test_the_gpudrv_calls_of_a_command_line(line: str, calls: list[list[str]]) -> None:
    assert examples.gpudrv_calls(line) == calls


def test_gpudrvs_parser_judges_a_call_without_running_it() -> None:
    assert examples.refused(["audit", "--from", "clusters/lab"]) is None
    assert examples.refused(["--help"]) is None
    assert "unknown command 'audt'" in (examples.refused(["audt"]) or "")
    assert "--frm" in (examples.refused(["audit", "--frm", "x"]) or "")
    assert examples.refused(["matrix"]) == "no command"
