"""The examples of README.md and docs/: console blocks run against a fresh copy of the repository.

A fenced block whose info string is `console` is an example: each `$ ` line is a command (a line
ending in a backslash continues it), the lines after it, up to the next `$ ` line, are what it
prints (stdout and stderr as a terminal shows them, interleaved). The commands of one block run in
one bash, in order, so `cd`, `export` and `echo $?` work as in a terminal, in a fresh copy of the
repository's files (a git repository with one commit on `main`), so an example that changes a file
changes only its copy.

A block whose title starts with "live" (```` ```console title="live cluster" ````) needs a live
cluster (or registry) and is not run here; the title shows on the docs site, and the page says what
it needs. It is not skipped silently either: tests/docs/test_examples.py has a test per live block,
which checks that every gpudrv command it shows is one gpudrv's own parser takes (gpudrv_calls,
refused), and the e2e tier may run one in the folder its harness set up (run_in).

Before comparing, both sides are normalised the same way: commit hashes and dates are masked, and
trailing blanks dropped. `GPUDRV_UPDATE_EXAMPLES=1` rewrites each block's expected output from the
real run instead of failing.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

UPDATE_VARIABLE = "GPUDRV_UPDATE_EXAMPLES"
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
# Blocks that may show commands; config (yaml, json, ...) and output (text) blocks do not.
COMMAND_LANGUAGES = {"", "console", "sh", "bash", "shell"}
GPUDRV_VERBS = (
    "tag|audit|matrix|manifests|plan|apply|drain|status|report|explain|diff|init|reconcile|probe|preflight|"
    "--help|--version"
)
# A command line runs gpudrv: at the start, or after `;`, `&&`, `|`, `do`, `then`; maybe with
# VAR=value before it and a path (.venv/bin/gpudrv).
GPUDRV_CALL = re.compile(
    rf"(?:^|[;&|]|\bdo|\bthen)\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\S*/)?gpudrv\s+(?:{GPUDRV_VERBS})\b"
)
# How a command line is split into gpudrv calls (gpudrv_calls).
SEPARATORS = {";", "&&", "||", "|", "|&", "&", "(", ")", ";;"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PREFIXES = {"do", "then", "else", "time", "!"}
REDIRECTION = re.compile(r"^(?:[<>]|>>|>&|<&|&>|&>>|<<|<<<|>\|)$")
HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b")
# Fixed identities and dates: commits made by an example get the same hash on every run.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ana Lima",
    "GIT_AUTHOR_EMAIL": "ana@example.com",
    "GIT_COMMITTER_NAME": "Ana Lima",
    "GIT_COMMITTER_EMAIL": "ana@example.com",
    "GIT_AUTHOR_DATE": "2025-03-03T09:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-03-03T09:00:00+00:00",
}


@dataclass(frozen=True)
class Step:
    command: str  # as bash reads it (continuation lines joined by newlines)
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    ordinal: int  # index among the file's blocks, to find it again after earlier blocks changed
    language: str
    title: str
    indent: str
    lines: tuple[str, ...]  # the content, indentation removed

    @property
    def live(self) -> bool:
        return self.title.lower().startswith("live")

    @property
    def is_example(self) -> bool:
        return self.language == "console" and not self.live

    def steps(self) -> list[Step]:
        return parse_steps(self.lines, f"{self.path}:{self.line}")


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, in order."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent, info = opening["fence"], opening["indent"], opening["info"].strip()
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        content = tuple(_dedent(line, indent) for line in lines[index + 1 : end])
        language = info.split(None, 1)[0] if info else ""
        title = dict(ATTRIBUTE.findall(info)).get("title", "")
        found.append(Block(path, index + 1, len(found), language, title, indent, content))
        index = end + 1
    return found


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}


def _dedent(line: str, indent: str) -> str:
    return line[len(indent) :] if line.startswith(indent) else line.lstrip(" ")


def parse_steps(lines: tuple[str, ...], where: str) -> list[Step]:
    """`$ ` lines and the output after each; a block must start with a command."""
    steps: list[Step] = []
    command: list[str] | None = None
    output: list[str] = []
    for line in lines:
        if command is not None and command[-1].endswith("\\") and not output:
            command.append(line)
            continue
        if line.startswith("$ ") or line == "$":
            if command is not None:
                steps.append(Step("\n".join(command), tuple(output)))
            command, output = [line[2:]], []
        elif command is None:
            raise ValueError(f"{where}: a console block starts with a `$ ` command line, not {line!r}")
        else:
            output.append(line)
    if command is not None:
        steps.append(Step("\n".join(command), tuple(output)))
    return steps


def shows_gpudrv_command(block: Block) -> bool:
    """Whether the block shows a gpudrv command line: then it must be an example or marked live.

    In any block a `$ ` line counts; in a shell block (or one without a language) any line does."""
    prompted = [line[2:] for line in block.lines if line.startswith("$ ")]
    shell = block.language in COMMAND_LANGUAGES and block.language != "console"
    return any(GPUDRV_CALL.search(line) for line in (block.lines if shell else prompted))


def gpudrv_calls(command: str) -> list[list[str]]:
    """The arguments of each gpudrv a shell command line runs, as gpudrv's parser gets them: words split
    as bash splits them (quotes, `#` comments), separated at `;`, `&&`, `||`, `|`, `&` and parentheses,
    `VAR=value` before the command and redirections (`> file`, `2>&1`) dropped. `$VAR` stays as written."""
    lexer = shlex.shlex(command.replace("\\\n", " "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    segments: list[list[str]] = [[]]
    for word in lexer:
        if word in SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    calls = []
    for segment in segments:
        start = 0
        while start < len(segment) and (ASSIGNMENT.match(segment[start]) or segment[start] in PREFIXES):
            start += 1
        words = segment[start:]
        if words and (words[0] == "gpudrv" or words[0].endswith("/gpudrv")):
            calls.append(_without_redirections(words[1:]))
    return calls


def _without_redirections(words: list[str]) -> list[str]:
    kept: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if REDIRECTION.match(word):
            index += 2  # the operator and its target
            continue
        if word.isdigit() and index + 1 < len(words) and REDIRECTION.match(words[index + 1]):
            index += 1  # the descriptor of `2>&1`
            continue
        kept.append(word)
        index += 1
    return kept


def refused(argv: list[str]) -> str | None:
    """None when gpudrv's own parser takes these arguments (a verb, its flags), else its complaint;
    nothing runs."""
    from reconciler import cli

    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint), contextlib.redirect_stdout(io.StringIO()):
            args, extras = cli.build_parser().parse_known_args(argv)
    except SystemExit as exc:
        lines = complaint.getvalue().strip().splitlines()
        return None if exc.code == 0 else (lines[-1] if lines else f"exit {exc.code}")
    if extras:
        return f"unrecognized arguments: {' '.join(extras)}"
    return None if "handler" in args else "no command"


def shown_commands(block: Block) -> list[str]:
    """The command lines a block shows: a console block's `$ ` steps, a shell block's lines."""
    if block.language == "console":
        return [step.command for step in block.steps()]
    return "\n".join(block.lines).replace("\\\n", " ").split("\n")


def normalise(lines: tuple[str, ...] | list[str]) -> list[str]:
    """What may differ between runs is masked; what is left must match exactly."""
    return [DATE.sub("<date>", HASH.sub("<hash>", line)).rstrip() for line in lines]


def environment(home: Path) -> dict[str, str]:
    """The installed gpudrv first on PATH; nothing of this machine's cluster, registry or GitHub."""
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GITHUB_", "RUNNER_", "GPUDRV_", "GIT_"))
        and key not in {"KUBECONFIG", "REGISTRY_AUTH_FILE", "DOCKER_CONFIG", "VIRTUAL_ENV", "NO_COLOR"}
    }
    return {
        **inherited,
        **GIT_ENV,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "KUBECONFIG": str(home / "no-cluster" / "kubeconfig"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "COLUMNS": "100",
        "PYTHONUNBUFFERED": "1",  # stdout and stderr interleave as on a terminal
        "PYTHONDONTWRITEBYTECODE": "1",
        "SOURCE_DATE_EPOCH": "1741000000",
    }


def make_template(repo: Path, into: Path) -> Path:
    """The repository's files (tracked, and new ones not ignored) as a clone has them, committed on main."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    template = into / "gpudrv"
    for name in filter(None, listed.split("\0")):
        source = repo / name
        if source.is_file() and not source.is_symlink():
            target = template / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    env = {**environment(into), "GIT_DIR": str(template / ".git")}
    for git in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "gpudrv"]):
        subprocess.run(["git", *git], cwd=template, env=env, check=True, capture_output=True)
    return template


def run(block: Block, template: Path, scratch: Path) -> list[list[str]]:
    """Each step's output, from one bash in a fresh copy of the template."""
    work = scratch / template.name
    shutil.copytree(template, work, symlinks=True)
    return run_in(block, work, scratch)


def run_in(block: Block, work: Path, scratch: Path) -> list[list[str]]:
    """Each step's output, from one bash in `work` as it is (its HOME and the outputs in `scratch`);
    the e2e tier runs a live block this way in the folder its harness set up."""
    scratch.mkdir(parents=True, exist_ok=True)
    outputs = scratch / ".outputs"
    outputs.mkdir()
    home = scratch / ".home"
    home.mkdir()
    steps = block.steps()
    script = [f"cd {shlex.quote(str(work))}"]
    for number, step in enumerate(steps):
        # A group keeps cd and export in this shell, and $? for the next step.
        script += ["{ " + step.command, f"}} >{shlex.quote(str(outputs / str(number)))} 2>&1"]
    subprocess.run(
        ["bash", "--noprofile", "--norc"],
        input="\n".join(script) + "\n",
        cwd=work,
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    results = []
    for number in range(len(steps)):
        path = outputs / str(number)
        text = path.read_text(encoding="utf-8", errors="backslashreplace") if path.exists() else ""
        results.append(_shown(text, work))
    return results


def _shown(text: str, work: Path) -> list[str]:
    """As a page shows it: the copy's path as the clone's, the tools installed beside this Python
    (gpudrv, pre-commit) in the clone's .venv, no blank end."""
    text = text.replace(str(work.resolve()), "~/gpudrv").replace(str(work), "~/gpudrv")
    tools = Path(sys.executable).parent
    text = text.replace(str(tools.resolve()), "~/gpudrv/.venv/bin").replace(str(tools), "~/gpudrv/.venv/bin")
    return [line.rstrip() for line in text.rstrip("\n").split("\n")] if text.strip("\n") else []


def mismatch(block: Block, actual: list[list[str]]) -> str | None:
    """None when every step printed what the block shows (normalised), else a readable difference."""
    report = []
    for step, got in zip(block.steps(), actual, strict=True):
        if normalise(step.expected) != normalise(got):
            report.append(
                f"$ {step.command}\n--- the page shows\n"
                + "\n".join(step.expected)
                + "\n--- the command printed\n"
                + "\n".join(got)
            )
    return "\n\n".join(report) or None


def rewrite(block: Block, actual: list[list[str]]) -> None:
    """Put the real output into the block, in its file; everything else stays byte for byte."""
    text = block.path.read_text(encoding="utf-8")
    again = next(found for found in blocks(block.path) if found.ordinal == block.ordinal)
    if [step.command for step in again.steps()] != [step.command for step in block.steps()]:
        raise RuntimeError(f"{block.path}:{block.line}: the block changed while the examples ran")
    content: list[str] = []
    for step, got in zip(block.steps(), actual, strict=True):
        content += ("$ " + step.command).split("\n") + got
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    start, stop = again.line, again.line + len(again.lines)
    replaced = [again.indent + line if line else line for line in content]
    lines[start:stop] = [line + newline for line in replaced]
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=block.path.parent, delete=False) as out:
        out.write("".join(lines))
    Path(out.name).replace(block.path)


def updating() -> bool:
    return os.environ.get(UPDATE_VARIABLE, "") not in {"", "0"}
