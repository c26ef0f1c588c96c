"""The probe's Debian/Ubuntu rules on host roots as plain data (docs/research/next-kernel.md 4, U1-U15)."""

from __future__ import annotations

import pytest

from reconciler.core.boot import Memory, Undecided, decide, next_kernel
from reconciler.core.boot.grubenv import parse as parse_env
from reconciler.core.boot.menu import strtoul
from tests.unit.boot_roots import UUID, entry, grub_cfg, grubenv, ubuntu

K52, K45 = "6.8.0-52-generic", "6.8.0-45-generic"
SAVED = "${saved_entry}"
ADVANCED = f"gnulinux-advanced-{UUID}"


def kernel(root: Memory) -> str:
    return next_kernel(root)[0]


def refused(root: Memory) -> str:
    with pytest.raises(Undecided) as caught:
        next_kernel(root)
    return str(caught.value)


def saved(value: str, **cfg: object) -> Memory:
    return ubuntu(cfg=grub_cfg([K52, K45], SAVED, **cfg), env=grubenv(saved_entry=value))  # type: ignore[arg-type]


def test_default_0_is_the_newest_kernel_the_simple_entry_boots() -> None:
    assert next_kernel(ubuntu()) == (K52, "/boot/grub/grub.cfg: 'Ubuntu'")
    assert kernel(ubuntu(env=grubenv())) == K52  # an empty grubenv changes nothing


def test_the_order_is_grub_cfg_s_not_a_version_sort() -> None:
    # grub-mkconfig already sorted (GRUB_FLAVOUR_ORDER on Ubuntu): the probe follows what it wrote (U14).
    lowlatency = "6.8.0-45-lowlatency"
    assert kernel(ubuntu(kernels=[lowlatency, K52])) == lowlatency


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"{ADVANCED}>gnulinux-{K45}-advanced-{UUID}", K45),  # U2: ids
        (f"Advanced options for Ubuntu>Ubuntu, with Linux {K45}", K45),  # U3: titles
        (f"Advanced options for Ubuntu>Ubuntu, with Linux {K45} (recovery mode)", K45),  # the same kernel
        ("1>2", K45),  # U6: 0 = 52, 1 = 52 recovery, 2 = 45 inside the submenu
        ("1>0", K52),
        ("1", K52),  # the submenu with no rest: its entry 0
        ("0", K52),
        (f"{ADVANCED}>gnulinux-6.8.0-40-generic-advanced-{UUID}", K52),  # U5: a removed kernel
        ("Advanced options for Ubuntu>Ubuntu, with Linux 6.8.0-40-generic", K52),
        ("gnulinux-6.8.0-40-generic-advanced-x", K52),  # not found at the top: entry 0
        ("7", K52),  # out of range: entry 0
        ("", K52),
        ("a\\b", K52),  # U11: grubenv unescapes it to a\b, which matches nothing
        ("  0x1>0x2", K45),  # strtoul: blanks, then hex
        ("1>9", K52),  # out of range inside the submenu: its entry 0
    ],
)
def test_saved_entry_resolves_as_menu_c(value: str, expected: str) -> None:
    assert kernel(saved(value)) == expected


def test_without_recovery_entries_the_indexes_shift() -> None:
    assert kernel(saved("1>1", recovery=False)) == K45
    assert kernel(saved("1>2", recovery=False)) == K52  # out of range: the submenu's entry 0


def test_grub_disable_submenu_puts_every_entry_at_the_top() -> None:
    cfg = grub_cfg([K52, K45], "2", submenu=False)
    assert kernel(ubuntu(cfg=cfg)) == K45  # U7: 0 = 52, 1 = 52 recovery, 2 = 45
    cfg = grub_cfg([K52, K45], SAVED, submenu=False)
    assert kernel(ubuntu(cfg=cfg, env=grubenv(saved_entry=f"gnulinux-{K45}-recovery-{UUID}"))) == K45


def test_next_entry_wins_whatever_the_default_says() -> None:
    env = grubenv(next_entry=f"{ADVANCED}>gnulinux-{K45}-advanced-{UUID}")
    assert kernel(ubuntu(env=env)) == K45  # U4: GRUB_DEFAULT=0
    env = grubenv(saved_entry="0", next_entry="1>2")
    assert kernel(ubuntu(cfg=grub_cfg([K52, K45], SAVED), env=env)) == K45
    assert kernel(ubuntu(env=grubenv(next_entry=""))) == K52  # empty: not set


def test_a_literal_default_by_title_and_the_greater_than_escape() -> None:
    title = "Ubuntu, with Linux 6.8.0-45-generic"
    assert kernel(ubuntu(cfg=grub_cfg([K52, K45], f"Advanced options for Ubuntu>{title}"))) == K45
    # A '>' in a title is written '>>' (menu.c 467-489): here the OS name has one.
    cfg = grub_cfg([K52, K45], SAVED, os="A>B")
    env = grubenv(saved_entry=f"Advanced options for A>>B>A>>B, with Linux {K45}")
    assert kernel(ubuntu(cfg=cfg, env=env)) == K45
    env = grubenv(saved_entry=f"Advanced options for A>B>A>B, with Linux {K45}")  # unescaped: no match
    assert kernel(ubuntu(cfg=cfg, env=env)) == K52


def test_the_title_correction_code_runs_as_grub_cfg_runs_it() -> None:
    old, new = f"Ubuntu, with Linux {K45}", f"Advanced options for Ubuntu>Ubuntu, with Linux {K45}"
    line = f"if [ \"x$default\" = '{old}' ]; then default='{new}'; fi;\n"
    assert kernel(saved(old, extra=line)) == K45
    assert kernel(saved(old)) == K52  # without it the old title matches nothing at the top


def test_the_release_is_what_10_linux_s_sed_leaves() -> None:
    root = ubuntu(kernels=["6.8.0-52-generic+debug"], running=K45)
    decision = decide(root, K45)
    assert (decision.release, decision.value) == ("6.8.0-52-generic+debug", "6.8.0-52-generic_debug")


def test_the_running_kernel_gives_no_label() -> None:
    assert decide(ubuntu(), K52).value is None
    assert decide(ubuntu(), K45).value == K52
    assert "kernel-version.next" not in decide(ubuntu(), K52).features
    assert decide(ubuntu(), K45).features.splitlines()[-1] == f"gpudrv.dev/kernel-version.next={K52}"


# --- what the probe refuses ------------------------------------------------------------------------


def test_a_kernel_in_boot_but_not_in_grub_cfg_is_a_stale_grub_cfg() -> None:
    reason = refused(ubuntu(boot=[K52, K45, "6.8.0-60-generic"]))  # U8
    assert "stale" in reason and "6.8.0-60-generic" in reason
    assert "stale" in refused(ubuntu(boot=[K52]))  # removed, update-grub not run
    # Leftovers grub-mkconfig skips are not kernels (grub_file_is_not_garbage).
    root = ubuntu()
    extra = {**root.files, "boot/vmlinuz-6.8.0-60-generic.dpkg-tmp": b"", "boot/vmlinuz-6.9.sig": b""}
    assert kernel(Memory(extra)) == K52
    # 10_linux's glob has /vmlinuz-* at the top of the root too (2.12 10_linux.in 165-177).
    assert "6.8.0-61-generic" in refused(Memory({**root.files, "vmlinuz-6.8.0-61-generic": b""}))


def test_custom_cfg_or_another_default_assignment_is_refused() -> None:
    root = ubuntu()
    assert "custom.cfg" in refused(Memory({**root.files, "boot/grub/custom.cfg": b"set default=2\n"}))  # U12
    assert "assignment of default" in refused(saved("0", extra="set default=1\n"))
    assert "assignment of default" in refused(saved("0", extra="default=1\n"))


def test_a_cmos_button_default_is_refused() -> None:
    cfg = grub_cfg([K52, K45]).replace(
        'if [ "${next_entry}" ] ; then',
        'if cmostest 16:4 ; then\n   set default="0"\nelif [ "${next_entry}" ] ; then',
    )
    assert "00_header" in refused(ubuntu(cfg=cfg))


def test_an_entry_not_written_by_10_linux_is_refused() -> None:
    # U13: the default lands on the UEFI firmware entry (30_uefi-firmware, inside an `if`).
    assert "only on some platforms" in refused(saved("uefi-firmware"))
    custom = (
        "### BEGIN /etc/grub.d/40_custom ###\n"
        + entry("Mine", "mine", K45)
        + "### END /etc/grub.d/40_custom ###\n"
    )
    cfg = grub_cfg([K52, K45], SAVED).replace(
        "### BEGIN /etc/grub.d/30_uefi", custom + "### BEGIN /etc/grub.d/30_uefi"
    )
    assert "40_custom" in refused(ubuntu(cfg=cfg, env=grubenv(saved_entry="mine")))


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (grubenv(initrdfail="1"), "initrdfail"),  # U9
        (grubenv(prev_saved_entry="1>2"), "prev_saved_entry"),
        (grubenv(boot_counter="0", boot_success="0"), "boot_counter"),
        (b"# not GRUB\n", "not a GRUB environment block"),  # U10
        (b"# GRUB Environment Block\nsaved_entry=1", "no final newline"),
        (b"# GRUB Environment Block\nsaved_entry\n", "no '='"),
    ],
)
def test_grubenv_states_it_cannot_follow(env: bytes, says: str) -> None:
    assert says in refused(ubuntu(env=env))


def test_no_grub_cfg_unreadable_files_and_a_missing_modules_directory() -> None:
    root = ubuntu()
    assert "no /boot/grub/grub.cfg" in refused(
        Memory({k: v for k, v in root.files.items() if "grub.cfg" not in k})
    )
    assert "cannot be read" in refused(ubuntu(boot__grub__grubenv=None))
    assert "cannot be read" in refused(Memory({**root.files, "boot/grub/grub.cfg": None}))
    files = {k: v for k, v in root.files.items() if not k.startswith(f"lib/modules/{K52}")}
    assert f"/lib/modules/{K52} is missing" in refused(Memory(files))


def test_a_hostile_kernel_name_never_reaches_the_label() -> None:
    for hostile in ("6.8.0-52=evil", "6.8.0-52-generic\ngpudrv.dev/x=1", "6.8.0-52\x1b[2J"):
        reason = refused(ubuntu(kernels=[hostile, K45]))
        assert "\n" not in reason and "\x1b" not in reason, reason
    assert "'6.8.0-52=evil' is not a kernel release" in refused(ubuntu(kernels=["6.8.0-52=evil", K45]))
    long = "6.8.0-" + "1" * 70
    root = ubuntu(kernels=[long, K45])
    with pytest.raises(Undecided, match="spells no kernel label: it must be a release as NFD"):
        decide(root, K45)


def test_grub_cfg_shapes_it_does_not_know_are_refused() -> None:
    assert "exactly once" in refused(ubuntu(cfg="menuentry 'x' {\n}\n"))
    assert "not closed" in refused(
        ubuntu(cfg=grub_cfg([K52, K45]).replace("### END /etc/grub.d/10_linux", "if true; then\n###"))
    )
    assert "10_linux entry" in refused(ubuntu(cfg=grub_cfg([K52]).replace("10_linux", "09_other")))


# --- the readers' edges -----------------------------------------------------------------------------


def test_grubenv_is_read_as_envblk_c_reads_it() -> None:
    env = parse_env(grubenv(saved_entry="a\\b", title="x\ny"), "e")
    assert env == {"saved_entry": "a\\b", "title": "x\ny"}
    assert parse_env(b"# GRUB Environment Block\n#c\na=1\na=2\n", "e") == {"a": "2"}


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("0", 0),
        ("12abc", 12),
        (" 3", 3),
        ("0x1f", 31),
        ("017", 15),
        ("08", 8),
        ("x", None),
        ("", None),
        ("1" * 30, -1),
    ],
)
def test_strtoul_as_grub_reads_a_number(text: str, number: int | None) -> None:
    assert strtoul(text)[0] == number
