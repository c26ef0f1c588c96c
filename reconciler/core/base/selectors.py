"""Label requirements (In, NotIn, Exists, DoesNotExist, Gt, Lt) with apimachinery's exact semantics.

One evaluator for both places Kubernetes uses them: node affinity (placement.py, all six operators)
and the metav1.LabelSelector of a PodDisruptionBudget (budget.py, no Gt or Lt). NotIn and
DoesNotExist match labels that lack the key; Gt and Lt read the label as a base-10 int64, and a
label that is not one never matches. A requirement the API server cannot parse (an unknown
operator, the wrong number of values, an invalid key or value) matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
SELECTOR_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)  # metav1.LabelSelector has no Gt or Lt

_INT64 = range(-(2**63), 2**63)
INT64_DIGITS = 19  # more digits (leading zeros aside) are out of int64's range whatever they are
_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


@dataclass(frozen=True)
class Requirement:
    """One matchExpressions (labels) or matchFields (node fields) entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @property
    def condition(self) -> str:
        """`In [550]`, `Gt 560`, `Exists`: the requirement without its key."""
        if self.operator in (GT, LT) and len(self.values) == 1:
            return f"{self.operator} {self.values[0]}"
        if self.operator in (EXISTS, DOES_NOT_EXIST) and not self.values:
            return self.operator
        return f"{self.operator} [{', '.join(self.values)}]"


def why_not(requirement: Requirement, labels: Mapping[str, str]) -> str | None:
    """Why these labels fail the (parseable) requirement, naming the node's value; None if they pass."""
    return value_why_not(requirement, labels.get(requirement.key))


def value_why_not(requirement: Requirement, value: str | None) -> str | None:
    """The same for one value; None stands for a missing label."""
    return _CHECKS[requirement.operator](requirement, value)


def holds(requirement: Requirement, labels: Mapping[str, str], operators: Sequence[str]) -> bool:
    """Whether the labels satisfy it; a requirement the API server cannot parse matches nothing."""
    return problem(requirement, operators) is None and why_not(requirement, labels) is None


def parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): an optional sign, ASCII digits, no spaces or underscores."""
    if re.fullmatch(r"[+-]?[0-9]+", text) is None or too_long(text):
        return None  # too long: out of range, and int() refuses over 4,300 digits (a ValueError)
    sign, digits = ("-", text[1:]) if text[0] == "-" else ("", text.lstrip("+"))
    number = int(sign + (digits.lstrip("0") or "0"))  # leading zeros: Go takes them, int() counts them
    return number if number in _INT64 else None


def too_long(text: str) -> bool:
    """An integer's text with more digits than any int64 has (ParseInt's ErrRange)."""
    return len(text.lstrip("+-").lstrip("0")) > INT64_DIGITS


def valid_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and re.fullmatch(_DNS_SUBDOMAIN, prefix)):
        return False
    return len(name) <= 63 and re.fullmatch(_NAME, name) is not None


def valid_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and re.fullmatch(_NAME, value) is not None)


def problem(requirement: Requirement, operators: Sequence[str] = OPERATORS) -> str | None:
    """Why labels.NewRequirement refuses this requirement, or None; `operators` are those allowed."""
    key, operator, values = requirement.key, requirement.operator, requirement.values
    if not valid_label_key(key):
        return f"{key!r} is not a valid label key"
    if operator not in operators:
        return f"{key}: unknown operator {operator!r} ({', '.join(operators)})"
    if (count := _count_problem(operator, len(values))) is not None:
        return f"{key} {operator}: {count}"
    if operator in (GT, LT) and parse_int64(values[0]) is None:
        if re.fullmatch(r"[+-]?[0-9]+", values[0]) and too_long(values[0]):
            digits = len(values[0].lstrip("+-"))
            return f"{key} {operator}: the value is too long ({digits:,} digits; an int64 has at most 19)"
        return f"{key} {operator}: the value {values[0]!r} is not an integer"
    bad = next((value for value in values if not valid_label_value(value)), None)
    return None if bad is None else f"{key} {operator}: {bad!r} is not a valid label value"


def _count_problem(operator: str, count: int) -> str | None:
    if operator in (IN, NOT_IN) and count == 0:
        return "needs at least one value"
    if operator in (EXISTS, DOES_NOT_EXIST) and count:
        return "takes no values"
    if operator in (GT, LT) and count != 1:
        return "needs exactly one value"
    return None


# --- one check per operator, each naming the value that fails it ------------------------------


def _in(requirement: Requirement, value: str | None) -> str | None:
    if value is None:
        return f"{requirement.key} is missing ({requirement.condition})"
    return (
        None if value in requirement.values else f"{requirement.key}={value} is not {requirement.condition}"
    )


def _not_in(requirement: Requirement, value: str | None) -> str | None:
    if value is None or value not in requirement.values:
        return None
    return f"{requirement.key}={value} is excluded by {requirement.condition}"


def _exists(requirement: Requirement, value: str | None) -> str | None:
    return f"{requirement.key} is missing (Exists)" if value is None else None


def _does_not_exist(requirement: Requirement, value: str | None) -> str | None:
    return None if value is None else f"{requirement.key}={value} is set (DoesNotExist)"


def _compare(requirement: Requirement, value: str | None) -> str | None:
    if value is None:
        return f"{requirement.key} is missing ({requirement.condition})"
    number = parse_int64(value)
    if number is None:
        return f"{requirement.key}={value} is not an integer ({requirement.condition})"
    limit = int(requirement.values[0])  # parseable: problem() checked it
    holds = number > limit if requirement.operator == GT else number < limit
    return None if holds else f"{requirement.key}={value} is not {requirement.condition}"


_CHECKS: Mapping[str, Callable[[Requirement, str | None], str | None]] = {
    IN: _in,
    NOT_IN: _not_in,
    EXISTS: _exists,
    DOES_NOT_EXIST: _does_not_exist,
    GT: _compare,
    LT: _compare,
}
