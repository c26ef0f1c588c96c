"""The probe's RHEL rules: BLS entries, blscfg's sort, RHEL's menu.c (next-kernel.md 4, R1-R8b)."""

from __future__ import annotations

import pytest

from reconciler.core.boot import Memory, Undecided, decide, next_kernel
from reconciler.core.boot.bls import parse_entry
from reconciler.core.boot.menu import Entry, rhel_number
from reconciler.core.boot.vercmp import split_cmp, vercmp
from tests.unit.boot_roots import MID, bls_entry, grubenv, rhel

K427, K362 = "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-362.8.1.el9_3.x86_64"


def kernel(root: Memory) -> str:
    return next_kernel(root)[0]


def refused(root: Memory) -> str:
    with pytest.raises(Undecided) as caught:
        next_kernel(root)
    return str(caught.value)


def with_files(root: Memory, files: dict[str, bytes | None]) -> Memory:
    return Memory({**root.files, **files})


def test_saved_entry_by_id_picks_that_entry() -> None:
    root = rhel(env=grubenv(saved_entry=f"{MID}-{K362}"))  # R1
    assert next_kernel(root) == (K362, f"/boot/loader/entries: '{MID}-{K362}.conf'")


@pytest.mark.parametrize("env", [None, grubenv(), grubenv(saved_entry=f"{MID}-5.14.0-70.13.1.el9_0.x86_64")])
def test_no_or_an_unknown_saved_entry_is_the_newest_entry(env: bytes | None) -> None:
    assert kernel(rhel(env=env)) == K427  # R2


def test_next_entry_wins_over_saved_entry() -> None:
    assert kernel(rhel(env=grubenv(saved_entry=f"{MID}-{K427}", next_entry=f"{MID}-{K362}"))) == K362  # R3


def test_saved_entry_by_title_and_by_number() -> None:
    title = f"Red Hat Enterprise Linux ({K362}) 9.4 (Plow)"
    assert kernel(rhel(env=grubenv(saved_entry=title))) == K362  # R8
    # 0 = 427, 1 = 362, 2 = the rescue entry (version 0 sorts last)
    assert kernel(rhel(env=grubenv(saved_entry="1"))) == K362
    assert kernel(rhel(env=grubenv(saved_entry="2"))) == "0-rescue-" + MID
    # RHEL's menu.c: a number must be the whole value, unlike upstream's numeric prefix.
    assert kernel(rhel(env=grubenv(saved_entry="1>0"))) == K427
    assert kernel(rhel(env=grubenv(saved_entry=f"{MID}-{K362} trailing"))) == K427


def test_a_literal_grub_default() -> None:
    assert kernel(rhel(default="1")) == K362
    assert kernel(rhel(default=f"{MID}-{K362}")) == K362


def test_an_old_machine_id_that_starts_with_a_digit_sorts_first() -> None:
    # R4: the machine-id is compared first, and digits beat letters (blscfg.c vercmp).
    old, new = "8583" + "0" * 28, "a343" + "0" * 28
    root = rhel(kernels=["5.14.0-503.33.1.el9_5.x86_64"], mid=new)
    files = {
        f"boot/loader/entries/{old}-5.14.0-503.14.1.el9_5.x86_64.conf": bls_entry(
            "5.14.0-503.14.1.el9_5.x86_64", mid=old
        ),
        "lib/modules/5.14.0-503.14.1.el9_5.x86_64/modules.dep": b"",
    }
    assert kernel(with_files(root, files)) == "5.14.0-503.14.1.el9_5.x86_64"


def test_a_debug_kernel_sorts_before_its_base_and_its_label_is_spelled_as_nfd_would() -> None:
    debug = K427 + "+debug"
    root = rhel(kernels=[K427, debug])  # R5
    decision = decide(root, K427)
    assert (decision.release, decision.value) == (debug, "5.14.0-427.13.1.el9_4.x86_64_debug")


def test_an_entry_without_linux_is_skipped_and_the_indexes_shift() -> None:
    root = rhel(env=grubenv(saved_entry="1"))  # R6
    no_linux = b"title broken\nversion 5.14.0-500.el9.x86_64\n"
    assert (
        kernel(with_files(root, {f"boot/loader/entries/{MID}-5.14.0-500.el9.x86_64.conf": no_linux})) == K362
    )


def test_rhel8_sorts_by_the_version_keys_when_every_entry_has_one() -> None:
    # R8b: differing machine-ids; RHEL 9 compares ids (the 'b...' id loses to '9...'), RHEL 8 versions.
    old, new = "9" + "0" * 31, "b" + "0" * 31
    k_old, k_new = "4.18.0-477.10.1.el8_8.x86_64", "4.18.0-513.5.1.el8_9.x86_64"
    root = rhel(kernels=[k_new], mid=new, version_id="8.9")
    files = {
        f"boot/loader/entries/{old}-{k_old}.conf": bls_entry(k_old, mid=old),
        f"lib/modules/{k_old}/modules.dep": b"",
        f"boot/loader/entries/{new}-0-rescue.conf": bls_entry("0", mid=new),
    }
    root8 = with_files(Memory({k: v for k, v in root.files.items() if "0-rescue" not in k}), files)
    assert kernel(root8) == k_new
    root9 = Memory({**root8.files, "etc/os-release": b'ID="rhel"\nVERSION_ID="9.4"\n'})
    assert kernel(root9) == k_old
    unknown = Memory({**root8.files, "etc/os-release": b"ID=other\n"})
    assert "disagree" in refused(unknown)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (grubenv(boot_counter="0", boot_success="0"), "boot_counter"),  # R7
        (grubenv(blsdir="/other"), "blsdir"),
        (b"", "not a GRUB environment block"),  # load_env -f on an empty file fails
    ],
)
def test_grubenv_states_it_cannot_follow(env: bytes, says: str) -> None:
    assert says in refused(rhel(env=env))


def test_the_refusals() -> None:
    root = rhel()
    assert "missing" in refused(
        Memory({k: v for k, v in root.files.items() if not k.startswith("lib/modules/5.14.0-427")})
    )
    assert "no grub.cfg running blscfg" in refused(
        Memory({k: v for k, v in root.files.items() if "grub.cfg" not in k})
    )
    assert "custom.cfg" in refused(with_files(root, {"boot/grub2/custom.cfg": b""}))
    assert "two different grub.cfg" in refused(
        with_files(root, {"boot/efi/EFI/redhat/grub.cfg": root.files["boot/grub2/grub.cfg"] + b"\n# other\n"})  # type: ignore[operator]
    )
    equal = {f"boot/loader/entries/{MID}-5.14.0-427_13_1.el9_4.x86_64.conf": bls_entry(K427)}
    assert "no defined order" in refused(with_files(root, equal))
    assert "cannot be read" in refused(with_files(root, {f"boot/loader/entries/{MID}-{K427}.conf": None}))
    assert kernel(rhel(default="7")) == K427  # out of range: entry 0
    custom = "### BEGIN /etc/grub.d/40_custom ###\nmenuentry 'Mine' --id mine {\n linux /vmlinuz-x\n}\n"
    cfg = root.files["boot/grub2/grub.cfg"] + custom.encode()  # type: ignore[operator]
    for saved in ("3", "mine", "Mine"):  # after the three BLS entries
        on_custom = with_files(
            root, {"boot/grub2/grub.cfg": cfg, "boot/grub2/grubenv": grubenv(saved_entry=saved)}
        )
        assert "'Mine', not a BLS entry" in refused(on_custom)


def test_an_entry_name_with_a_control_character_is_refused() -> None:
    root = with_files(rhel(), {f"boot/loader/entries/{MID}-6.0\x1b.conf": bls_entry("6.0")})
    reason = refused(root)
    assert "control character" in reason and "\x1b" not in reason


def test_the_bls_line_parse_of_blscfg_c() -> None:
    entry = parse_entry(
        "x.conf", b"  # comment\ntitle  A  B\nlinux\t/vmlinuz-1\nlinux /vmlinuz-2\n\nversion 9\n"
    )
    assert entry.id == "x" and entry.get("title") == "A  B" and entry.get("linux") == "/vmlinuz-1"
    assert entry.get("version") is None  # the empty line ended the parse
    # A space anywhere wins over an earlier tab (strchr ' ' first): the key then holds the tab.
    assert parse_entry("y.conf", b"linux\t/vmlinuz-1 quiet\n").keys == (("linux\t/vmlinuz-1", "quiet"),)


@pytest.mark.parametrize(
    ("a", "b", "result"),
    [
        ("1.0", "1.0", 0),
        ("1.10", "1.9", 1),
        ("1.0~rc1", "1.0", -1),
        ("1.0+debug", "1.0", 1),
        ("1.0", "1.0+debug", -1),
        ("1a", "1", 1),
        ("a", "1", -1),
        ("el9_4", "el9_3", 1),
        ("001", "1", 0),
        ("1.0", "1_0", 0),
    ],
)
def test_vercmp(a: str, b: str, result: int) -> None:
    assert vercmp(a, b) == result
    assert vercmp(b, a) == -result


def test_rhel8_vercmp_has_no_plus_rule() -> None:
    assert vercmp("1.0+debug", "1.0", plus=False) == 1  # leftover characters win
    assert vercmp("1+a", "1.a", plus=False) == 0


def test_split_cmp_compares_name_then_version_then_release() -> None:
    assert split_cmp(f"{MID}-{K427}", f"{MID}-{K362}", has_name=True) == 1
    assert split_cmp(f"{MID}-0-rescue", f"{MID}-{K362}", has_name=True) == -1


def test_rhel_menu_c_matches_an_id_up_to_a_blank() -> None:
    entries = (Entry(title="T one", id="a"), Entry(title="T two", id="b"))
    assert rhel_number(entries, "b") == 1
    assert rhel_number(entries, "T two") == 1
    assert rhel_number(entries, "b x") == -1
    assert rhel_number(entries, "1") == 1
    assert rhel_number(entries, "1 ") == -1
