"""Helm's values semantics, as Helm v3.22.0 has them: merging, coalescing and the text of a value.

Line numbers cite helm.sh/helm/v3@v3.22.0 (the module tests/helm/go.mod pins) and the YAML libraries
it renders with (sigs.k8s.io/yaml v1.6.0 over go.yaml.in/yaml/v2 v2.4.4).

Values reach a template as Go values: a values file is read by sigs.k8s.io/yaml (YAML to JSON to
Go), so every number is a float64 (pkg/chartutil/values.go:107-113, pkg/cli/values/options.go:56);
a Python `int` here stands for that float64. A template prints a value with fmt's %v, and the text
it writes is read again as YAML: `go_text` and `resolve_plain` model those two steps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """User values layers, lowest precedence first, merged as `helm` merges its `-f` files and its
    `--set` values before they meet the chart (pkg/cli/values/options.go:44-106, mergeMaps 108-125):
    two maps merge key by key, deeply; anything else in a later layer replaces what was there; a None
    (YAML null) in a later layer is kept as None.

    The None is a deletion: when the merged values meet the chart's defaults (`coalesce`, which
    `helm_chart.render` applies), a None removes that key, chart default included
    (pkg/chartutil/coalesce.go:222-229 at the top level, 304-308 below it). Keeping it until then is
    what Helm does: `merge({"a": 1}, {"a": None})` must still delete the chart's `a`.
    """
    out: dict[str, Any] = {}
    for layer in layers:
        out = _merge_maps(out, layer)
    return out


def _merge_maps(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: _copy(v) for k, v in a.items()}
    for key, value in b.items():
        current = out.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = _merge_maps(current, value)
        else:
            out[key] = _copy(value)
    return out


def coalesce(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The user's values over the chart's defaults, as CoalesceValues does (coalesce.go:45-51):
    maps merge deeply and the user's value wins; a None deletes the key when the chart has a non-null
    value there (coalesce.go:224-229, 304-308) and is kept otherwise (309-311); a table meeting a
    non-table keeps the user's side (coalesce.go:233-238, 315-319)."""
    out = {k: _copy(v) for k, v in values.items()}
    for key, default in defaults.items():
        if key not in out:
            out[key] = _copy(default)
            continue
        value = out[key]
        if value is None:
            del out[key]  # coalesce.go:224-229: at the top level any chart key goes
        elif isinstance(value, dict) and isinstance(default, Mapping):
            out[key] = _coalesce_tables(value, default)
    return out


def _coalesce_tables(dst: dict[str, Any], src: Mapping[str, Any]) -> dict[str, Any]:
    """coalesceTablesFullKey with merge=false (coalesce.go:278-323); dst (the user's) is authoritative."""
    for key, default in src.items():
        if key not in dst:
            dst[key] = _copy(default)
        elif dst[key] is None:
            if default is not None:
                del dst[key]  # coalesce.go:304-308: the user nullifies a chart default
        elif isinstance(dst[key], dict) and isinstance(default, Mapping):
            _coalesce_tables(dst[key], default)
    return dst


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


# --------------------------------------------------------------------------
# Templates: truth, and the text of a value
# --------------------------------------------------------------------------


def truthy(value: Any) -> bool:
    """text/template's `if` (isTrue) and the negation of sprig's `empty`, which `default` uses: nil,
    false, 0, "" and empty maps and lists are false."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | Mapping | list | tuple):
        return len(value) > 0
    return True


def go_text(value: Any) -> str:
    """What `{{ value }}` writes: fmt's %v of the Go value, and "" for nil (Helm replaces text/template's
    "<no value>", pkg/engine/engine.go:301-304). Numbers are float64s (the module docstring says why)."""
    if isinstance(value, Mapping):
        inner = " ".join(f"{k}:{_go_inner(value[k])}" for k in sorted(value, key=str))
        return f"map[{inner}]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(_go_inner(v) for v in value) + "]"
    return _go_scalar(value)


def _go_scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return go_float(float(value))
    return str(value)


def _go_inner(value: Any) -> str:
    return "<nil>" if value is None else go_text(value)


def go_float(f: float) -> str:
    """fmt's %v of a float64: strconv's shortest 'g', with an exponent below 1e-4 and from 1e6 up
    (so 550 -> "550", 550.90 -> "550.9", 1000000 -> "1e+06")."""
    if math.isnan(f) or math.isinf(f) or f == 0:
        return _go_special(f)
    sign, digit_tuple, exponent = Decimal(repr(f)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    dp = len("".join(map(str, digit_tuple))) + int(exponent)
    exp = dp - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{neg}{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{digits}"
    if dp >= len(digits):
        return neg + digits + "0" * (dp - len(digits))
    return f"{neg}{digits[:dp]}.{digits[dp:]}"


def _go_special(f: float) -> str:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return "-0" if math.copysign(1.0, f) < 0 else "0"


# --------------------------------------------------------------------------
# YAML: what a plain (unquoted) scalar becomes when the rendered manifest is read
# --------------------------------------------------------------------------

# go.yaml.in/yaml/v2 v2.4.4 resolve.go:38-45 (the map) and 85 (yamlStyleFloat); the API server and
# Helm's client read manifests with it through sigs.k8s.io/yaml.
_BOOLS = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_SPECIAL_FLOATS = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_KNOWN: dict[str, Any] = {**dict.fromkeys(_NULLS), **_BOOLS, **_SPECIAL_FLOATS}
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?$")
_INT64 = 2**63
_UINT64 = 2**64


def resolve_plain(text: str) -> Any:
    """The value a plain scalar resolves to (go.yaml.in/yaml/v2 resolve.go:87-190): null, bool, int
    (decimal, 0x, 0o, 0b, a leading 0 for octal, underscores ignored), float, else the string itself.
    A timestamp decoded into an interface{} stays a string."""
    if text in _KNOWN:
        return _KNOWN[text]
    if text[0] not in "+-.0123456789" or _TIMESTAMP.match(text):
        return text
    if text[0] == ".":
        return _parse_float(text, text)
    plain = text.replace("_", "")
    number = _parse_go_int(plain)
    if number is not None and -_INT64 <= number < _UINT64:
        return number
    if _YAML_FLOAT.match(plain):
        return _parse_float(plain, text)
    return text


def _parse_float(candidate: str, text: str) -> Any:
    try:
        return float(candidate)
    except ValueError:
        return text


def _parse_go_int(s: str) -> int | None:
    """strconv.ParseInt(s, 0, 64)'s syntax (range checked by the caller)."""
    sign = -1 if s[:1] == "-" else 1
    body = s[1:] if s[:1] in "+-" else s
    bases = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
    base, digits = bases.get(body[:2], 0), body[2:]
    if base == 0:
        base, digits = (8, body[1:]) if len(body) > 1 and body[0] == "0" else (10, body)
    if not digits:
        return None
    try:
        return sign * int(digits, base)
    except ValueError:
        return None


# A plain scalar written after `key: ` that would not read back as that one scalar.
_NOT_PLAIN = re.compile(r"[\n\r\t]|: |:$| #|^[\[\]{}#&*!|>'\"%@`,]|^[-?:] |^[-?:]$|^\s|\s$")


def plain_scalar_problem(text: str) -> str | None:
    """Why `key: text` would not read back as one plain scalar (YAML 1.1 plain-scalar rules), or None."""
    return "is not a plain YAML scalar" if _NOT_PLAIN.search(text) else None


def json_type(value: Any) -> str:
    """The JSON type name the API server's validation reports (e.g. "integer", "number")."""
    for kind, name in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    return "null" if value is None else "array"


# bool before int: a Python bool is an int.
_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (Mapping, "object"),
)
