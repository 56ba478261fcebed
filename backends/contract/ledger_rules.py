"""Single-item rules for schema-version-1 ledger items (ledger-item.md §2, §4.3).

``item_issues(front, path)`` takes front matter as plain data (what
``ledger_yaml.load_front_matter`` returns, or a hand-built dict) and returns
the sorted, de-duplicated issue list; empty means single-item valid. Every
code and message is the reference's, with one local addition (see
``UNCHECKED_SCHEMA``). Ledger-wide rules (§5) are out of scope.

Value conventions follow the reference's JavaScript: numbers are doubles
(``int`` is accepted too and converted), ``bool`` is never a number, "string"
means ``str``, a mapping is a ``dict`` or a ``YamlObject`` (no members), a
sequence is a ``list``/``tuple``.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import date, timedelta
from typing import Any, Iterable

from backends.contract.ledger_yaml import YamlObject
from backends.contract.values import ITEM_ID_RE

ID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
REQUIRED_FIELDS = ("schema_version", "id", "title", "kind", "status", "created", "updated",
                   "provenance", "depends_on")
KINDS = ("task", "epic")
NON_TERMINAL_STATUSES = ("triage", "backlog", "in-progress")
#: status -> (terminal date field, required decision action); ``deferred`` is code-only (§2.6).
TERMINAL = {"done": ("completed", "complete"), "killed": ("killed", "kill"),
            "archived": ("archived", "archive"), "deferred": ("deferred", "defer")}
TERMINAL_FIELDS = ("completed", "killed", "archived", "deferred")
STATUSES = NON_TERMINAL_STATUSES + tuple(TERMINAL)
ACTIONS = ("accept", "complete", "kill", "archive", "restore", "replace-dependency",
           "waive-dependency", "reparent", "record", "resolve", "defer", "undefer")
DECISION_MEMBERS = ("action", "date", "summary", "rationale")
MAX_SAFE_INTEGER = 2**53 - 1
#: First instant whose UTC date has five digits: no ``created`` can match it.
_YEAR_10000_MS = 253_402_300_800_000

#: Local code (not the reference's): schema 2 rules differ and are not
#: implemented, so a schema-2 candidate is refused rather than guessed at.
UNCHECKED_SCHEMA = ("unchecked-schema-version",
                    "Only schema version 1 items are checked; schema_version 2 is refused.")

_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_INSTANT = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?Z")
#: JavaScript ``String.prototype.trim`` whitespace (differs from ``str.strip``).
JS_WHITESPACE = ("\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                 "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")
_MISSING = object()


# ---------------------------------------------------------------- value domains

def is_canonical_id(value: Any) -> bool:
    return isinstance(value, str) and ITEM_ID_RE.fullmatch(value) is not None


def is_calendar_date(value: Any) -> bool:
    """``YYYY-MM-DD`` with a real month/day; year 0000 is a leap year (no ``datetime``)."""
    return isinstance(value, str) and _is_calendar_date(value)


@functools.lru_cache(maxsize=4096)  # a history's candidates repeat a few dates thousands of times
def _is_calendar_date(value: str) -> bool:
    match = _DATE.fullmatch(value)
    if match is None:
        return False
    year, month, day = (int(part) for part in match.groups())
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    return 1 <= day <= days


def is_rfc3339_utc(value: Any) -> bool:
    match = _INSTANT.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return False
    day, hour, minute, second = match.groups()
    return is_calendar_date(day) and int(hour) <= 23 and int(minute) <= 59 and int(second) <= 59


def is_non_empty_string(value: Any) -> bool:
    return isinstance(value, str) and value.strip(JS_WHITESPACE) != ""


def _as_double(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def is_integer_number(value: Any) -> bool:
    x = _as_double(value)
    return x is not None and math.isfinite(x) and x.is_integer()


def is_safe_integer(value: Any, minimum: int) -> bool:
    return is_integer_number(value) and minimum <= float(value) <= MAX_SAFE_INTEGER


def is_mapping(value: Any) -> bool:
    return isinstance(value, (dict, YamlObject))


def is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _members(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def id_created_date(item_id: str) -> str | None:
    """The UTC date encoded by a canonical ID (§3), or None past 9999-12-31."""
    ms = 0
    for ch in item_id[3:13]:
        ms = ms * 32 + ID_ALPHABET.index(ch)
    if ms >= _YEAR_10000_MS:
        return None
    return (date(1970, 1, 1) + timedelta(days=ms // 86_400_000)).isoformat()


def issue_sort_key(issue: dict) -> tuple:
    """Ascending by path, field, code, message, compared in UTF-16 code units."""
    return tuple(issue[k].encode("utf-16-be", "surrogatepass")
                 for k in ("path", "field", "code", "message"))


def sorted_issues(issues: Iterable[dict]) -> list[dict]:
    unique = {(i["path"], i["field"], i["code"], i["message"]): i for i in issues}
    return sorted(unique.values(), key=issue_sort_key)


def _repeated(refs: list[str]) -> list[str]:
    seen: set[str] = set()
    return [ref for ref in refs if ref in seen or seen.add(ref)]


# ---------------------------------------------------------------- the rules

class _Checker:
    """Collects the issues of one item; one method per group of §4.3 rows."""

    def __init__(self, front: dict, path: str) -> None:
        self.front, self.path = front, path
        self.issues: list[dict] = []
        self.version = "1"
        item_id = front.get("id")
        self.id = item_id if is_canonical_id(item_id) else None
        self.id_text = self.id or "without a valid ID"
        status, kind = front.get("status"), front.get("kind")
        self.status = status if isinstance(status, str) and status in STATUSES else None
        self.kind = kind if isinstance(kind, str) and kind in KINDS else None
        decisions = front.get("decisions")
        self.decisions = list(decisions) if is_sequence(decisions) else []

    def add(self, field: str, code: str, message: str) -> None:
        self.issues.append({"path": self.path, "field": field, "code": code, "message": message})

    def get(self, key: str) -> Any:
        return self.front.get(key, _MISSING)

    def run(self) -> list[dict]:
        if not self.schema_version():
            return sorted_issues(self.issues)
        for check in (self.required, self.scalars, self.dates, self.provenance, self.relations,
                      self.numbers, self.decision_entries, self.terminal, self.cross_field,
                      self.rollups):
            check()
        return sorted_issues(self.issues)

    def schema_version(self) -> bool:
        """False when the item is schema 2 (refused locally, nothing else checked)."""
        value = self.get("schema_version")
        if value is _MISSING:
            self.version = "1 or 2"
        elif not is_integer_number(value):
            self.version = "1 or 2"
            self.add("schema_version", "invalid-schema-version", "schema_version must be the integer 1 or 2.")
        elif float(value) not in (1.0, 2.0):
            self.version = "1 or 2"
            self.add("schema_version", "unsupported-schema-version", "schema_version must be 1 or 2.")
        elif float(value) == 2.0:
            self.add("schema_version", *UNCHECKED_SCHEMA)
            return False
        return True

    def required(self) -> None:
        for field in REQUIRED_FIELDS:
            if field not in self.front:
                self.add(field, "missing-required-field", f"Field {field} is required.")

    def scalars(self) -> None:
        if "id" in self.front and self.id is None:
            self.add("id", "invalid-id", "ID must use the canonical wb_ ULID form.")
        if "title" in self.front and not is_non_empty_string(self.front["title"]):
            self.add("title", "invalid-field-type", "Field title must be a non-empty string.")
        v = self.version
        for field, allowed, word, plural in (("kind", KINDS, "Kind", "kinds"),
                                             ("status", STATUSES, "Status", "statuses")):
            value = self.get(field)
            if value is _MISSING:
                continue
            if not isinstance(value, str):
                self.add(field, "invalid-field-type", f"Field {field} must be a string.")
            elif value not in allowed:
                self.add(field, f"unknown-{field}",
                         f"{word} {value} is not one of the schema version {v} {plural}.")
        parent = self.get("parent")
        if parent is not _MISSING and not is_canonical_id(parent):
            self.add("parent", "invalid-parent-reference", "Field parent must be a canonical item ID.")

    def dates(self) -> None:
        for field in ("created", "updated", "snoozed_until") + TERMINAL_FIELDS:
            if field in self.front and not is_calendar_date(self.front[field]):
                self.add(field, "invalid-date", f"Field {field} must be an ISO calendar date.")

    def provenance(self) -> None:
        value = self.get("provenance")
        if value is _MISSING:
            return
        if not is_mapping(value):
            self.add("provenance", "invalid-field-type", "Field provenance must be a mapping.")
            return
        members = _members(value)
        for member in ("source", "recorded_at"):
            if member not in members:
                self.add(f"provenance.{member}", "missing-required-field",
                         f"Field provenance.{member} is required.")
        if "source" in members and not is_non_empty_string(members["source"]):
            self.add("provenance.source", "invalid-field-type",
                     "Field provenance.source must be a non-empty string.")
        if "recorded_at" in members and not is_rfc3339_utc(members["recorded_at"]):
            self.add("provenance.recorded_at", "invalid-rfc3339-utc",
                     "Field provenance.recorded_at must be an RFC 3339 UTC instant.")

    def _refs(self, field: str) -> list[str]:
        """Shape-check a relation list; return its canonical entries (§2.4 rule 7)."""
        value = self.get(field)
        if value is _MISSING:
            return []
        if not is_sequence(value):
            self.add(field, "invalid-field-type", f"Field {field} must be a YAML sequence.")
            return []
        for index, entry in enumerate(value):
            if not is_canonical_id(entry):
                self.add(f"{field}[{index}]", "invalid-relation-reference",
                         f"Field {field} entries must be canonical item IDs.")
        return [entry for entry in value if is_canonical_id(entry)]

    def relations(self) -> None:
        depends, related = self._refs("depends_on"), self._refs("related")
        for field, refs in (("depends_on", depends), ("related", related)):
            for ref in _repeated(refs):
                self.add(field, "duplicate-reference", f"Field {field} must not repeat reference {ref}.")
        for ref in depends:
            if ref in related:
                self.add("depends_on", "relation-overlap",
                         f"Reference {ref} must not appear in both depends_on and related.")
        if self.id is not None:
            if self.id in depends:
                self.add("depends_on", "self-dependency", f"Dependency {self.id} must not reference the item itself.")
            if self.id in related:
                self.add("related", "self-related", f"Related item {self.id} must not reference the item itself.")
            if self.get("parent") == self.id:
                self.add("parent", "self-parent", f"Parent {self.id} must not reference the item itself.")

    def numbers(self) -> None:
        if "priority" in self.front and not is_safe_integer(self.front["priority"], 0):
            self.add("priority", "invalid-priority", "Field priority must be a non-negative integer.")
        if "number" in self.front and not is_safe_integer(self.front["number"], 1):
            self.add("number", "invalid-number", "Field number must be a positive integer.")

    def decision_entries(self) -> None:
        """Shape of ``decisions`` and each entry; records which are well-formed."""
        self.well_formed = [False] * len(self.decisions)
        if "decisions" in self.front and not is_sequence(self.front["decisions"]):
            self.add("decisions", "invalid-field-type", "Field decisions must be a YAML sequence.")
        for i, decision in enumerate(self.decisions):
            if not is_mapping(decision):
                self.add(f"decisions[{i}]", "invalid-decision", "Each decision must be a mapping.")
                continue
            members, ok = _members(decision), True
            for member in DECISION_MEMBERS:
                if member not in members:
                    self.add(f"decisions[{i}].{member}", "missing-decision-field", f"Each decision requires {member}.")
                    ok = False
            action = members.get("action", _MISSING)
            if action is not _MISSING and not (isinstance(action, str) and action in ACTIONS):
                self.add(f"decisions[{i}].action", "invalid-decision-action",
                         f"Decision action is not recognized by schema version {self.version}.")
                ok = False
            if "date" in members and not is_calendar_date(members["date"]):
                self.add(f"decisions[{i}].date", "invalid-date", "Decision date must be an ISO calendar date.")
                ok = False
            for member in ("summary", "rationale"):
                if member in members and not is_non_empty_string(members[member]):
                    self.add(f"decisions[{i}].{member}", "invalid-field-type",
                             f"Decision {member} must be a non-empty string.")
                    ok = False
            self.well_formed[i] = ok

    def matching_decision(self, action: str, day: str) -> int | None:
        """Index of the first well-formed decision with this action and date."""
        for i, decision in enumerate(self.decisions):
            members = _members(decision)
            if self.well_formed[i] and members.get("action") == action and members.get("date") == day:
                return i
        return None

    def terminal(self) -> None:
        status = self.status
        if status is None:
            return
        if status not in TERMINAL:
            for field in TERMINAL_FIELDS:
                if field in self.front:
                    self.add(field, "terminal-date-not-allowed",
                             f"Status {status} forbids completed, killed, archived, and deferred.")
            return
        own, action = TERMINAL[status]
        for field in TERMINAL_FIELDS:
            if field != own and field in self.front:
                self.add(field, "terminal-date-conflict", f"Status {status} forbids {field}.")
        if own not in self.front:
            others = " and ".join(f for f in TERMINAL_FIELDS if f != own)
            self.add(own, "missing-terminal-date", f"Status {status} requires {own} and forbids {others}.")
            return
        day = self.front[own]
        if not is_calendar_date(day):
            return  # invalid-date was reported by dates(); the rest needs a valid date
        updated = self.get("updated")
        if is_calendar_date(updated) and updated != day:
            self.add(own, "terminal-date-must-match-updated", f"Field {own} must equal updated for status {status}.")
        if self.matching_decision(action, day) is None:
            self.add("decisions", "missing-matching-terminal-decision",
                     f"Status {status} requires an action {action} decision dated {day}.")

    def cross_field(self) -> None:
        created, updated = self.get("created"), self.get("updated")
        if is_calendar_date(created) and is_calendar_date(updated) and updated < created:
            self.add("updated", "updated-before-created", "Field updated must not be earlier than created.")
        if self.id is not None and is_calendar_date(created) and id_created_date(self.id) != created:
            self.add("created", "id-created-date-mismatch",
                     f"Field created must equal the UTC calendar date encoded by ID {self.id}.")
        depends = self.get("depends_on")
        if self.status == "done" and is_sequence(depends) and len(depends) > 0:
            self.add("depends_on", "done-item-has-dependencies",
                     f"Done item {self.id_text} must have an empty depends_on list; resolve or "
                     "explicitly disposition every dependency before completion.")
        if self.kind == "epic" and self.status == "in-progress":
            self.add("status", "epic-in-progress-not-allowed", "An epic must not use the in-progress status.")

    def rollups(self) -> None:
        """Rules 2.4.8 and 2.4.9."""
        done_epic = self.kind == "epic" and self.status == "done"
        completed = self.get("completed")
        completed_valid = is_calendar_date(completed)
        matching = self.matching_decision("complete", completed) if done_epic and completed_valid else None
        for i, decision in enumerate(self.decisions):
            members = _members(decision)
            if "rollup" not in members or i == matching:
                continue
            if done_epic and not completed_valid and members.get("action") == "complete":
                continue  # the exemption of rule 2.4.8
            self.add(f"decisions[{i}].rollup", "rollup-not-allowed",
                     "rollup is allowed only on the matching complete decision of a done epic.")
        if matching is not None:
            members = _members(self.decisions[matching])
            if "rollup" not in members:
                self.add("decisions", "missing-epic-rollup",
                         f"Done epic {self.id_text} requires rollup evidence on its matching complete decision.")
            elif not is_sequence(members["rollup"]):
                self.add(f"decisions[{matching}].rollup", "invalid-epic-rollup", "Epic rollup must be a YAML sequence.")


def item_issues(front: dict, path: str) -> list[dict]:
    """Every single-item issue of one parsed item, sorted and de-duplicated (§4.1)."""
    return _Checker(front, path).run()
