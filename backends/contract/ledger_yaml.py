"""Read a ledger item's front-matter text the way the reference does.

The reference (wowbagger alpha.2) parses front matter with the npm ``yaml``
2.x parser: YAML 1.2, core schema, unique keys, merge keys off, then
``toJS()``. ledger-item.md §1.5 is the normative description. This module
reproduces it on top of PyYAML's *event stream* (its scanner and parser
only; PyYAML's YAML 1.1 resolver, composer and constructor are not used):

* pass 1 (``_Composer``) builds a small node tree while streaming events,
  so the first problem in document order decides the reason: a duplicate
  key before a syntax error is ``duplicate-yaml-key``, the reverse is
  ``invalid-yaml``. Plain scalars resolve by the core-schema table only;
  every number becomes a float (an IEEE-754 double, as in JavaScript).
* pass 2 (``_ToJS``) converts the tree to plain data like ``toJS()``:
  aliases expand to the latest earlier anchor, the resource guard counts
  alias expansions (limit 100), and mapping keys become strings
  (numbers in JavaScript decimal form, ``true``/``false``, null -> ``""``).
  Its failures are ``invalid-yaml``; they rank after every pass-1 problem.

Results are ``dict`` (string keys), ``list``, ``str``, ``float``, ``bool``,
``None`` and ``YamlObject`` (what ``!!timestamp`` and ``!!set`` yield: not a
string, and a mapping with no members wherever a mapping is expected).

Known deviations (each refuses, as ``invalid-yaml``, something the reference
may accept; none accepts something the reference refuses, as far as known):

* lone CR, U+0085, U+2028, U+2029 and U+FEFF in the front matter, and the
  characters PyYAML's reader calls non-printable (C0 controls except tab
  and LF, DEL, C1 controls, U+FFFE/U+FFFF). A duplicate key *before* the
  first such character still gives ``duplicate-yaml-key``.
* any ``%YAML`` / ``%TAG`` directive (a ``%YAML 1.1`` would switch the
  reference to another schema);
* tags ``!!binary``, ``!!omap``, ``!!pairs``, ``!!merge`` (on any node); a
  ``!!set`` whose values are not all empty (even ``~``) or whose text
  contains ``#``;
* mapping keys that are collections, aliases of collections, or
  ``!!timestamp``/``!!set`` objects (the reference stringifies them);
* a recursive alias (an alias inside the node its anchor names);
* nesting deeper than ``MAX_DEPTH`` levels;
* PyYAML syntax stricter than YAML 1.2: a tab after ``key:``, an empty
  implicit key (``: x``), anchor names outside ``[0-9A-Za-z_-]``, ``?``
  inside flow plain scalars, simple keys longer than 1024 characters.
* reason codes only: an unresolvable alias ranks after every pass-1
  problem here (as in ``toJS``), so ``*x`` followed by a duplicate key gives
  ``duplicate-yaml-key``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import yaml
from yaml.events import (AliasEvent, DocumentStartEvent, MappingEndEvent, MappingStartEvent,
                         ScalarEvent, SequenceEndEvent, SequenceStartEvent, StreamEndEvent)

INVALID_YAML = "invalid-yaml"
DUPLICATE_KEY = "duplicate-yaml-key"

#: Alias-expansion guard of the reference (``maxAliasCount``).
MAX_ALIAS_COUNT = 100
#: Deeper nesting is refused (a documented deviation): keeps pass 2 far from
#: Python's recursion limit.
MAX_DEPTH = 200

_YAML_TAG = "tag:yaml.org,2002:"

# Characters refused before parsing: lone CR (CRLF was already removed by the
# framing), NEL/LS/PS/BOM (line breaks or stream markers to PyYAML, ordinary
# characters to the reference) and PyYAML's non-printables.
_REFUSED_CHAR = re.compile(
    "[^\t\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_DOC_END_LINE = re.compile(r"\.\.\.(?=[ \t]|$)")
_BLANK_OR_COMMENT = re.compile(r"[ \t]*(?:#.*)?")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")

# Core-schema patterns (ledger-item.md §1.5 table). fullmatch only.
_NULL = re.compile(r"(?:~|null|Null|NULL)?")
_TRUE = re.compile(r"true|True|TRUE")
_FALSE = re.compile(r"false|False|FALSE")
_INT_OCT = re.compile(r"0o[0-7]+")
_INT_DEC = re.compile(r"[-+]?[0-9]+")
_INT_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT_SPECIAL = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN")
_FLOAT_EXP = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)")
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:(?:t|T|[ \t]+)([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2}(\.[0-9]+)?)"
    r"(?:[ \t]*(Z|[-+][012]?[0-9](?::[0-9]{2})?))?)?")
_REFUSED_TAGS = {_YAML_TAG + name for name in ("binary", "omap", "pairs", "merge")}
#: The four core types in resolution order, one fullmatch for an untagged
#: plain scalar (the first alternative that matches names its type).
_CORE_TYPES = {"null": (_NULL,), "bool": (_TRUE, _FALSE), "int": (_INT_OCT, _INT_DEC, _INT_HEX),
               "float": (_FLOAT_SPECIAL, _FLOAT_EXP, _FLOAT)}
_CORE_PLAIN = re.compile("|".join(f"(?P<{kind}>{'|'.join(p.pattern for p in patterns)})"
                                  for kind, patterns in _CORE_TYPES.items()))

#: The reference event source: PyYAML's pure-Python scanner and parser.
PURE_EVENTS = yaml.SafeLoader
#: libyaml's parser behind the same event API (about 20x faster), when PyYAML
#: was built with it. Its events equal the reference's (plain style aside)
#: except on text ``_LIBYAML_DIFFERS`` finds, which goes to the reference.
C_EVENTS = yaml.CSafeLoader if yaml.__with_libyaml__ else None
# Where libyaml and PyYAML's pure parser disagree, found by diffing the two
# (tests/test_ledger_yaml_libyaml.py), each on any text that has the
# character: a tab (PyYAML refuses more of them), a tag (libyaml refuses flow
# indicators in tags), ``?`` (libyaml accepts it inside flow plain scalars),
# a block scalar header followed by ``#`` with no space (PyYAML refuses it),
# ``:`` right before a flow indicator (PyYAML reads ``{a:}`` as a key), a
# line that starts with ``%`` (libyaml refuses unknown directives), a
# ``\u`` escape of a surrogate (libyaml refuses it, the reference pairs them).
_LIBYAML_DIFFERS = re.compile(r"[\t!?]|[|>][-+0-9]*#|:[,\[\]{}]|^%|\\(?:u|U0000)[dD][89a-fA-F]",
                              re.MULTILINE)


class LedgerParseError(ValueError):
    """The item cannot be read; ``reason`` is the §4.2 parse code (or ``invalid-utf8``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class YamlObject:
    """A ``!!timestamp`` or ``!!set`` value: not a string, not a number, not a
    sequence; a mapping with no members wherever a mapping is expected."""

    __slots__ = ("tag",)

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __repr__(self) -> str:
        return f"YamlObject({self.tag!r})"


class _Refused(Exception):
    """Internal: stop with a reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


# ---------------------------------------------------------------- numbers

def _to_double(text: str, radix: int) -> float:
    """``parseInt``/``parseFloat`` of a matched core-schema literal."""
    if radix == 10:
        return float(text)  # correctly rounded; overflows to inf like JS
    try:
        return float(int(text[2:], radix))
    except OverflowError:
        return math.inf


def js_number_str(x: float) -> str:
    """JavaScript ``String(x)`` for a double (how a number key is named)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(x))).as_tuple()  # repr = shortest round-trip
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent += len(digit_tuple) - len(digits)
    k, n = len(digits), exponent + len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


# ---------------------------------------------------------------- scalars

def _join_surrogates(s: str) -> str:
    """JavaScript strings are UTF-16: an escaped surrogate pair is one character."""
    if not _SURROGATE.search(s):
        return s
    return _SURROGATE_PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + (ord(m[0][1]) - 0xDC00)), s)


def _typed(text: str, kind: str) -> tuple[bool, Any]:
    """Resolve ``text`` as one core type; ``(False, None)`` if it does not fit."""
    if kind == "null":
        return (True, None) if _NULL.fullmatch(text) else (False, None)
    if kind == "bool":
        if _TRUE.fullmatch(text):
            return True, True
        return (True, False) if _FALSE.fullmatch(text) else (False, None)
    if kind == "int":
        for pattern, radix in ((_INT_OCT, 8), (_INT_DEC, 10), (_INT_HEX, 16)):
            if pattern.fullmatch(text):
                return True, _to_double(text, radix)
        return False, None
    if kind == "float":
        if _FLOAT_SPECIAL.fullmatch(text):
            if text.endswith(("nan", "NaN", "NAN")):
                return True, math.nan
            return True, -math.inf if text.startswith("-") else math.inf
        if _FLOAT_EXP.fullmatch(text) or _FLOAT.fullmatch(text):
            return True, float(text)
    return False, None


#: the first characters of every core-schema null, bool, int and float literal (or it is empty)
_CORE_START = frozenset("~nNtTfF0123456789+-.")


def _resolve_scalar(value: str, tag: str | None, style: str | None) -> Any:
    text = value if value.isascii() else _join_surrogates(value)  # a surrogate is never ASCII
    if tag is None:
        if style is not None:  # quoted or block: always a string
            return text
        if text and text[0] not in _CORE_START:
            return text  # no core type can match: the one fullmatch below would fail
        core = _CORE_PLAIN.fullmatch(text)
        return text if core is None else _typed(text, core.lastgroup)[1]
    if tag in _REFUSED_TAGS:
        raise _Refused(INVALID_YAML)  # deviation: see module docstring
    if tag == _YAML_TAG + "timestamp":
        if not _TIMESTAMP.fullmatch(text):
            raise _Refused(INVALID_YAML)  # the reference's resolve throws: an error
        return YamlObject("timestamp")
    if tag.startswith(_YAML_TAG) and tag[len(_YAML_TAG):] in ("null", "bool", "int", "float"):
        fits, value = _typed(text, tag[len(_YAML_TAG):])
        return value if fits else text  # a misfit is only a warning: stays a string
    return text  # !!str, the non-specific "!", unknown tags (a warning)


def _key_identity(node: Any) -> tuple | None:
    """What makes two keys clash (strict equality of resolved scalars); None never clashes."""
    if not isinstance(node, _Scalar):
        return None
    value = node.value
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, float):
        return None if math.isnan(value) else ("n", value)
    if isinstance(value, str):
        return ("s", value)
    return ("z",) if value is None else None


# ---------------------------------------------------------------- pass 1

class _Scalar:
    __slots__ = ("value", "anchor", "empty")

    def __init__(self, value: Any, anchor: str | None, empty: bool) -> None:
        self.value, self.anchor, self.empty = value, anchor, empty


class _Seq:
    __slots__ = ("items", "anchor")

    def __init__(self, anchor: str | None) -> None:
        self.items: list = []
        self.anchor = anchor


class _Map:
    __slots__ = ("pairs", "anchor", "is_set", "start", "key", "seen")

    def __init__(self, anchor: str | None, is_set: bool, start: int) -> None:
        self.pairs: list = []
        self.anchor, self.is_set, self.start = anchor, is_set, start
        self.key: Any = None
        self.seen: set = set()


class _Alias:
    __slots__ = ("target",)

    def __init__(self, target: Any) -> None:
        self.target = target  # None: unresolved or recursive (a pass-2 failure)


_NO_KEY = object()


def _first_offence(text: str) -> int | None:
    """Offset of the first refused character or misplaced thing after ``...``."""
    found = _REFUSED_CHAR.search(text)
    limit = found.start() if found else None
    pos, ended = 0, False
    for line in text.split("\n"):
        if limit is not None and pos >= limit:
            break
        if ended and not _BLANK_OR_COMMENT.fullmatch(line):
            return pos
        if not ended and _DOC_END_LINE.match(line):
            ended = True  # one `...` may end the document; then only blanks and comments
            if not _BLANK_OR_COMMENT.fullmatch(line[3:]):
                return pos + 3
        pos += len(line) + 1
    return limit


def _blank_leading_end_marker(text: str) -> str:
    """A ``...`` before any content ends an empty document. PyYAML refuses a
    document end marker there, so it is blanked (the reference reads the
    empty document, then ``invalid-frontmatter-type``)."""
    pos = 0
    for line in text.split("\n"):
        if _DOC_END_LINE.match(line):
            return text[:pos] + "   " + text[pos + 3:]
        if not _BLANK_OR_COMMENT.fullmatch(line):
            return text
        pos += len(line) + 1
    return text


class _Composer:
    """Pass 1: events -> node tree, with the unique-key check in document order."""

    def __init__(self, text: str, limit: int | None) -> None:
        self.text = text
        self.limit = len(text) + 1 if limit is None else limit
        self.stack: list = []
        self.anchors: dict[str, Any] = {}
        self.root: Any = _NO_KEY

    def compose(self, events: type) -> Any:
        loader = events(self.text)
        try:
            documents = 0
            get_event, scalar = loader.get_event, self._scalar
            while True:
                try:
                    event = get_event()
                except (ValueError, OverflowError):  # PyYAML's chr() of an escape past U+10FFFF
                    raise _Refused(INVALID_YAML) from None
                if type(event) is ScalarEvent:  # most events
                    scalar(event)
                elif isinstance(event, StreamEndEvent):
                    break
                elif isinstance(event, DocumentStartEvent):
                    documents += 1
                    if documents > 1 or event.version is not None or event.tags:
                        raise _Refused(INVALID_YAML)
                else:
                    self._take(event)
        except yaml.YAMLError:
            raise _Refused(INVALID_YAML) from None
        finally:
            loader.dispose()
        if self.limit <= len(self.text):
            raise _Refused(INVALID_YAML)
        return None if self.root is _NO_KEY else self.root

    def _scalar(self, event: ScalarEvent) -> None:
        """``_take`` of a scalar, written out: a mapping value needs no key check."""
        anchor, value, tag = event.anchor, event.value, event.tag
        style = event.style or None  # libyaml's plain style is "", PyYAML's None
        node = _Scalar(_resolve_scalar(value, tag, style), anchor,
                       value == "" and style is None and tag is None and anchor is None)
        if anchor is not None:
            self.anchors[anchor] = node  # redefinition: later aliases see this one
        stack = self.stack
        top = stack[-1] if stack else None
        if type(top) is _Map and top.key is not None:
            top.pairs.append((top.key, node))
            top.key = None
        else:
            self._attach(node, event.start_mark.index)

    def _take(self, event: Any) -> None:
        anchor = getattr(event, "anchor", None)
        if isinstance(event, ScalarEvent):
            style = event.style or None  # libyaml's plain style is "", PyYAML's None
            empty = event.value == "" and style is None and event.tag is None and anchor is None
            node = _Scalar(_resolve_scalar(event.value, event.tag, style), anchor, empty)
            self._anchor(node)
            self._attach(node, event.start_mark.index)
        elif isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and any(open_node is target for open_node in self.stack):
                target = None  # recursive alias: refused (deviation)
            self._attach(_Alias(target), event.start_mark.index)
        elif isinstance(event, (SequenceStartEvent, MappingStartEvent)):
            if len(self.stack) >= MAX_DEPTH or event.tag in _REFUSED_TAGS:
                raise _Refused(INVALID_YAML)
            if isinstance(event, SequenceStartEvent):
                node: Any = _Seq(anchor)
            else:
                node = _Map(anchor, event.tag == _YAML_TAG + "set", event.start_mark.index)
            self._anchor(node)
            self.stack.append(node)
        elif isinstance(event, (SequenceEndEvent, MappingEndEvent)):
            node = self.stack.pop()
            if isinstance(node, _Map) and node.is_set:
                self._check_set(node, event.end_mark.index)
            self._attach(node, event.start_mark.index)

    def _anchor(self, node: Any) -> None:
        if node.anchor is not None:
            self.anchors[node.anchor] = node  # redefinition: later aliases see this one

    def _check_set(self, node: _Map, end: int) -> None:
        empty_values = all(isinstance(v, _Scalar) and v.empty for _, v in node.pairs)
        if not empty_values or "#" in self.text[node.start:end]:
            raise _Refused(INVALID_YAML)

    def _attach(self, node: Any, start: int) -> None:
        if not self.stack:
            self.root = node
            return
        top = self.stack[-1]
        if isinstance(top, _Seq):
            top.items.append(node)
        elif top.key is None:
            identity = _key_identity(node)
            if identity is not None:
                if identity in top.seen:
                    raise _Refused(DUPLICATE_KEY if start < self.limit else INVALID_YAML)
                top.seen.add(identity)
            top.key = node
        else:
            top.pairs.append((top.key, node))
            top.key = None


# ---------------------------------------------------------------- pass 2

class _ToJS:
    """Pass 2: node tree -> plain data, like ``toJS()`` with ``maxAliasCount``."""

    def __init__(self) -> None:
        self.anchors: dict[int, list] = {}  # id(node) -> [count, alias_count, result]

    def value(self, node: Any) -> Any:
        if isinstance(node, _Alias):
            return self._alias(node)
        if isinstance(node, _Scalar):
            result = node.value
        elif isinstance(node, _Seq):
            result = [self.value(item) for item in node.items]
        else:
            result = self._mapping(node)
        if node.anchor is not None:
            self.anchors[id(node)] = [1, 0, result]
        return result

    def _mapping(self, node: _Map) -> Any:
        out: dict[str, Any] = {}
        for key, value in node.pairs:
            name = _key_string(self.value(key))
            if node.is_set:
                continue  # a set keeps its keys only; its values are empty
            out[name] = self.value(value)
        return YamlObject("set") if node.is_set else out

    def _alias(self, node: _Alias) -> Any:
        if node.target is None:
            raise _Refused(INVALID_YAML)
        data = self.anchors.get(id(node.target))
        if data is None:
            raise _Refused(INVALID_YAML)
        data[0] += 1
        if data[1] == 0:
            data[1] = self._alias_count(node.target)
        if data[0] * data[1] > MAX_ALIAS_COUNT:
            raise _Refused(INVALID_YAML)  # "Excessive alias count"
        return data[2]

    def _alias_count(self, node: Any) -> int:
        if isinstance(node, _Alias):
            data = self.anchors.get(id(node.target)) if node.target is not None else None
            return data[0] * data[1] if data else 0
        if isinstance(node, _Seq):
            return max((self._alias_count(item) for item in node.items), default=0)
        if isinstance(node, _Map):
            return max((max(self._alias_count(k), self._alias_count(v)) for k, v in node.pairs),
                       default=0)
        return 1


def _key_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return js_number_str(value)
    raise _Refused(INVALID_YAML)  # collection or object key: deviation


# ---------------------------------------------------------------- entry point

def load_front_matter(text: str, events: type | None = None) -> Any:
    """Parse front-matter text (LF line breaks) to plain data.

    Returns the root value: ``None`` for an empty document, else a dict,
    list, scalar or ``YamlObject``. Raises ``LedgerParseError`` with
    ``invalid-yaml`` or ``duplicate-yaml-key``. ``events`` forces an event
    source (``PURE_EVENTS`` or ``C_EVENTS``); by default libyaml reads the
    text unless ``_LIBYAML_DIFFERS`` sends it to the reference.
    """
    limit = _first_offence(text)
    # Refused characters are replaced so the parse can still find a duplicate
    # key that comes before them; the result is refused either way.
    safe = text if limit is None else _REFUSED_CHAR.sub("\ufffd", text)
    safe = _blank_leading_end_marker(safe)
    try:
        if events is None:
            events = PURE_EVENTS if C_EVENTS is None or _LIBYAML_DIFFERS.search(safe) else C_EVENTS
        root = _Composer(safe, limit).compose(events)
        return None if root is None else _ToJS().value(root)
    except _Refused as refused:
        raise LedgerParseError(refused.reason) from None
