"""A label selector as kubectl takes it (`-l`/`--selector`), parsed as apimachinery's labels.Parse does.

    a=b  a==b      the label a is b                 (In [b])
    a!=b           a is not b, or there is no a     (NotIn [b])
    a in (x,y)     a is x or y                      (In [x, y])
    a notin (x)    a is not x, or there is no a     (NotIn [x])
    a              there is a label a               (Exists)
    !a             there is no label a              (DoesNotExist)
    a>1  a<1       a is an integer above / below    (Gt / Lt)

Requirements are separated by commas and all must hold; blanks around tokens are ignored. Matching
is selectors.py's (one evaluator for node affinity, budgets and this), so offline (--from) a manifest's
labels are selected exactly as the API server selects the live node's. `text()` spells the parsed
selector back for the API server's labelSelector parameter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.core.base import selectors
from reconciler.core.base.selectors import DOES_NOT_EXIST, EXISTS, GT, IN, LT, NOT_IN, OPERATORS, Requirement


class SelectorError(ValueError):
    """The text is not a label selector; the message says where and why."""


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(selectors.holds(requirement, labels, OPERATORS) for requirement in self.requirements)

    def text(self) -> str:
        return ",".join(_spelled(requirement) for requirement in self.requirements)

    def keys(self) -> frozenset[str]:
        """The label keys the selector reads (a live read keeps them: core.reads)."""
        return frozenset(requirement.key for requirement in self.requirements)


def _spelled(requirement: Requirement) -> str:
    key, operator, values = requirement.key, requirement.operator, requirement.values
    if operator == EXISTS:
        return key
    if operator == DOES_NOT_EXIST:
        return f"!{key}"
    if operator in (GT, LT):
        return f"{key}{'>' if operator == GT else '<'}{values[0]}"
    if len(values) == 1:  # `a=` (an empty value) reads back as itself; `a in ()` would be no value
        return f"{key}{'=' if operator == IN else '!='}{values[0]}"
    return f"{key} {'in' if operator == IN else 'notin'} ({','.join(values)})"


# Tokens as apimachinery's lexer reads them: an identifier is a run of anything but blanks and the
# special characters; `!=` and `==` are one token each.
_TOKEN = re.compile(r"\s*(?:(?P<op>==|!=|[=!(),<>])|(?P<word>[^\s=!(),<>]+))")
_OPERATORS = frozenset({"==", "!=", "=", "!", "(", ")", ",", "<", ">"})


def parse(text: str) -> LabelSelector:
    """The selector `text` states; SelectorError on anything labels.Parse refuses."""
    tokens = _tokens(text)
    requirements: list[Requirement] = []
    position = 0
    while position < len(tokens):
        requirement, position = _requirement(tokens, position, text)
        problem = selectors.problem(requirement, OPERATORS)
        if problem is not None:
            raise SelectorError(f"{text!r}: {problem}")
        requirements.append(requirement)
        if position < len(tokens):
            if tokens[position] != ",":
                raise SelectorError(f"{text!r}: expected ',' before {tokens[position]!r}")
            position += 1
            if position == len(tokens):
                raise SelectorError(f"{text!r}: a ',' with no requirement after it")
    if not requirements:
        raise SelectorError(f"{text!r}: no requirement (like pool=a, or gpu in (a100,h100))")
    return LabelSelector(tuple(requirements))


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:  # cannot happen: every character is a blank, an operator or part of a word
            raise SelectorError(f"{text!r}: cannot read it at {text[position:]!r}")
        tokens.append(match.group("op") or match.group("word"))
        position = match.end()
    return tokens


def _requirement(tokens: list[str], position: int, text: str) -> tuple[Requirement, int]:
    if tokens[position] == "!":
        key, position = _word(tokens, position + 1, text, "a label key after '!'")
        return Requirement(key, DOES_NOT_EXIST), position
    key, position = _word(tokens, position, text, "a label key")
    if position == len(tokens) or tokens[position] == ",":
        return Requirement(key, EXISTS), position
    operator = tokens[position]
    if operator in ("=", "==", "!="):
        value, position = _value(tokens, position + 1)
        return Requirement(key, IN if operator != "!=" else NOT_IN, (value,)), position
    if operator in (">", "<"):
        value, position = _word(tokens, position + 1, text, f"an integer after {key}{operator}")
        return Requirement(key, GT if operator == ">" else LT, (value,)), position
    if operator in ("in", "notin"):
        values, position = _set(tokens, position + 1, text, f"{key} {operator}")
        return Requirement(key, IN if operator == "in" else NOT_IN, values), position
    raise SelectorError(
        f"{text!r}: after {key!r} expected =, ==, !=, in, notin, >, < or ',', not {operator!r}"
    )


def _word(tokens: list[str], position: int, text: str, what: str) -> tuple[str, int]:
    if position < len(tokens) and tokens[position] not in _OPERATORS:
        return tokens[position], position + 1
    found = repr(tokens[position]) if position < len(tokens) else "the end"
    raise SelectorError(f"{text!r}: expected {what}, found {found}")


def _value(tokens: list[str], position: int) -> tuple[str, int]:
    """A value after =, == or !=: may be empty (`a=` selects a label a whose value is empty)."""
    if position < len(tokens) and tokens[position] not in _OPERATORS:
        return tokens[position], position + 1
    return "", position


def _set(tokens: list[str], position: int, text: str, what: str) -> tuple[tuple[str, ...], int]:
    if position >= len(tokens) or tokens[position] != "(":
        raise SelectorError(f"{text!r}: expected '(' after {what}")
    values: list[str] = []
    position += 1
    if position < len(tokens) and tokens[position] == ")":
        return (), position + 1  # refused as a requirement: In and NotIn need a value
    while True:
        value, position = _value(tokens, position)
        values.append(value)
        if position < len(tokens) and tokens[position] == ",":
            position += 1
            continue
        if position < len(tokens) and tokens[position] == ")":
            return tuple(values), position + 1
        raise SelectorError(f"{text!r}: expected ',' or ')' in {what} (...)")
