"""The step of the GitHub Action (action.yml at the repository root): `gpudrv COMMAND ARGS -o OUTPUT`.

The action passes its inputs through the environment, never through the script text, so no input can
become shell code: GPUDRV_COMMAND (`audit`, `matrix validate`), GPUDRV_ARGS (split as a shell splits
words, quotes included, but nothing is expanded or run), GPUDRV_OUTPUT (`-o`'s value; empty for a
command without `-o`, like apply) and GPUDRV_KUBECONFIG_DATA (a kubeconfig's text, from a secret:
written to a private file in $RUNNER_TEMP for this command only, passed as --kubeconfig, then removed).
Run as `python -P -m reconciler.action`: -P keeps the working directory off sys.path, so a folder of
the fleet repository cannot stand in for the installed gpudrv.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from reconciler import cli
from reconciler.adapters.ci import actions_guard

ERROR = 2


class InputError(ValueError):
    """An action input gpudrv cannot turn into a command line."""


def words(environ: Mapping[str, str]) -> list[str]:
    """gpudrv's arguments from the action's inputs (without --kubeconfig)."""
    try:
        command = shlex.split(environ.get("GPUDRV_COMMAND", ""))
        args = shlex.split(environ.get("GPUDRV_ARGS", ""))
    except ValueError as exc:  # "No closing quotation": shlex names no input value
        raise InputError(f"inputs command/args: {exc}") from None
    if not command:
        raise InputError("input command is empty: give a gpudrv command, like audit or matrix validate")
    output = environ.get("GPUDRV_OUTPUT", "").strip()
    return [*command, *args, *(["-o", output] if output else [])]


@contextlib.contextmanager
def kubeconfig(data: str) -> Iterator[list[str]]:
    """`--kubeconfig FILE` for the secret's text (nothing when it is empty); the file is private
    (mode 0600), lives in $RUNNER_TEMP, and is removed however the command ends."""
    if not data.strip():
        yield []
        return
    fd, name = tempfile.mkstemp(prefix="kubeconfig-", dir=os.environ.get("RUNNER_TEMP") or None)
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data if data.endswith("\n") else data + "\n")
        yield ["--kubeconfig", str(path)]
    finally:
        path.unlink(missing_ok=True)


def main(environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    try:
        argv = words(environ)
    except InputError as exc:
        with actions_guard.guarded():
            print(f"gpudrv action: {exc}", file=sys.stderr)
        return ERROR
    with kubeconfig(environ.get("GPUDRV_KUBECONFIG_DATA", "")) as extra:
        return cli.main([*argv, *extra])


if __name__ == "__main__":
    sys.exit(main())
