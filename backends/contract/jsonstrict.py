"""Strict JSON in, canonical or compact JSON out.

The contract accepts only UTF-8 JSON with one top-level value, no duplicate
member at any depth and no ``NaN``/``Infinity`` (contract §5). Python's
``json`` module accepts all of those by default, so ``loads_strict`` installs
hooks that refuse them and reports where the first problem is, as a JSON
pointer (RFC 6901).

``canonical_json`` is the digest form of vectors.md §10 (sorted keys, no
whitespace, raw UTF-8). ``compact_json`` is the CLI's stdout form (key order
kept, no whitespace).
"""

from __future__ import annotations

import json
from typing import Any


class StrictJSONError(ValueError):
    """The bytes are not strict unique-key UTF-8 JSON.

    ``pointer`` is the JSON pointer of the first offending place ("" for the
    document as a whole).
    """

    def __init__(self, message: str, pointer: str = ""):
        super().__init__(message)
        self.message = message
        self.pointer = pointer


def escape_pointer_token(token: str) -> str:
    """Escape one JSON-pointer reference token (RFC 6901 §3)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer_join(parts: list[str | int]) -> str:
    return "".join("/" + escape_pointer_token(str(p)) for p in parts)


_MISSING = object()


def pointer_get(doc, pointer: str, default=_MISSING):
    """The value at an RFC 6901 pointer into objects (``KeyError`` when absent
    and no ``default`` is given)."""
    node = doc
    for token in pointer.lstrip("/").split("/") if pointer else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or token not in node:
            if default is _MISSING:
                raise KeyError(pointer)
            return default
        node = node[token]
    return node


class _Duplicate(Exception):
    def __init__(self, key: str, pairs: list):
        self.key = key
        self.pairs = pairs


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key, pairs)
        seen[key] = value
    return seen


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not JSON")


def _find_path(root: Any, target: Any, path: list) -> list | None:
    """Locate ``target`` (by identity) inside already-built containers."""
    if root is target:
        return path
    if isinstance(root, dict):
        for k, v in root.items():
            found = _find_path(v, target, path + [k])
            if found is not None:
                return found
    elif isinstance(root, list):
        for i, v in enumerate(root):
            found = _find_path(v, target, path + [i])
            if found is not None:
                return found
    return None


def loads_strict(raw: bytes) -> Any:
    """Parse ``raw`` as strict JSON or raise ``StrictJSONError``.

    Refuses: invalid UTF-8 (including a BOM-less surrogate), a byte-order mark,
    duplicate members at any depth, ``NaN``/``Infinity``, trailing data after
    the one top-level value, and empty input.
    """
    if isinstance(raw, str):
        raise TypeError("loads_strict takes bytes")
    try:
        text = bytes(raw).decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"invalid UTF-8 at byte {exc.start}") from None
    if text.startswith("\ufeff"):
        raise StrictJSONError("a byte-order mark is not allowed")
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    try:
        value, end = decoder.raw_decode(text, _skip_ws(text, 0))
    except _Duplicate as dup:
        raise StrictJSONError(f"duplicate member {dup.key!r}", _duplicate_pointer(text, dup)) from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise StrictJSONError(f"not JSON: {exc}") from None
    except RecursionError:
        raise StrictJSONError("JSON nesting is too deep") from None
    if _skip_ws(text, end) != len(text):
        raise StrictJSONError("trailing data after the JSON value")
    return value


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _duplicate_pointer(text: str, dup: _Duplicate) -> str:
    """Pointer of a duplicate member: re-parse without the hook keeping
    containers, then find the object that holds the duplicated pairs."""
    holder: dict[int, list] = {}

    def keep(pairs):
        obj = dict(pairs)
        holder[id(obj)] = pairs
        if pairs == dup.pairs:
            holder.setdefault("target", obj)  # type: ignore[call-overload]
        return obj

    try:
        root = json.JSONDecoder(object_pairs_hook=keep).raw_decode(text, _skip_ws(text, 0))[0]
    except ValueError:
        return "/" + escape_pointer_token(dup.key)
    target = holder.get("target")  # type: ignore[call-overload]
    path = _find_path(root, target, []) if target is not None else None
    return pointer_join((path or []) + [dup.key])


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(obj: Any) -> bytes:
    """Canonical UTF-8 JSON: sorted keys, no whitespace, non-ASCII raw (one
    encoder for every call: ``json.dumps`` would build one each time)."""
    return _CANONICAL.encode(obj).encode("utf-8")


def compact_json(obj: Any) -> bytes:
    """CLI stdout form: key order preserved, no whitespace, non-ASCII raw."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def loads_reply_line(raw: bytes) -> dict:
    """A CLI reply's stdout: exactly one strict JSON object followed by one LF
    (the contract's CLI convention). Raises ``ValueError`` saying what is wrong."""
    if not raw.endswith(b"\n") or raw.count(b"\n") != 1:
        raise ValueError("stdout is not one line ending in LF")
    try:
        value = loads_strict(raw[:-1])
    except StrictJSONError as e:
        raise ValueError(f"stdout is not strict JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError("stdout is not a JSON object")
    return value

