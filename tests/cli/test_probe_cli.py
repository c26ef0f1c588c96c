"""gpudrv probe through the real entry point: --root, --write, what it leaves on a refusal."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import gpudrv_command, gpudrv_env, run_gpudrv
from tests.unit.boot_roots import grubenv, ubuntu

LABEL = "gpudrv.dev/kernel-version.next"


def host(tmp_path: Path, running: str = "6.8.0-45-generic", **extra: bytes) -> Path:
    root = tmp_path / "host"
    files = {
        **ubuntu(running=running).files,
        **{path.replace("__", "/"): data for path, data in extra.items()},
    }
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data or b"")
    return root


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stdout) == (2, ""), (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    return line


def test_prints_the_feature_file(tmp_path: Path) -> None:
    result = run_gpudrv("probe", "--root", str(host(tmp_path)))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[-1] == f"{LABEL}=6.8.0-52-generic"


def test_writes_it_atomically_and_without_the_label_when_nothing_changes(tmp_path: Path) -> None:
    out = tmp_path / "features.d" / "gpudrv-next-kernel"
    out.parent.mkdir()
    result = run_gpudrv("probe", "--root", str(host(tmp_path)), "--write", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines()[-1] == f"{LABEL}=6.8.0-52-generic"
    assert "next kernel 6.8.0-52-generic" in result.stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ["gpudrv-next-kernel"]  # no temp file left
    same = run_gpudrv(
        "probe", "--root", str(host(tmp_path / "b", running="6.8.0-52-generic")), "--write", str(out)
    )
    assert same.returncode == 0, same.stderr
    assert LABEL not in out.read_text() and out.read_text().startswith("# gpudrv probe")


def test_cannot_decide_is_one_line_exit_2_and_the_stale_file_removed(tmp_path: Path) -> None:
    out = tmp_path / "gpudrv-next-kernel"
    out.write_text(f"{LABEL}=6.8.0-40-generic\n")
    root = host(tmp_path, boot__grub__grubenv=grubenv(initrdfail="1"))
    line = one_line_error(run_gpudrv("probe", "--root", str(root), "--write", str(out)))
    assert line.startswith("gpudrv: probe: cannot decide the next kernel: /boot/grub/grubenv: initrdfail")
    assert line.endswith(f"removed {out}")
    assert not out.exists()


def test_a_hostile_entry_is_escaped_in_the_one_line(tmp_path: Path) -> None:
    root = host(tmp_path)
    (root / "boot/vmlinuz-6.8.0-60\x1b[31m-generic").write_bytes(b"")  # not in grub.cfg, and not a release
    line = one_line_error(run_gpudrv("probe", "--root", str(root)))
    assert "\x1b" not in line and "\\x1b" in line, line


def test_bad_input(tmp_path: Path) -> None:
    assert "--root" in one_line_error(run_gpudrv("probe", "--root", str(tmp_path / "none")))
    assert "--trigger needs --every" in one_line_error(run_gpudrv("probe", "--trigger", "x"))
    assert "1s or more" in one_line_error(run_gpudrv("probe", "--every", "0"))
    assert "invalid duration" in one_line_error(run_gpudrv("probe", "--every", "soon"))
    out = tmp_path / "no-such-dir" / "f"
    assert "cannot write" in one_line_error(
        run_gpudrv("probe", "--root", str(host(tmp_path)), "--write", str(out))
    )


def wait_for(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_the_loop_runs_again_when_the_hook_touches_the_trigger(tmp_path: Path) -> None:
    root = host(tmp_path)
    out = tmp_path / "gpudrv-next-kernel"
    trigger = root / "var/lib/gpudrv-probe/trigger"
    trigger.parent.mkdir(parents=True)
    command = [*gpudrv_command(), "probe", "--root", str(root), "--write", str(out), "--every", "1h"]
    command += ["--trigger", "var/lib/gpudrv-probe/trigger"]
    with subprocess.Popen(command, env=gpudrv_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE) as loop:
        try:
            wait_for(out.exists)
            assert out.read_text().splitlines()[-1] == f"{LABEL}=6.8.0-52-generic"
            # What grub-reboot does, then the kernel hook: the next run comes in seconds, not in an hour.
            (root / "boot/grub/grubenv").write_bytes(grubenv(next_entry="1>2"))
            trigger.touch()
            wait_for(lambda: LABEL not in out.read_text())  # 6.8.0-45-generic: the running kernel
            # A refusal on a later run removes the file and the loop goes on.
            (root / "boot/grub/grubenv").write_bytes(grubenv(initrdfail="1"))
            trigger.write_text("again")
            wait_for(lambda: not out.exists())
            assert loop.poll() is None
        finally:
            loop.terminate()
            _, stderr = loop.communicate(timeout=30)
    assert b"initrdfail" in stderr
