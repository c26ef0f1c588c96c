"""The support matrix in git, through GitPython.

History is read in ONE streamed `git log -p` pass over the matrix file: a diff per commit would
spawn a process per commit. The log follows the first parent only: that is the branch as it
happened, one linear sequence whose diffs compose exactly, and a merged pull request's rows are
attributed to the commit that landed them (the squash commit "... (#12)" or the merge commit
"Merge pull request #12 ..."), dated when they landed.

GitPython is imported inside the functions, so commands that never read git do not pay for it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters import files
from reconciler.adapters.git import refs
from reconciler.core.images import history
from reconciler.core.images.history import CommitInfo, Lifetime
from reconciler.core.images.tags import ImageKey
from reconciler.errors import GpudrvError

if TYPE_CHECKING:
    from git import Repo

FULL_CLONE = "fetch-depth: 0 in actions/checkout"

# The user's git configuration must not change what the log looks like.
_CONFIG = ("log.follow=false", "log.showSignature=false", "core.quotePath=false", "diff.relative=false")
_LOG_OPTIONS = (
    "--reverse",
    "--first-parent",
    "--diff-merges=first-parent",  # a merge shows its diff against the branch it merged into
    "--no-renames",  # a file moved onto the matrix path shows as all its rows added
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--encoding=UTF-8",
    "--patch",
    "--unified=0",
    f"--format={history.LOG_FORMAT}",
)


def _gitpython() -> None:
    """GitPython looks for the git executable when it is first imported, and raises ImportError if
    there is none: one clear line instead."""
    try:
        import git  # noqa: F401
    except ImportError:
        where = os.environ.get("GIT_PYTHON_GIT_EXECUTABLE")
        hint = f"GIT_PYTHON_GIT_EXECUTABLE={where} is not git" if where else "install git (none on PATH)"
        raise GpudrvError(f"git is needed to read the matrix in git, and cannot run: {hint}") from None


def open_repo(start: Path, shown: Path | None = None) -> Repo:
    """The repository containing `start` (searching parent directories), or one clear error; git
    itself must be able to use it (a repository of another owner is not "safe" to git)."""
    _gitpython()
    from git import Repo
    from git.exc import GitError, InvalidGitRepositoryError, NoSuchPathError

    try:
        repo = Repo(start, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        raise GpudrvError(f"{shown or start}: not inside a git repository") from None
    except (GitError, OSError, ValueError) as exc:
        raise GpudrvError(
            f"{shown or start}: git cannot open the repository: {refs.first_line(str(exc))}"
        ) from None
    _run(repo, "rev-parse", "--git-dir")  # dubious ownership and a broken repository fail here, once
    return repo


def locate(path: Path) -> tuple[Repo, str]:
    """The repository holding `path` (relative to the current directory) and its repo-relative path."""
    absolute = files.absolute(path)
    start = next((folder for folder in absolute.parents if folder.is_dir()), files.cwd())
    repo = open_repo(start, shown=path)
    return repo, repo_path(repo, absolute)


def repo_path(repo: Repo, path: Path) -> str:
    """`path` as git names it: relative to the top of the working tree, with forward slashes."""
    if repo.working_tree_dir is None:
        raise GpudrvError(f"{repo.git_dir}: a bare repository has no working tree to find {path} in")
    root = Path(repo.working_tree_dir).resolve()
    try:
        return files.absolute(path).resolve().relative_to(root).as_posix()
    except ValueError:
        raise GpudrvError(f"{path}: outside the git repository at {root}") from None


def read_at(repo: Repo, ref: str, repo_path: str) -> str | None:
    """The file's text at `ref`, None if it does not exist there; an error if `ref` does not, or if git
    cannot read the tree or the blob (a corrupt base must not read as an empty matrix). Read with git
    itself, which checks each object it inflates, and the blob's content checked against its id."""
    commit = commit_of(repo, ref)
    where = f"{ref}:{repo_path}"
    listing = _git_bytes(repo, where, "ls-tree", "--full-tree", "-z", commit, "--", repo_path)
    entry = next((item for item in listing.split(b"\0") if item.endswith(b"\t" + repo_path.encode())), None)
    if entry is None:
        return None
    _mode, kind, blob = entry.split(b"\t", 1)[0].decode().split(" ")
    if kind != "blob":
        raise GpudrvError(f"{where} is a {kind}, not a file")
    data = _git_bytes(repo, where, "cat-file", "blob", blob)
    _check_object_id(where, blob, data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise GpudrvError(f"{where}: not UTF-8 text") from None


TREE_SUFFIXES = (".yaml", ".yml", ".json")  # what the desired state's readers read
TREE_FILE_LIMIT = 4 << 20


def export_tree(repo: Repo, ref: str, directory: Path) -> None:
    """The YAML and JSON files of the tree at `ref` written under `directory` (the desired state as it
    was there: manifests, Helm values, gpudrv.yaml), read from git's archive, never checked out."""
    import io
    import tarfile

    commit = commit_of(repo, ref)
    if not _git_bytes(repo, f"{ref}:", "ls-tree", commit).strip():
        return  # an empty tree: git's archive of it is only a header that tarfile does not read
    data = _git_bytes(repo, f"{ref}:", "archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        wanted = [
            member
            for member in archive.getmembers()
            if member.isfile() and member.name.endswith(TREE_SUFFIXES) and member.size <= TREE_FILE_LIMIT
        ]
        archive.extractall(directory, members=wanted, filter="data")


def _git_bytes(repo: Repo, where: str, *args: str) -> bytes:
    """git's stdout, exactly; one error naming `where` and git's own last line when git fails."""
    from git import Git
    from git.exc import GitError

    command = [Git.GIT_PYTHON_GIT_EXECUTABLE or "git", "--literal-pathspecs", *args]
    try:
        output = repo.git.execute(command, stdout_as_string=False, strip_newline_in_stdout=False)
    except (GitError, OSError) as exc:
        raise GpudrvError(
            f"{where}: git cannot read it in {refs.where(repo)}: {refs.git_message(exc)}"
        ) from None
    return bytes(output)


def _run(repo: Repo, *args: str) -> str:
    """`git ARGS` in the repository: its stdout, or one error with git's own words."""
    from git import Git
    from git.exc import GitError

    command = [Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *args]
    try:
        return str(repo.git.execute(command))
    except (GitError, OSError) as exc:
        raise GpudrvError(f"git {args[0]} in {refs.where(repo)} failed: {refs.git_message(exc)}") from None


def _check_object_id(where: str, blob: str, data: bytes) -> None:
    """A loose object rewritten with other content still inflates: its id is the hash of what it holds."""
    digest = hashlib.sha256 if len(blob) == 64 else hashlib.sha1  # SHA-256 or SHA-1 repositories
    actual = digest(b"blob %d\0" % len(data) + data).hexdigest()
    if actual != blob:
        raise GpudrvError(f"{where}: git object {blob} is corrupt: its content hashes to {actual}")


def default_merged_ref(repo: Repo) -> str:
    """The merged main branch: origin/main (what CI fetched) if it exists, else the local main."""
    for name, full in (("origin/main", "refs/remotes/origin/main"), ("main", "refs/heads/main")):
        if refs.resolve(repo, full) is not None:
            return name
        if refs.broken_ref(repo, full) is not None:
            raise GpudrvError(refs.broken(repo, full))
    raise GpudrvError(f"neither origin/main nor main exists in {refs.where(repo)}: fetch the main branch")


def row_added_at(repo: Repo, ref: str, repo_path: str, key: ImageKey) -> CommitInfo | None:
    """The commit that added the row for its current stay in the matrix on `ref` (a row removed and
    added again counts from the re-addition); None if the row is not in the matrix there."""
    return history.current_addition(matrix_history(repo, repo_path, ref), key)


def matrix_history(repo: Repo, repo_path: str, ref: str = "HEAD") -> list[Lifetime]:
    """Every stay of every row in the matrix on `ref`'s first-parent history, in order of addition."""
    require_full_history(repo)
    commit = commit_of(repo, ref)
    return history.fold(history.read_log(_log_lines(repo, commit, repo_path)))


def require_full_history(repo: Repo) -> None:
    if _run(repo, "rev-parse", "--is-shallow-repository") == "true":
        raise GpudrvError(
            f"{refs.where(repo)} is a shallow clone: the matrix history needs the full clone: {FULL_CLONE}"
        )


def commit_of(repo: Repo, ref: str) -> str:
    """The commit `ref` names, as a full hash; one clear error if it names none."""
    found = None if ref.startswith("-") else refs.resolve(repo, f"{ref}^{{commit}}")
    if ref == "HEAD" and found is None:
        raise GpudrvError(refs.no_head_commit(repo))
    if found is None and (name := refs.broken_ref(repo, ref)) is not None:
        raise GpudrvError(refs.broken(repo, name))
    if not ref or found is None:
        shallow = _run(repo, "rev-parse", "--is-shallow-repository") == "true"
        hint = f" (a shallow clone: {FULL_CLONE})" if shallow else ""
        raise GpudrvError(f"git ref {ref!r} not found in {refs.where(repo)}{hint}")
    return found


def _log_lines(repo: Repo, commit: str, repo_path: str) -> Iterator[str]:
    """The log's lines as git writes them, read as they come: memory stays flat on long histories."""
    from git import Git
    from git.exc import GitError

    options = [part for setting in _CONFIG for part in ("-c", setting)]
    command = [Git.GIT_PYTHON_GIT_EXECUTABLE or "git", "--literal-pathspecs", *options, "log"]
    try:
        process = repo.git.execute([*command, *_LOG_OPTIONS, commit, "--", repo_path], as_process=True)
        for raw in process.stdout:
            yield raw.decode("utf-8", errors="replace")
        process.wait()
    except (GitError, OSError) as exc:
        raise GpudrvError(f"git log in {refs.where(repo)} failed: {refs.git_message(exc)}") from None


def head_commit(path: Path) -> tuple[str | None, str | None]:
    """The commit checked out in the repository holding `path`, and a note: that the work tree has
    uncommitted changes, or why there is no commit to name (never an error: the fleet page says so)."""
    from git.exc import GitCommandError

    try:
        repo, _ = locate(path)
    except GpudrvError as exc:
        return None, str(exc)
    commit = refs.resolve(repo, "HEAD^{commit}")
    if commit is None:
        return None, refs.no_head_commit(repo)
    try:
        dirty = repo.is_dirty(untracked_files=False)
    except GitCommandError:
        return commit, None
    return commit, "the work tree has uncommitted changes" if dirty else None


# --- a clone kept up to date (gpudrv reconcile) -----------------------------------------------------


def fetch_branch(directory: Path, url: str, branch: str, env: dict[str, str], timeout: float) -> str:
    """Fetch the newest commit of `branch` from `url` into the repository at `directory` (created on
    first use, no checkout) and return its hash. Only that branch, no tags; the whole history, which
    apply's image gate reads. One error naming the (credential-free) URL and git's own words."""
    import shutil

    from git import Git, Repo
    from git.exc import GitCommandError, InvalidGitRepositoryError

    tracking = f"refs/remotes/origin/{branch}"
    try:
        repo = Repo(directory) if (directory / ".git").exists() else Repo.init(directory)
    except InvalidGitRepositoryError:  # a clone cut short (the pod killed mid-way): start again
        shutil.rmtree(directory / ".git")
        repo = Repo.init(directory)
    command = [Git.GIT_PYTHON_GIT_EXECUTABLE or "git", "fetch", "--no-tags", "--quiet", "--", url]
    try:
        repo.git.execute([*command, f"+refs/heads/{branch}:{tracking}"], env=env, kill_after_timeout=timeout)
    except GitCommandError as exc:
        raise GpudrvError(f"git fetch {redact(url)} {branch}: {refs.git_message(exc)}") from None
    return commit_of(repo, tracking)


def check_out(directory: Path, commit: str) -> None:
    """The working tree at `commit` exactly (detached), whatever was there."""
    from git import Repo
    from git.exc import GitCommandError

    repo = Repo(directory)
    try:
        repo.git.checkout("--force", "--detach", "--quiet", commit)
        repo.git.clean("-ffdxq")
    except GitCommandError as exc:
        raise GpudrvError(f"git checkout {commit} in {directory}: {refs.git_message(exc)}") from None


def add_worktree(directory: Path, path: Path, commit: str) -> None:
    """A second working tree at `commit` (apply works there while the main one moves on)."""
    from git import Repo
    from git.exc import GitCommandError

    repo = Repo(directory)
    try:
        repo.git.worktree("prune")
        repo.git.worktree("add", "--force", "--detach", "--quiet", str(path), commit)
    except GitCommandError as exc:
        raise GpudrvError(f"git worktree add {path} {commit}: {refs.git_message(exc)}") from None


def remove_worktree(directory: Path, path: Path) -> None:
    from git import Repo
    from git.exc import GitCommandError

    try:
        Repo(directory).git.worktree("remove", "--force", str(path))
    except GitCommandError as exc:
        raise GpudrvError(f"git worktree remove {path}: {refs.git_message(exc)}") from None


def commit_time(directory: Path, commit: str) -> int:
    """The committer time of `commit` (Unix seconds)."""
    from git import Repo

    return int(Repo(directory).commit(commit).committed_date)


def redact(url: str) -> str:
    """A URL without the password or token it may carry (https://user:token@host/...)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    userinfo, _, host = rest.partition("@")
    return (
        f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}" if ":" in userinfo else f"{scheme}://***@{host}"
    )
