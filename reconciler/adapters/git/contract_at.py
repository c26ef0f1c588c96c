"""The driver contract the fleet folder declared at a git ref: its manifests, Helm values, chart version
and gpudrv.yaml as they were there (matrix impact's base side)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from reconciler.adapters import desired, files, git
from reconciler.adapters.files import config
from reconciler.adapters.helm import values_files
from reconciler.core.contract.desired import Desired
from reconciler.errors import GpudrvError


def desired_at(ref: str, folder: Path, config_path: Path | None, flag: str | None) -> Desired | None:
    """The contract at `ref` (--operator-version, `flag`, wins there too); None when the folder was
    not there. The tree is read from git into a temporary directory, never checked out."""
    repo = git.open_repo(files.absolute(folder), shown=folder)
    folder_path = git.repo_path(repo, folder)
    with tempfile.TemporaryDirectory(prefix="gpudrv-base-") as tmp:
        root = Path(tmp)
        git.export_tree(repo, ref, root)
        base_folder = root / folder_path
        if not base_folder.is_dir():
            return None
        settings = _settings(root, None if config_path is None else git.repo_path(repo, config_path))
        pins = desired.Pins(
            flag=flag,
            config=None if flag else settings.operator_version,
            helm=settings.helm,
            config_origin=f"{ref}:{config_path}",
        )
        top = Path(repo.working_tree_dir or ".")
        try:
            return desired.from_git(
                base_folder, pins, root=root, remote_urls=lambda: values_files.remotes(top), quiet=True
            )
        except GpudrvError as exc:
            raise _at(exc, root, ref) from None


def _settings(root: Path, config_path: str | None) -> config.Config:
    """gpudrv.yaml as it was at the ref (`config_path`: its path in the repository), if it was there."""
    if config_path is None:
        return config.Config()
    at = root / config_path
    return config.load(str(at)) if at.is_file() else config.Config()


def _at(exc: GpudrvError, root: Path, ref: str) -> GpudrvError:
    """The error with the temporary tree's paths as `REF:path`, as git names a file at a ref."""
    prefix = f"{root}/"
    message = exc.message.replace(prefix, f"{ref}:")
    file = exc.file.replace(prefix, f"{ref}:") if exc.file else None
    return GpudrvError(f"at {ref}: {message}" if file is None else message, file=file, line=exc.line)
