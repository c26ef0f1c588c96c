"""Plain data (what a command's -o json prints) as YAML text for stdout: -o yaml.

Every string that is not a plain word is double-quoted, keys too: a double-quoted scalar spells
control characters, line breaks and non-ASCII separators as escapes, so one value is one line and no
line can start with `::` (a GitHub workflow command). `##[` can then only be inside a quoted scalar,
where `##\\u005b` is the same string (as document.json_text does for JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from io import StringIO
from typing import Any

from reconciler.core.base.github_text import json_safe


def yaml_text(document: Mapping[str, Any]) -> str:
    from ruamel.yaml import YAML  # only -o yaml pays for it

    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 1 << 30  # never fold a long value onto a second line
    yaml.representer.add_representer(type(None), _null)  # `null`, as JSON's, not an empty value
    stream = StringIO()
    yaml.dump(_quoted(document), stream)
    return json_safe(stream.getvalue().rstrip("\n"))


def _null(representer: Any, _value: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _quoted(value: Any) -> Any:
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    from reconciler.core.views.scaffold import (  # with the core's fleet plan: -o yaml only
        PLAIN,
        YAML_11_WORDS,
    )

    if isinstance(value, Mapping):
        return {_quoted(key): _quoted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_quoted(item) for item in value]
    if not isinstance(value, str):
        return value
    text = str(value)  # a StrEnum member as its value, as json.dumps writes it
    return DoubleQuotedScalarString(text) if not PLAIN.match(text) or text.lower() in YAML_11_WORDS else text
