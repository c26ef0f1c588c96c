"""Issue 18, item 2: the guard that keeps untrusted text from being read as a workflow command."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.ci import actions_guard
from reconciler.adapters.ci.actions_guard import Guard
from reconciler.core.base import github_text
from reconciler.render import document

BOUNDED = settings(max_examples=200, deadline=None, database=None)
# Pieces that make workflow commands, line breaks the runner knows and blanks it trims, and plain text.
# The soft hyphen, a zero-width space and a control character are ignored by the runner's comparison.
PIECES = ("::", ":", "##[", "#", "[", "]", "%", "\r", "\n", "\r\n", "\u2028", "\u2029", " ", "\t",
          "\u00a0", "\u0085", "\ufeff", "\u00ad", "\u200b", "\x01", "warning", "stop-commands", "x",
          "\\", ",")  # fmt: skip
untrusted = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)
INVISIBLE = re.compile(f"[{github_text.IGNORABLE}]")
LEADING_COMMAND = re.compile(r"^\s*::")


def runner_lines(text: str) -> list[str]:
    """The lines as the Actions runner reads them: LF, CR and CRLF end a line."""
    return re.split(r"\r\n|\r|\n", text)


def assert_no_command(text: str) -> None:
    """No command in any line the runner reads, with the characters its comparison ignores left out."""
    for line in runner_lines(text):
        visible = INVISIBLE.sub("", line)
        assert "##[" not in visible, line
        assert LEADING_COMMAND.match(visible) is None, line


def guarded(*chunks: str, flush_between: bool = False) -> str:
    raw = io.StringIO()
    guard = Guard(raw)
    for chunk in chunks:
        guard.write(chunk)
        if flush_between:
            guard.flush()
    guard.flush()
    return raw.getvalue()


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("##[warning]x\n", "##\\[warning]x\n"),
        ("a ##[add-mask]secret b\n", "a ##\\[add-mask]secret b\n"),
        ("###[x\n", "###\\[x\n"),
        ("::warning::x\n", "\\::warning::x\n"),
        ("   \t::stop-commands::t\n", "   \t\\::stop-commands::t\n"),
        ("\u2028::x\n", "\u2028\\::x\n"),
        ("x ::y\n", "x ::y\n"),  # not at the start: not a command
        (":x\n", ":x\n"),  # one colon is not a command
        ("a\rb\n", "a\\rb\n"),
        ("a\r::error::x\n", "a\\r::error::x\n"),
        ("a\r\nb\r\n", "a\r\nb\r\n"),  # CRLF is a line end: kept
        ("::a\n::b\n  ::c\n", "\\::a\n\\::b\n  \\::c\n"),
        ("plain text, 100% ok: [x] #1\n", "plain text, 100% ok: [x] #1\n"),
        # .NET compares culture-sensitively: characters its collation ignores do not break a command.
        ("#\u00ad#[warning]x\n", "#\u00ad#\\[warning]x\n"),
        ("#\u200b#\x01[x\n", "#\u200b#\x01\\[x\n"),
        ("\u200b::x\n", "\u200b\\::x\n"),
        ("\x01 :\u00ad:x\n", "\x01 \\:\u00ad:x\n"),
        ("# #[x\n", "# #[x\n"),  # a blank is not ignored: not a command
        (": :x\n", ": :x\n"),
    ],
)
def test_rewrites(written: str, shown: str) -> None:
    assert guarded(written) == shown
    assert guarded(*written) == shown  # one character per write: the same


def test_patterns_that_straddle_writes() -> None:
    assert guarded("#", "#", "[x\n") == "##\\[x\n"
    assert guarded("  ", ":", ":x\n") == "  \\::x\n"
    assert guarded("a\r", "\nb\n") == "a\r\nb\n"
    assert guarded("a\r", "b\n") == "a\\rb\n"
    assert guarded(":\r", "::") == guarded(":\r::") == ":\\r::"  # a held CR, then a colon: not lost


def test_a_flush_writes_a_held_character_the_safe_way() -> None:
    # A held ':' or CR is written at a flush without knowing what follows: escaped, so what follows
    # cannot complete a command.
    assert guarded(" ", ":", ":x\n", flush_between=True) == " \\::x\n"
    assert guarded("a\r", "::x\n", flush_between=True) == "a\\r::x\n"
    assert guarded(":") == "\\:"


def test_own_commands_go_round_the_guard_at_the_start_of_a_line() -> None:
    raw = io.StringIO()
    guard = Guard(raw)
    guard.write("partial")
    guard.command("::error file=f,line=1::m")
    guard.write("::after\n")
    guard.command("::notice::n")
    assert raw.getvalue() == "partial\n::error file=f,line=1::m\n\\::after\n::notice::n\n"


def test_the_stream_interface_is_delegated() -> None:
    raw = io.StringIO()
    guard = Guard(raw)
    assert guard.isatty() is False
    assert guard.writable()
    assert guard.getvalue() == ""  # anything else: the wrapped stream's
    print("a", "b", sep=":", file=guard, flush=True)  # type: ignore[call-overload]
    guard.writelines(["##[x", "\n"])
    assert raw.getvalue() == "a:b\n##\\[x\n"
    assert guard.write("abc") == 3


@pytest.mark.parametrize("actions", [None, "true"])
def test_guarded_whether_or_not_in_actions(monkeypatch: pytest.MonkeyPatch, actions: str | None) -> None:
    # A container step does not pass GITHUB_ACTIONS, yet the runner reads its lines: guard always.
    if actions is None:
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    else:
        monkeypatch.setenv("GITHUB_ACTIONS", actions)
    before = sys.stdout
    with actions_guard.guarded():
        assert isinstance(sys.stdout, Guard)
        assert isinstance(sys.stderr, Guard)
        with actions_guard.guarded():  # nested: not wrapped twice
            assert isinstance(sys.stdout, Guard)
            assert not isinstance(sys.stdout.raw, Guard)
    assert sys.stdout is before


def test_escape_data_neutralises_both_forms() -> None:
    assert github_text.escape_data("a ##[warning] b\r\n::x") == "a ##\\[warning] b%0D%0A::x"
    assert github_text.annotation("error", "##[stop-commands]t", title="##[x]") == (
        "::error title=##\\[x]::##\\[stop-commands]t"
    )


@BOUNDED
@given(untrusted)
def test_property_no_command_survives(text: str) -> None:
    assert_no_command(guarded(text))


@BOUNDED
@given(st.lists(untrusted, max_size=6), st.booleans())
def test_property_no_command_survives_any_split(chunks: list[str], flush_between: bool) -> None:
    assert_no_command(guarded(*chunks, flush_between=flush_between))
    if not flush_between:
        assert guarded(*chunks) == guarded("".join(chunks))


@BOUNDED
@given(st.text(alphabet=st.characters(blacklist_characters="\r:[")))
def test_property_text_without_the_trigger_characters_is_unchanged(text: str) -> None:
    assert guarded(text) == text


@BOUNDED
@given(st.recursive(st.none() | untrusted | st.integers(), lambda kids: st.lists(kids, max_size=3)))
def test_property_json_text_is_the_same_json_without_commands(value: object) -> None:
    for indent in (2, None):
        text = document.json_text({"value": value, "k": value}, indent)
        assert json.loads(text) == {"value": value, "k": value}
        assert "##[" not in text
        assert guarded(text) == text  # the guard leaves it alone: still valid JSON


@BOUNDED
@given(st.recursive(st.none() | untrusted | st.integers(), lambda kids: st.lists(kids, max_size=3)))
def test_property_yaml_text_is_the_same_data_without_commands(value: object) -> None:
    from ruamel.yaml import YAML

    from reconciler.render.yaml_out import yaml_text

    data = {"value": value, untrusted_key(value): value}
    text = yaml_text(data)
    assert YAML(typ="safe").load(text) == data
    assert_no_command(text)
    assert guarded(text) == text  # the guard leaves it alone: still valid YAML


def untrusted_key(value: object) -> str:
    return f"k{value!r}" if not isinstance(value, str) else value + "k"
