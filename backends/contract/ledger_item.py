"""Schema-version-1 Wowbagger ledger items: read, check and write one item.

Normative text: ``shared/spec/ledger-item.md`` (pinned to wowbagger
v0.1.0-alpha.2). Three layers, one module each:

* this module: bytes -> front-matter text (UTF-8, BOM, ``---`` framing,
  §1.1-§1.4), the public API, and ``render_item`` (the canonical layout of
  §6.4);
* ``ledger_yaml``: front-matter text -> plain data, as the reference's YAML
  1.2 core-schema parser reads it (§1.5; its docstring lists the YAML
  deviations);
* ``ledger_rules``: plain data -> sorted single-item issues (§2, §4.3).

Public API::

    validate_candidate(candidate, item_id, display_path) -> None | dict | list[dict]
    parse_item(data) -> dict                 # raises LedgerParseError(reason)
    validate_item_file(data, display_path) -> list[dict]   # on-disk loader view
    render_item(fields, body) -> bytes

Known deviations (all refuse rather than accept):

* the YAML corners listed in ``ledger_yaml``;
* ``schema_version: 2`` is refused with the local issue
  ``unchecked-schema-version`` (schema 2 rules are not implemented);
* when ``schema_version`` is missing or invalid, the schema-1 kind, status
  and action sets are used (messages say "1 or 2" as the reference does);
* CRLF: the CR of every CRLF inside the front matter is treated as part of
  the line terminator (the reference's YAML parser reads CRLF as one break);
  a closing ``---`` followed by CR at end of file is not a delimiter;
* ledger-wide rules (§5) and the extension identity recheck (§2.5) are out
  of scope: a candidate this module accepts can still be refused by them.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from backends.contract.ledger_rules import (ACTIONS, KINDS, STATUSES, is_calendar_date, is_canonical_id,
                                            item_issues)
from backends.contract.ledger_yaml import LedgerParseError, YamlObject, load_front_matter

__all__ = ["LedgerParseError", "YamlObject", "MAX_CANDIDATE_BYTES", "validate_candidate", "parse_item",
           "split_item", "validate_item_file", "render_item", "item_issues", "PARSE_MESSAGES"]

#: ``publish-claimed`` refuses a larger decoded candidate before item validation (§1.6).
MAX_CANDIDATE_BYTES = 8_388_608

#: Parse-stage codes and their file-level messages (§4.2), in precedence order.
PARSE_MESSAGES = {
    "invalid-utf8": "Ledger items must be valid UTF-8.",
    "malformed-frontmatter": "Item must begin with one YAML frontmatter document delimited by --- lines.",
    "invalid-yaml": "Frontmatter contains invalid YAML.",
    "duplicate-yaml-key": "YAML mapping keys must be unique.",
    "invalid-frontmatter-type": "Frontmatter must be a YAML mapping.",
}


def split_item(data: bytes, *, drop_bom: bool = False) -> tuple[str, str]:
    """Split item bytes into (front-matter text, body text) per §1.1-§1.4.

    The front-matter text is the lines between the ``---`` delimiters, each
    without its LF or CRLF terminator, joined with LF. ``drop_bom`` is the
    on-disk loader's behaviour; ``publish-claimed`` keeps the BOM, so the
    first line is not ``---``. Raises ``LedgerParseError`` with
    ``invalid-utf8`` or ``malformed-frontmatter``.
    """
    try:
        text = bytes(data).decode("utf-8")  # strict: no overlongs, surrogates or truncation
    except UnicodeDecodeError:
        raise LedgerParseError("invalid-utf8") from None
    if drop_bom and text.startswith("\ufeff"):
        text = text[1:]
    lines, start = [], 0
    while start <= len(text):
        end = text.find("\n", start)
        has_lf = end != -1
        line = text[start:end] if has_lf else text[start:]
        if has_lf and line.endswith("\r"):
            line = line[:-1]
        if not lines and line != "---":
            break
        if lines and line == "---":
            return "\n".join(lines[1:]), text[end + 1:] if has_lf else ""
        lines.append(line)
        if not has_lf:
            break
        start = end + 1
    raise LedgerParseError("malformed-frontmatter")


def parse_item(data: bytes) -> dict:
    """Front matter of candidate bytes as plain data, the way ``publish-claimed`` reads it.

    Values are ``dict``/``list``/``str``/``float``/``bool``/``None`` (every
    number is a float, as in JavaScript), plus ``YamlObject`` for
    ``!!timestamp``/``!!set`` values; a root ``YamlObject`` is returned as
    ``{}`` (a mapping with no members). Raises ``LedgerParseError`` whose
    ``reason`` is ``invalid-utf8``, ``malformed-frontmatter``,
    ``invalid-yaml``, ``duplicate-yaml-key`` or ``invalid-frontmatter-type``.
    """
    return _parse(data, drop_bom=False)


def _parse(data: bytes, *, drop_bom: bool) -> dict:
    front_text, _ = split_item(data, drop_bom=drop_bom)
    root = load_front_matter(front_text)
    if isinstance(root, YamlObject):
        return {}
    if not isinstance(root, dict):
        raise LedgerParseError("invalid-frontmatter-type")
    return root


def validate_candidate(candidate: bytes, item_id: str, display_path: str) -> dict | list[dict] | None:
    """Single-item validation of a ``publish-claimed`` candidate (§4.5, §7 steps 2-5).

    Returns ``None`` when the candidate is a valid single item whose ``id`` is
    exactly ``item_id``; shape A ``{"item_id", "reason"}`` when it cannot be
    placed (a parse code, ``invalid-utf8``, or ``item-id-mismatch``); else
    shape B, the sorted de-duplicated issues ``{"path": display_path,
    "field", "code", "message"}``. The size limit (§1.6) and ledger-wide
    rules (§5) are the caller's.
    """
    try:
        front = parse_item(candidate)
    except LedgerParseError as error:
        return {"item_id": item_id, "reason": error.reason}
    found = front.get("id")
    if not (isinstance(found, str) and found == item_id):
        return {"item_id": item_id, "reason": "item-id-mismatch"}
    return item_issues(front, display_path) or None


def validate_item_file(data: bytes, display_path: str) -> list[dict]:
    """Issues of one item file as the on-disk loader sees it (one leading BOM
    dropped; bad UTF-8 is the ``encoding`` issue; a parse failure is one
    ``frontmatter`` issue). Empty means single-item valid."""
    try:
        front = _parse(data, drop_bom=True)
    except LedgerParseError as error:
        field = "encoding" if error.reason == "invalid-utf8" else "frontmatter"
        return [{"path": display_path, "field": field, "code": error.reason,
                 "message": PARSE_MESSAGES[error.reason]}]
    return item_issues(front, display_path)


# ---------------------------------------------------------------- rendering

#: Top-level keys in the order ``render_item`` writes them (that of §6 and
#: the work-claims fixtures); other keys follow in the caller's order.
FIELD_ORDER = ("schema_version", "id", "title", "kind", "status", "created", "updated", "completed",
               "killed", "archived", "deferred", "snoozed_until", "provenance", "depends_on", "related",
               "parent", "number", "priority", "decisions")
_MEMBER_ORDER = {"provenance": ("source", "recorded_at"),
                 "decisions": ("action", "date", "summary", "rationale", "rollup")}
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_CORE_WORDS = re.compile(r"~|null|Null|NULL|true|True|TRUE|false|False|FALSE")
_ENUM_WORDS = frozenset(KINDS + STATUSES + ACTIONS)
# Escaped in double-quoted text besides '"' and '\': controls, DEL, C1, the
# YAML 1.1 line breaks, BOM, non-characters, lone surrogates.
_NEEDS_ESCAPE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
#: Keys whose string values are free text: always double-quoted.
_FREE_TEXT = frozenset(("title", "summary", "rationale", "source", "recorded_at"))


def _quoted(text: str) -> str:
    """A YAML 1.2 double-quoted scalar with JSON-compatible escapes (§6.4)."""
    body = json.dumps(text, ensure_ascii=False)  # escapes '"', '\\' and C0 controls
    return _NEEDS_ESCAPE.sub(lambda m: f"\\u{ord(m[0]):04x}", body)


def _scalar(value: Any, plain_ok: bool) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        if value.is_integer() and abs(value) < 1e21:
            return ("-0" if math.copysign(1, value) < 0 and value == 0 else str(int(value)))
        return repr(value)
    if isinstance(value, str):
        return value if plain_ok and _plain_safe(value) else _quoted(value)
    raise TypeError(f"render_item cannot write a {type(value).__name__}")


def _plain_safe(text: str) -> bool:
    """Strings written unquoted, as in the fixtures: they resolve to strings
    in the YAML 1.2 core schema (a YAML 1.1 reader would see dates)."""
    return text in _ENUM_WORDS or is_canonical_id(text) or is_calendar_date(text)


def _key(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError("render_item keys must be strings")
    return name if _PLAIN_KEY.fullmatch(name) and not _CORE_WORDS.fullmatch(name) else _quoted(name)


def _ordered(mapping: dict, order: tuple[str, ...]) -> list[tuple[str, Any]]:
    known = [(k, mapping[k]) for k in order if k in mapping]
    return known + [(k, v) for k, v in mapping.items() if k not in order]


def _block(key: str, value: Any, indent: str, plain_ok: bool, order: tuple[str, ...] = ()) -> list[str]:
    """Lines for ``key: value`` at ``indent`` (two-space block style)."""
    head = f"{indent}{_key(key)}:"
    if isinstance(value, dict):
        if not value:
            return [head + " {}"]
        return [head] + [line for k, v in _ordered(value, order)
                         for line in _block(k, v, indent + "  ", plain_ok)]
    if isinstance(value, (list, tuple)):
        if not value:
            return [head + " []"]
        return [head] + _sequence(value, indent + "  ", plain_ok, _MEMBER_ORDER.get(key, ()))
    return [f"{head} {_scalar(value, plain_ok and key not in _FREE_TEXT)}"]


def _sequence(items: Any, indent: str, plain_ok: bool, order: tuple[str, ...]) -> list[str]:
    lines: list[str] = []
    for item in items:
        if isinstance(item, dict) and item:
            inner = [line for k, v in _ordered(item, order) for line in _block(k, v, indent + "  ", plain_ok)]
            lines.append(f"{indent}- {inner[0].lstrip()}")
            lines.extend(inner[1:])
        elif isinstance(item, (list, tuple)) and item:
            inner = _sequence(item, indent + "  ", plain_ok, ())
            lines.append(f"{indent}- {inner[0].lstrip()}")
            lines.extend(inner[1:])
        elif isinstance(item, (dict, list, tuple)):
            lines.append(f"{indent}- {'{}' if isinstance(item, dict) else '[]'}")
        else:
            lines.append(f"{indent}- {_scalar(item, plain_ok)}")
    return lines


def render_item(fields: dict, body: str | bytes = "") -> bytes:
    """Write an item in the canonical layout of ledger-item.md §6.4.

    ``fields`` is the front matter as plain data (the shape ``parse_item``
    returns; ``int`` or integer-valued ``float`` numbers). Known keys are
    written in ``FIELD_ORDER`` (the order of §6 and the fixtures), then any
    other keys in the caller's order. Layout: one ``key: value`` line per
    scalar; ``provenance``, ``decisions`` and other mappings as two-space
    block mappings/sequences; empty sequences as ``[]``; IDs, dates,
    RFC 3339 instants and enum words (kinds, statuses, actions) plain; every
    other string double-quoted with JSON-compatible escapes (control
    characters, DEL, C1, U+2028/U+2029, U+FEFF escaped as ``\\uXXXX``), so no
    value can re-type, break the YAML or form a ``---`` line.

    ``body`` is appended verbatim after the closing ``---`` LF; by
    convention it starts with a blank line, e.g. ``"\\nSome text.\\n"``.
    Output is LF-only UTF-8 without BOM. Invalid field values are written
    faithfully too (useful for negative tests); for a valid field set,
    ``validate_candidate(render_item(fields, body), fields["id"], path)`` is
    ``None``. Extension keys are written, but ``publish-claimed`` wants
    them byte-identical to the current revision (§2.5): copy those lines
    yourself if the current item has any.
    """
    lines = ["---"]
    for key, value in _ordered(fields, FIELD_ORDER):
        lines.extend(_block(key, value, "", True, _MEMBER_ORDER.get(key, ())))
    lines.append("---")
    tail = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    return ("\n".join(lines) + "\n").encode("utf-8") + tail
