"""Type-strict structural comparison with a readable diff.

Python's ``==`` says ``True == 1`` and ``1 == 1.0``; the vectors need JSON
equality, so scalars compare by JSON type *and* value. Object key order is
ignored, array order is significant (vectors.md §5, §11.12).

``diff(expected, actual, path)`` returns one line per mismatch, each naming the
JSON path, for example
``transcript[2].stdout.error.details.reason: expected "owner-mismatch", got "epoch-mismatch"``.
"""

from __future__ import annotations

import json
from typing import Any

_MISSING = object()


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (bool is not a number here)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def strict_equal(a: Any, b: Any) -> bool:
    """JSON structural equality: same types at every node, key order ignored."""
    return not diff(a, b, "", limit=1)


def show(value: Any, limit: int = 160) -> str:
    """A short JSON rendering of a value for a diff line."""
    if value is _MISSING:
        return "(absent)"
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _key_path(path: str, key: str) -> str:
    simple = key.replace("_", "").replace("-", "").isalnum() and not key[:1].isdigit()
    part = key if simple else json.dumps(key)
    return f"{path}.{part}" if path else part


def diff(expected: Any, actual: Any, path: str = "", limit: int = 50) -> list[str]:
    """Mismatch lines between ``expected`` and ``actual`` (at most ``limit``)."""
    out: list[str] = []
    _walk(expected, actual, path, out, limit)
    return out


def _walk(exp: Any, act: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    where = path or "(root)"
    te, ta = json_type(exp), json_type(act)
    if te != ta:
        out.append(f"{where}: expected {te} {show(exp)}, got {ta} {show(act)}")
        return
    if te == "object":
        for key in exp:
            if key not in act:
                out.append(f"{_key_path(path, key)}: expected {show(exp[key])}, got (absent)")
            else:
                _walk(exp[key], act[key], _key_path(path, key), out, limit)
            if len(out) >= limit:
                return
        for key in act:
            if key not in exp:
                out.append(f"{_key_path(path, key)}: expected (absent), got {show(act[key])}")
                if len(out) >= limit:
                    return
        return
    if te == "array":
        for i, (e, a) in enumerate(zip(exp, act)):
            _walk(e, a, f"{path}[{i}]", out, limit)
            if len(out) >= limit:
                return
        if len(exp) != len(act):
            out.append(f"{where}: expected {len(exp)} elements, got {len(act)}"
                       + (f" (first extra: {show(act[len(exp)])})" if len(act) > len(exp) else
                          f" (first missing: {show(exp[len(act)])})"))
        return
    if exp != act:
        out.append(f"{where}: expected {show(exp)}, got {show(act)}")
