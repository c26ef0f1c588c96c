"""Refs and git's own words: what a name resolves to, why HEAD or a branch names no commit (a branch
with no commit yet, or a broken ref), and git's error line for a message. GitPython is imported inside
the functions, as in the rest of the package."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    from git import Repo


def no_head_commit(repo: Repo) -> str:
    """Why HEAD names no commit: its branch has none yet (a new repository), or a ref is broken (a ref
    file of junk, a commit that is not there). Told apart by what git can read, not by its words
    (they follow the locale): `git symbolic-ref HEAD` names an unborn branch, and fails when the ref
    of HEAD's branch cannot be read."""
    if git_answer(repo, "symbolic-ref", "--quiet", "HEAD") is not None and resolve(repo, "HEAD") is None:
        return f"{where(repo)}: no commits yet"
    # git 2.39+ names the branch without reading its ref; older gits and a detached HEAD: HEAD alone.
    branch = git_answer(repo, "symbolic-ref", "--quiet", "--no-recurse", "HEAD")
    return broken(repo, f"HEAD ({branch})" if branch else "HEAD")


def broken(repo: Repo, name: str) -> str:
    return (
        f"{where(repo)}: {name} is a broken ref: it names no commit git can read "
        f"(git log: {_log_says(repo, name.split(' ', 1)[0])})"
    )


def broken_ref(repo: Repo, ref: str) -> str | None:
    """The full name of the ref `ref` stands for when its file is there but names no commit (junk, a
    commit that is gone), in git's own order of lookup (gitrevisions(7)); None when there is none."""
    if not _REF_NAME.fullmatch(ref) or ".." in ref or "@{" in ref or ref.endswith((".lock", ".")):
        return None  # no ref can have that name (git check-ref-format): a revision expression, or junk
    for full in (ref, f"refs/{ref}", f"refs/tags/{ref}", f"refs/heads/{ref}", f"refs/remotes/{ref}"):
        path = git_answer(repo, "rev-parse", "--git-path", full) if full.startswith("refs/") else None
        if path is not None and (Path(str(repo.git.working_dir)) / path).is_file():
            return full
    return None


# What git check-ref-format allows, in short: slash-separated parts of printable characters without
# space ~ ^ : ? * [ \, none empty or starting with a dot (the rest is checked above).
_REF_PART = r"[^\x00-\x20\x7f ~^:?*\[\\/.][^\x00-\x20\x7f ~^:?*\[\\/]*"
_REF_NAME = re.compile(f"{_REF_PART}(?:/{_REF_PART})*")


def git_answer(repo: Repo, *args: str) -> str | None:
    """`git ARGS`'s stdout, None when git says no (a non-zero exit)."""
    from git import Git
    from git.exc import GitCommandError

    try:
        return str(repo.git.execute([Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *args]))
    except GitCommandError:
        return None


def _log_says(repo: Repo, ref: str) -> str:
    """What `git log -1` says of the ref (of HEAD: git's own "your current branch appears to be broken")."""
    from git.exc import GitCommandError

    try:
        repo.git.log("-1", "--format=%H", *([] if ref == "HEAD" else [ref, "--"]))
    except GitCommandError as exc:
        return git_message(exc)
    return "no error"


def resolve(repo: Repo, name: str) -> str | None:
    """The object `name` names; None when it names none (`git rev-parse --verify --quiet` exits 1,
    silently). Any other failure of git is an error, not "not found"."""
    from git.exc import GitCommandError

    try:
        return str(repo.git.rev_parse("--verify", "--quiet", name))
    except GitCommandError as exc:
        said = str(exc.stderr).strip().removeprefix("stderr:").strip(" '").splitlines()
        # Not found, at most with warnings ("ignoring broken ref": the caller says which is broken).
        if exc.status == 1 and all(line.strip().startswith("warning:") for line in said):
            return None
        raise GpudrvError(f"git rev-parse in {where(repo)} failed: {git_message(exc)}") from None


def git_message(exc: BaseException) -> str:
    """git's own words: its (last) `fatal:` line, else its last `error:` line, else its last line (a
    hint such as safe.directory's follows the fatal line); GitPython keeps stderr as
    "\n  stderr: '<text>'". A git that cannot run at all: why."""
    stderr = getattr(exc, "stderr", None)
    if stderr is None:
        return first_line(str(exc)) or type(exc).__name__
    text = str(stderr).strip().removeprefix("stderr:").strip()
    if len(text) > 1 and text[0] == text[-1] == "'":  # GitPython's quotes, not git's own ('HEAD')
        text = text[1:-1].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = next(
        (line for prefix in ("fatal:", "error:") for line in reversed(lines) if line.startswith(prefix)),
        lines[-1] if lines else "",
    )
    return said or f"exit status {getattr(exc, 'status', '?')}"


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def where(repo: Repo) -> str:
    return str(repo.working_tree_dir or repo.git_dir)
