"""Settings types: frozen dataclasses whose fields say how they are given (commands/settings.py has
gpudrv's, executor.Options is apply's upgrade part).

One type per feature, and from it: the argparse flags with their help and defaults (reconciler/arguments
registers them by field name), the gpudrv.yaml keys that give a default (adapters/files/config.py), and
a command line that parses back to the same settings (`argv`: how `reconcile --apply` starts its child
`gpudrv apply`; tests/unit/test_settings.py checks the round trip).

A field's name is its argparse `dest`; a field of kind SETTINGS holds a settings type of its own, whose
fields are flags of the same command line.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, TypeVar

from reconciler.core.base.label_selector import LabelSelector

KEY = "gpudrv"  # the field metadata's key
T = TypeVar("T")


class Kind(StrEnum):
    """How a flag's text reads (reconciler/arguments maps each to its argparse type)."""

    TEXT = "text"  # a string, not empty
    PATH = "path"  # a path, not empty
    FILE = "file"  # a path that names a file (a trailing slash is refused)
    SECONDS = "seconds"  # a kubectl duration: 20s, 5m, 1h30m, or plain seconds
    COUNT = "count"  # a whole number, at least 1
    SWITCH = "switch"  # present or not
    CHOICE = "choice"  # one of `choices`
    SELECTOR = "selector"  # a label selector, as kubectl -l
    SETTINGS = "settings"  # a settings type of its own (`nested`)


@dataclass(frozen=True)
class Flag:
    name: str  # --max-parallel
    kind: Kind
    help: str | None = None
    metavar: str | None = None
    what: str = "value"  # what an empty value lacks: "--from: empty path"
    choices: tuple[str, ...] = ()
    short: str | None = None  # -l
    config: str | None = None  # the gpudrv.yaml key that gives the default
    relay: str | None = None  # the help where another command passes the flag on (reconcile --apply)
    required: bool = False  # argparse refuses a command line without it
    settings: type | None = None  # Kind.SETTINGS: the nested type


def flag(name: str, kind: Kind, default: Any = dataclasses.MISSING, **details: Any) -> Any:
    """A settings field given as `name`; no default: a required flag."""
    metadata = {KEY: Flag(name, kind, **details)}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def nested(settings: type) -> Any:
    """A field that holds another settings type, its defaults by default."""
    return dataclasses.field(
        default_factory=settings, metadata={KEY: Flag("", Kind.SETTINGS, settings=settings)}
    )


@dataclass(frozen=True)
class Spec:
    """One flag of a settings type: its field's name (the dest), how it is given, its default."""

    dest: str
    flag: Flag
    default: Any  # dataclasses.MISSING: none, the value is always given (argv writes it)


def specs(settings: type) -> Iterator[Spec]:
    """Every flag of `settings`, nested types' flags in place of their field."""
    for item in dataclasses.fields(settings):
        found: Flag | None = item.metadata.get(KEY)
        if found is None:
            continue
        if found.kind is Kind.SETTINGS and found.settings is not None:
            yield from specs(found.settings)
        else:
            yield Spec(item.name, found, item.default)


def spec(settings: type, dest: str) -> Spec:
    return next(each for each in specs(settings) if each.dest == dest)


def config_keys(settings: type) -> dict[str, str]:
    """dest -> gpudrv.yaml key, for the fields whose default gpudrv.yaml may give."""
    return {each.dest: each.flag.config for each in specs(settings) if each.flag.config}


def build(settings: type[T], values: Mapping[str, Any], **given: Any) -> T:
    """The settings from parsed values (an argparse namespace's vars) by dest; `given` wins, and a
    dest absent from both takes the field's default."""
    chosen: dict[str, Any] = {}
    for item in dataclasses.fields(settings):  # type: ignore[arg-type]
        found: Flag | None = item.metadata.get(KEY)
        if found is not None and found.kind is Kind.SETTINGS and found.settings is not None:
            chosen[item.name] = given.get(item.name) or build(found.settings, values, **given)
        elif item.name in given:
            chosen[item.name] = given[item.name]
        elif item.name in values:
            chosen[item.name] = _typed(item.default, values[item.name])
    return settings(**chosen)


def _typed(default: Any, value: Any) -> Any:
    """A choice parsed as text, as the enum its default is (argparse keeps the text)."""
    return type(default)(value) if isinstance(default, Enum) and isinstance(value, str) else value


def argv(value: Any) -> list[str]:
    """A command line that parses back to `value`: required flags always, the others when they differ
    from their default. `--flag=text`, so that a value starting with "-" stays a value."""
    line: list[str] = []
    for item in dataclasses.fields(value):
        found: Flag | None = item.metadata.get(KEY)
        current = getattr(value, item.name)
        if found is None:
            continue
        if found.kind is Kind.SETTINGS:
            line += argv(current)
        elif current is None or (item.default is not dataclasses.MISSING and current == item.default):
            continue
        elif found.kind is Kind.SWITCH:
            line.append(found.name)
        else:
            line.append(f"{found.name}={text(found.kind, current)}")
    return line


def text(kind: Kind, value: Any) -> str:
    if kind is Kind.SECONDS:
        return seconds(value)
    if kind is Kind.SELECTOR and isinstance(value, LabelSelector):
        return value.text()
    return str(value)


def seconds(value: float) -> str:
    """Plain decimal seconds that read back as the same float: 300.0, 0.00001, 10000000000000000.0
    (never `1e+06`, which is not a duration)."""
    if not math.isfinite(value):
        raise ValueError(f"{value}: not a duration")
    return format(decimal.Decimal(repr(float(value))), "f")
