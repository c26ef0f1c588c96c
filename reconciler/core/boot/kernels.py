"""What every boot loader's rules share: the kernel release a `linux` path boots, checked against
the root's /lib/modules, and the grubenv states no reader can follow."""

from __future__ import annotations

import re

from reconciler.core.boot.port import Root, Undecided

# A release uname can print: the probe refuses anything else (a hostile file name never reaches a label).
_RELEASE = re.compile(r"[0-9][-A-Za-z0-9_.+~]*")


def release_of(path: str, *, strip: str) -> str:
    """The release a kernel image path boots. `strip` is the rule: "sed" is 10_linux's
    `sed 's,^[^0-9]*-,,'` on the basename (2.12 10_linux.in 213), "vmlinuz" drops `vmlinuz-`
    (what 20-grub.install names the image: vmlinuz-${KERNEL_VERSION})."""
    name = path.rsplit("/", 1)[-1]
    if strip == "sed":
        release = re.sub(r"^[^0-9]*-", "", name, count=1)
    elif name.startswith("vmlinuz-"):
        release = name[len("vmlinuz-") :]
    else:
        raise Undecided(f"{path!r}: not a vmlinuz-<release> image")
    if not _RELEASE.fullmatch(release) or len(release) > 253:
        raise Undecided(f"{path!r}: {release!r} is not a kernel release")
    return release


def installed(root: Root, release: str) -> str:
    """The release, when /lib/modules has it: a kernel without its modules is not one to label."""
    if root.kind(f"lib/modules/{release}") != "dir":
        raise Undecided(
            f"/lib/modules/{release} is missing: the kernel the boot loader names is not installed"
        )
    return release


def refuse_armed_env(env: dict[str, str], where: str) -> None:
    """grubenv states in which grub.cfg itself changes the default at boot (Ubuntu's initrdfail,
    00_header.in 54-63 in 2.12-1ubuntu1; legacy grub-reboot's prev_saved_entry, 100-106; boot
    counting, rhel-9-main 08_fallback_counting.in 10-23): refused rather than simulated."""
    if env.get("initrdfail"):
        raise Undecided(f"{where}: initrdfail is set: the last boot failed and GRUB picks prev_entry")
    if env.get("prev_saved_entry"):
        raise Undecided(f"{where}: prev_saved_entry is set (a legacy grub-reboot): not decided here")
    if env.get("boot_counter") and env.get("boot_success") == "0":
        raise Undecided(f"{where}: boot_counter is armed with boot_success=0: GRUB may fall back at boot")
