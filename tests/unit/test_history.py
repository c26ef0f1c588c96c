"""The history fold on plain text: PR numbers, the log reader, row lifetimes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.core.images import history
from reconciler.core.images.history import CommitDiff, CommitInfo, Lifetime
from reconciler.core.images.tags import ImageKey

A = ImageKey("550", "5.15.0-119-generic", "ubuntu22.04")
B = ImageKey("535", "5.15.0-107-generic", "ubuntu22.04")
C = ImageKey("550", "6.8.0-45-generic", "ubuntu24.04")
HEADER = "driver_branch,kernel,os_tag"


def info(n: int) -> CommitInfo:
    return CommitInfo(f"c{n}", f"author{n}", f"2024-01-0{n}T00:00:00+00:00", None)


def step(n: int, added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> CommitDiff:
    return CommitDiff(info(n), removed, added)


@pytest.mark.parametrize(
    ("subject", "pr"),
    [
        ("Add 550 for 6.8.0-52 (#123)", 123),
        ("Add 550 for 6.8.0-52 (#123)  ", 123),
        ("Merge pull request #45 from team/add-550", 45),
        ('Revert "Add row (#12)" (#15)', 15),
        ('Revert "Add row (#12)"', None),  # the PR named inside is not this commit's
        ("Fix #12 by adding the row", None),
        ("Merge branch 'main' into feature", None),
        ("Merge pull request #7", 7),
        ("plain commit", None),
    ],
)
def test_pr_number(subject: str, pr: int | None) -> None:
    assert history.pr_number(subject) == pr


def test_commit_info_keeps_nul_free_subject_whole() -> None:
    parsed = history.commit_info("abc\x00Ann Example\x002024-05-01T10:00:00+02:00\x00Add: x, y (#9)")
    assert parsed == CommitInfo("abc", "Ann Example", "2024-05-01T10:00:00+02:00", 9)


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("550,5.15.0-119-generic,ubuntu22.04", A),
        ("550,5.15.0-119-generic,ubuntu22.04\r", A),
        ('"550","5.15.0-119-generic",ubuntu22.04', A),
        (" 550 , 5.15.0-119-generic ,ubuntu22.04 ", A),
        (HEADER, None),
        ("\ufeff" + HEADER, None),
        ("", None),
        ("   ", None),
        ("550,5.15.0-119-generic", None),
        ("550,,ubuntu22.04", None),
        ('"550,5.15.0-119-generic,ubuntu22.04', None),  # an unterminated quote is one cell
    ],
)
def test_row_key_normalises_through_the_csv_reader(line: str, key: ImageKey | None) -> None:
    assert history.row_key(line) == key


LOG = [
    "\x01c1\x00Ann\x002024-01-01T00:00:00+00:00\x00Start the matrix",
    "",
    "diff --git a/matrix/support-matrix.csv b/matrix/support-matrix.csv",
    "new file mode 100644",
    "index 0000000..1111111",
    "--- /dev/null",
    "+++ b/matrix/support-matrix.csv",
    "@@ -0,0 +1,2 @@",
    f"+{HEADER}",
    f"+{A.as_csv()}",
    "\x01c2\x00Bob\x002024-01-02T00:00:00+00:00\x00Merge pull request #7 from x/y",
    "",
    "diff --git a/matrix/support-matrix.csv b/matrix/support-matrix.csv",
    "index 1111111..2222222 100644",
    "--- a/matrix/support-matrix.csv",
    "+++ b/matrix/support-matrix.csv",
    f"@@ -2 +2 @@ {HEADER}",
    f"-{A.as_csv()}",
    f"+{A.as_csv()}\r",
    "@@ -2,0 +3 @@",
    f"+{B.as_csv()}",
    "\\ No newline at end of file",
    "\x01c3\x00Cy\x002024-01-03T00:00:00+00:00\x00Only a mode change",
    "",
    "diff --git a/matrix/support-matrix.csv b/matrix/support-matrix.csv",
    "old mode 100644",
    "new mode 100755",
]


def test_read_log_splits_commits_and_skips_headers() -> None:
    diffs = list(history.read_log(line + "\n" for line in LOG))
    assert [d.info.commit for d in diffs] == ["c1", "c2", "c3"]
    assert diffs[0].added == (HEADER, A.as_csv()) and diffs[0].removed == ()
    assert diffs[1].info.pr == 7
    assert diffs[1].removed == (A.as_csv(),)
    assert diffs[1].added == (A.as_csv() + "\r", B.as_csv())
    assert diffs[2].added == diffs[2].removed == ()


def test_read_log_of_nothing() -> None:
    assert list(history.read_log([])) == []


def test_fold_plain_adds_in_file_order() -> None:
    lifetimes = history.fold([step(1, (HEADER, A.as_csv())), step(2, (C.as_csv(), B.as_csv()))])
    assert lifetimes == [Lifetime(A, info(1)), Lifetime(C, info(2)), Lifetime(B, info(2))]


def test_fold_resort_and_reformat_keep_the_original_addition() -> None:
    rows = (A.as_csv(), B.as_csv(), C.as_csv())
    resorted = (C.as_csv(), '"550",5.15.0-119-generic,ubuntu22.04\r', " 535,5.15.0-107-generic,ubuntu22.04")
    lifetimes = history.fold([step(1, (HEADER, *rows)), step(2, resorted, rows)])
    assert lifetimes == [Lifetime(A, info(1)), Lifetime(B, info(1)), Lifetime(C, info(1))]


def test_fold_removal_and_readdition_are_two_stays() -> None:
    lifetimes = history.fold(
        [step(1, (A.as_csv(), B.as_csv())), step(2, removed=(A.as_csv(),)), step(3, (A.as_csv(),))]
    )
    assert lifetimes == [Lifetime(A, info(1), info(2)), Lifetime(B, info(1)), Lifetime(A, info(3))]
    assert history.current_addition(lifetimes, A) == info(3)
    assert history.current_addition(lifetimes, B) == info(1)
    assert history.current_addition(lifetimes, C) is None


def test_fold_duplicate_row_lives_until_its_last_copy_goes() -> None:
    lifetimes = history.fold(
        [
            step(1, (A.as_csv(),)),
            step(2, (A.as_csv(),)),  # a duplicate copy
            step(3, removed=(A.as_csv(),)),
            step(4, removed=(A.as_csv(),)),
        ]
    )
    assert lifetimes == [Lifetime(A, info(1), info(4))]


def test_fold_ignores_removals_of_rows_it_never_saw() -> None:
    assert history.fold([step(1, removed=(A.as_csv(),)), step(2, (A.as_csv(),))]) == [Lifetime(A, info(2))]


def test_fold_file_deleted_then_recreated() -> None:
    lifetimes = history.fold(
        [step(1, (HEADER, A.as_csv())), step(2, removed=(HEADER, A.as_csv())), step(3, (HEADER, A.as_csv()))]
    )
    assert lifetimes == [Lifetime(A, info(1), info(2)), Lifetime(A, info(3))]


def test_fold_streams_a_generator() -> None:
    def diffs() -> Iterator[CommitDiff]:
        for n in range(1, 4):
            yield step(n, (f"{n}00,5.15.0-1-generic,ubuntu22.04",))

    lifetimes = history.fold(diffs())
    assert [life.key.driver_branch for life in lifetimes] == ["100", "200", "300"]
