"""`gpudrv probe`: the kernel a node boots next, as an NFD feature file (commands/probe.py, whose
Settings it runs from)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.arguments import file_path, given, path, seconds
from reconciler.errors import GpudrvError
from reconciler.usage import Usage
from reconciler.verbs import add_parser

if TYPE_CHECKING:
    from reconciler.verbs import SubParsers

USAGE = Usage(
    "run on a node: the kernel it boots next, as an NFD feature file",
    "Reads the boot loader's files under --root (GRUB's grub.cfg and grubenv on Debian and Ubuntu, BLS "
    "entries on RHEL 8 and 9) as the boot loader would, and prints (or --write writes, atomically) "
    "a features.d file with gpudrv.dev/kernel-version.next=KERNEL, absent when the next kernel is "
    "the running one. Exit 0 decided, 2 cannot decide (one line saying why; --write removes the file).",
    (
        ("gpudrv probe --root /host", "print the feature file"),
        ("gpudrv probe --root /host --write /features.d/gpudrv-next-kernel", "write it atomically"),
        (
            "gpudrv probe --root /host --write /features.d/gpudrv-next-kernel --every 10m",
            "the DaemonSet's loop",
        ),
    ),
)
FROM_READS_MANIFESTS = False


def register(commands: SubParsers) -> None:
    parser = add_parser(commands, "probe", __name__)
    parser.add_argument(
        "--root", type=path("--root"), default=Path("/"), metavar="DIR", help="the host's root (default /)"
    )
    parser.add_argument(
        "--write", type=file_path("--write"), metavar="PATH", help="the feature file (default: stdout)"
    )
    parser.add_argument("--every", type=seconds, metavar="DURATION", help="run again every DURATION (5m, 1h)")
    parser.add_argument(
        "--trigger",
        type=given("--trigger", "path"),
        metavar="PATH",
        help="with --every: run at once when this file under --root changes (a kernel hook touches it)",
    )


def main(args: argparse.Namespace) -> int:
    if args.trigger and args.every is None:
        raise GpudrvError("probe: --trigger needs --every (the loop that watches it)")
    if args.every is not None and args.every < 1:
        raise GpudrvError(f"probe: --every {args.every:g}s: give 1s or more")
    from reconciler.commands import probe

    return probe.run(probe.Settings(args.root, args.write, args.every, args.trigger))
