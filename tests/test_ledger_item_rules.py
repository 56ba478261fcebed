"""Single-item rules and messages (ledger-item.md §2, §4.1, §4.3)."""

from __future__ import annotations

import pytest

from backends.contract.ledger_rules import (id_created_date, is_calendar_date, is_non_empty_string,
                                            is_rfc3339_utc, item_issues, sorted_issues)
from backends.contract.ledger_yaml import YamlObject

PATH = "ledger/wb_01Q4843R2AN6VQ7XKD3MP8RT2W.md"
ID = "wb_01Q4843R2AN6VQ7XKD3MP8RT2W"
OTHER = "wb_01Q4843R2AN6VQ7XKD3MP8RT2X"
THIRD = "wb_01Q4843R2AN6VQ7XKD3MP8RT2Y"
DROP = object()


def base() -> dict:
    """§6.1, as parse_item returns it."""
    return {"schema_version": 1.0, "id": ID, "title": "Chart the fictional harbour approach", "kind": "task",
            "status": "in-progress", "created": "2030-01-11", "updated": "2030-01-11",
            "provenance": {"source": "generator/ledger-item", "recorded_at": "2030-01-11T09:15:30.250Z"},
            "depends_on": []}


def decision(action: str, date: str = "2030-01-12", **extra) -> dict:
    return {"action": action, "date": date, "summary": "S.", "rationale": "R.", **extra}


def done(**changes) -> dict:
    return {"status": "done", "updated": "2030-01-12", "completed": "2030-01-12",
            "decisions": [decision("complete")], **changes}


def issues(**changes) -> list[tuple[str, str, str]]:
    front = base()
    for key, value in changes.items():
        if value is DROP:
            front.pop(key, None)
        else:
            front[key] = value
    return [(i["field"], i["code"], i["message"]) for i in item_issues(front, PATH)]


def codes(**changes) -> set[tuple[str, str]]:
    return {(field, code) for field, code, _ in issues(**changes)}


def test_valid_items_have_no_issues():
    assert issues() == []
    assert issues(**done()) == []
    assert issues(related=[OTHER], priority=2.0, number=1.0, parent=OTHER, snoozed_until="2032-02-29",
                  decisions=[decision("record")], extension={"anything": [1, None]}) == []
    assert issues(schema_version=1) == []  # a Python int is the same number


@pytest.mark.parametrize("field", ["schema_version", "id", "title", "kind", "status", "created", "updated",
                                   "provenance", "depends_on"])
def test_missing_required_field(field):
    assert (field, "missing-required-field", f"Field {field} is required.") in issues(**{field: DROP})


@pytest.mark.parametrize("value, code", [
    ("1", "invalid-schema-version"), (True, "invalid-schema-version"), (1.5, "invalid-schema-version"),
    (None, "invalid-schema-version"), (float("inf"), "invalid-schema-version"), (3.0, "unsupported-schema-version"),
    (0.0, "unsupported-schema-version"),
])
def test_schema_version(value, code):
    found = issues(schema_version=value, kind="story")
    assert ("schema_version", code) in {(f, c) for f, c, _ in found}
    # with an invalid version the messages say "1 or 2"
    assert ("kind", "unknown-kind", "Kind story is not one of the schema version 1 or 2 kinds.") in found


def test_schema_version_two_is_refused_locally():
    assert codes(schema_version=2.0) == {("schema_version", "unchecked-schema-version")}


@pytest.mark.parametrize("value", ["wb_01q4843r2an6vq7xkd3mp8rt2w", "wb_81Q4843R2AN6VQ7XKD3MP8RT2W",
                                   "wb_01Q4843R2AN6VQ7XKD3MP8RTIW", ID + "\n", 1.0, None])
def test_invalid_id(value):
    assert ("id", "invalid-id", "ID must use the canonical wb_ ULID form.") in issues(id=value)


@pytest.mark.parametrize("value, ok", [
    ("x", True), (" x ", True), ("\x1cx", True), ("\x85", True), ("", False), (" \t\n", False),
    ("\u3000\ufeff\u2028\xa0", False), (1.0, False), (None, False), (["x"], False),
])
def test_title_is_a_js_trim_non_empty_string(value, ok):
    assert is_non_empty_string(value) is ok
    assert (("title", "invalid-field-type", "Field title must be a non-empty string.") in issues(title=value)) is not ok


def test_kind_and_status():
    assert issues(kind=1.0) == [("kind", "invalid-field-type", "Field kind must be a string.")]
    assert issues(kind="story") == [("kind", "unknown-kind", "Kind story is not one of the schema version 1 kinds.")]
    assert issues(status=None) == [("status", "invalid-field-type", "Field status must be a string.")]
    assert issues(status="Done") == [("status", "unknown-status",
                                      "Status Done is not one of the schema version 1 statuses.")]
    assert issues(kind="epic") == [("status", "epic-in-progress-not-allowed",
                                    "An epic must not use the in-progress status.")]
    assert issues(kind="epic", status="backlog") == []


@pytest.mark.parametrize("value, ok", [
    ("2030-01-11", True), ("2032-02-29", True), ("2000-02-29", True), ("0000-02-29", True),
    ("1900-02-29", False), ("2030-02-29", False), ("2030-13-01", False), ("2030-00-10", False),
    ("2030-04-31", False), ("2030-1-11", False), ("2030-01-11\n", False), ("٢٠٣٠-01-11", False),
    (YamlObject("timestamp"), False), (20300111.0, False),
])
def test_calendar_dates(value, ok):
    assert is_calendar_date(value) is ok
    assert (("snoozed_until", "invalid-date", "Field snoozed_until must be an ISO calendar date.")
            in issues(snoozed_until=value)) is not ok


@pytest.mark.parametrize("value, ok", [
    ("2030-01-11T09:15:30.250Z", True), ("2030-01-11T23:59:59Z", True), ("2030-01-11T09:15:30.123456789Z", True),
    ("2030-01-11T24:00:00Z", False), ("2030-01-11T09:60:00Z", False), ("2030-01-11T09:15:60Z", False),
    ("2030-01-11t09:15:30Z", False), ("2030-01-11T09:15:30z", False), ("2030-01-11T09:15:30+00:00", False),
    ("2030-02-30T09:15:30Z", False), ("2030-01-11T09:15:30.Z", False), ("2030-01-11 09:15:30Z", False),
])
def test_recorded_at(value, ok):
    assert is_rfc3339_utc(value) is ok
    prov = {"source": "s", "recorded_at": value}
    assert (("provenance.recorded_at", "invalid-rfc3339-utc",
             "Field provenance.recorded_at must be an RFC 3339 UTC instant.") in issues(provenance=prov)) is not ok


def test_provenance():
    assert issues(provenance="x") == [("provenance", "invalid-field-type", "Field provenance must be a mapping.")]
    assert codes(provenance=None) == {("provenance", "invalid-field-type")}
    assert codes(provenance=[]) == {("provenance", "invalid-field-type")}
    missing = {("provenance.recorded_at", "missing-required-field"), ("provenance.source", "missing-required-field")}
    assert codes(provenance={}) == missing
    assert codes(provenance=YamlObject("set")) == missing  # `provenance: !!set {}`
    assert issues(provenance={"source": " ", "recorded_at": "2030-01-11T00:00:00Z", "extra": None}) == [
        ("provenance.source", "invalid-field-type", "Field provenance.source must be a non-empty string.")]


def test_relations():
    assert issues(depends_on=None) == [("depends_on", "invalid-field-type", "Field depends_on must be a YAML sequence.")]
    assert codes(related="x") == {("related", "invalid-field-type")}
    assert issues(related=[OTHER, "x", ID.lower()]) == [
        ("related[1]", "invalid-relation-reference", "Field related entries must be canonical item IDs."),
        ("related[2]", "invalid-relation-reference", "Field related entries must be canonical item IDs.")]
    assert issues(depends_on=[OTHER, OTHER, OTHER, THIRD, THIRD]) == [
        ("depends_on", "duplicate-reference", f"Field depends_on must not repeat reference {OTHER}."),
        ("depends_on", "duplicate-reference", f"Field depends_on must not repeat reference {THIRD}.")]
    assert issues(depends_on=[OTHER], related=[OTHER]) == [
        ("depends_on", "relation-overlap", f"Reference {OTHER} must not appear in both depends_on and related.")]
    assert issues(depends_on=[ID], related=[ID], parent=ID) == [
        ("depends_on", "relation-overlap", f"Reference {ID} must not appear in both depends_on and related."),
        ("depends_on", "self-dependency", f"Dependency {ID} must not reference the item itself."),
        ("parent", "self-parent", f"Parent {ID} must not reference the item itself."),
        ("related", "self-related", f"Related item {ID} must not reference the item itself.")]
    # no self-reference checks without a valid id
    assert codes(id="bad", depends_on=[ID]) == {("id", "invalid-id")}
    assert issues(parent="x") == [("parent", "invalid-parent-reference", "Field parent must be a canonical item ID.")]
    assert codes(parent=None) == {("parent", "invalid-parent-reference")}


@pytest.mark.parametrize("field, value, ok", [
    ("priority", 0.0, True), ("priority", -0.0, True), ("priority", 2.0**53 - 1, True), ("priority", 2.0**53, False),
    ("priority", -1.0, False), ("priority", 1.5, False), ("priority", True, False), ("priority", "1", False),
    ("priority", None, False), ("number", 1.0, True), ("number", 0.0, False), ("number", float("nan"), False),
])
def test_priority_and_number(field, value, ok):
    code = {"priority": ("invalid-priority", "Field priority must be a non-negative integer."),
            "number": ("invalid-number", "Field number must be a positive integer.")}[field]
    assert issues(**{field: value}) == ([] if ok else [(field, *code)])


def test_dates_and_cross_field_rules():
    assert issues(updated="2030-01-10") == [("updated", "updated-before-created",
                                             "Field updated must not be earlier than created.")]
    assert issues(created="2030-01-12", updated="2030-01-12") == [
        ("created", "id-created-date-mismatch",
         f"Field created must equal the UTC calendar date encoded by ID {ID}.")]
    assert codes(created="2030-01-32") == {("created", "invalid-date")}  # no ordering or ID check
    assert id_created_date(ID) == "2030-01-11"
    assert id_created_date("wb_7ZZZZZZZZZ" + "0" * 16) is None  # past year 9999


def test_terminal_dates_for_non_terminal_status():
    message = "Status in-progress forbids completed, killed, archived, and deferred."
    assert issues(completed="2030-01-11", killed="x") == [
        ("completed", "terminal-date-not-allowed", message),
        ("killed", "invalid-date", "Field killed must be an ISO calendar date."),
        ("killed", "terminal-date-not-allowed", message)]


def test_terminal_status_rules():
    assert issues(**done(completed=DROP)) == [
        ("completed", "missing-terminal-date",
         "Status done requires completed and forbids killed and archived and deferred.")]
    assert issues(status="killed", updated="2030-01-12", decisions=[decision("kill")]) == [
        ("killed", "missing-terminal-date",
         "Status killed requires killed and forbids completed and archived and deferred.")]
    assert issues(**done(completed="2030-01-13", decisions=[decision("complete", "2030-01-13")])) == [
        ("completed", "terminal-date-must-match-updated", "Field completed must equal updated for status done.")]
    assert issues(**done(killed="2030-01-12", deferred=None)) == [
        ("deferred", "invalid-date", "Field deferred must be an ISO calendar date."),
        ("deferred", "terminal-date-conflict", "Status done forbids deferred."),
        ("killed", "terminal-date-conflict", "Status done forbids killed.")]
    # invalid terminal date: only invalid-date, no decision check
    assert issues(**done(completed="2030-1-12", decisions=[])) == [
        ("completed", "invalid-date", "Field completed must be an ISO calendar date.")]
    # the decision must be well-formed, with the right action and date
    missing = ("decisions", "missing-matching-terminal-decision",
               "Status done requires an action complete decision dated 2030-01-12.")
    assert issues(**done(decisions=[decision("complete", "2030-01-11")])) == [missing]
    assert missing in issues(**done(decisions=[decision("complete", summary=" ")]))
    assert issues(**done(decisions=DROP)) == [missing]
    assert issues(status="deferred", updated="2030-01-12", deferred="2030-01-12", decisions=[decision("defer")]) == []
    assert issues(status="archived", updated="2030-01-12", archived="2030-01-12",
                  decisions=[decision("archive")]) == []


def test_done_item_has_dependencies():
    message = f"Done item {ID} must have an empty depends_on list; resolve or explicitly disposition every dependency before completion."
    assert issues(**done(depends_on=[OTHER])) == [("depends_on", "done-item-has-dependencies", message)]
    assert ("depends_on", "done-item-has-dependencies") in codes(**done(depends_on=["junk"], id="bad"))
    found = issues(**done(depends_on=[1.0], id=DROP))
    assert ("depends_on", "done-item-has-dependencies", message.replace(ID, "without a valid ID")) in found


def test_decision_entries():
    assert issues(decisions="x") == [("decisions", "invalid-field-type", "Field decisions must be a YAML sequence.")]
    assert issues(decisions=[None]) == [("decisions[0]", "invalid-decision", "Each decision must be a mapping.")]
    assert codes(decisions=[YamlObject("timestamp")]) == {
        (f"decisions[0].{m}", "missing-decision-field") for m in ("action", "date", "summary", "rationale")}
    assert issues(decisions=[{}])[0] == ("decisions[0].action", "missing-decision-field", "Each decision requires action.")
    assert issues(decisions=[decision("finish", "2030-1-1", summary="", rationale=1.0, extra=True)]) == [
        ("decisions[0].action", "invalid-decision-action", "Decision action is not recognized by schema version 1."),
        ("decisions[0].date", "invalid-date", "Decision date must be an ISO calendar date."),
        ("decisions[0].rationale", "invalid-field-type", "Decision rationale must be a non-empty string."),
        ("decisions[0].summary", "invalid-field-type", "Decision summary must be a non-empty string.")]
    assert codes(decisions=[decision("record")] * 11 + [decision(1.0)]) == {
        ("decisions[11].action", "invalid-decision-action")}


def test_epic_rollups():
    epic = done(kind="epic", decisions=[decision("complete", rollup=[])])
    assert issues(**epic) == []
    assert issues(**done(kind="epic")) == [
        ("decisions", "missing-epic-rollup", f"Done epic {ID} requires rollup evidence on its matching complete decision.")]
    assert issues(**done(kind="epic", decisions=[decision("complete", rollup={})])) == [
        ("decisions[0].rollup", "invalid-epic-rollup", "Epic rollup must be a YAML sequence.")]
    not_allowed = "rollup is allowed only on the matching complete decision of a done epic."
    # only the first matching decision may carry it
    two = done(kind="epic", decisions=[decision("complete", rollup=[]), decision("complete", rollup=[])])
    assert issues(**two) == [("decisions[1].rollup", "rollup-not-allowed", not_allowed)]
    assert issues(decisions=[decision("record", rollup=[])]) == [("decisions[0].rollup", "rollup-not-allowed", not_allowed)]
    assert codes(**done(decisions=[decision("complete", rollup=[])])) == {("decisions[0].rollup", "rollup-not-allowed")}
    # exemption: a done epic with an invalid completed does not flag complete decisions
    assert codes(**done(kind="epic", completed="x", decisions=[decision("complete", rollup=[])])) == {
        ("completed", "invalid-date")}
    # invalid kind or status: every rollup is flagged
    assert ("decisions[0].rollup", "rollup-not-allowed") in codes(**dict(epic, kind="Epic"))
    assert ("decisions[0].rollup", "rollup-not-allowed") in codes(**dict(epic, status="closed"))


def test_unknown_status_skips_terminal_checks():
    """§4.6 (c): a stale completed adds nothing when the status is unknown."""
    assert issues(status="paused", completed="2030-01-11") == [
        ("status", "unknown-status", "Status paused is not one of the schema version 1 statuses.")]


def test_timestamp_root_gives_nine_missing_fields():
    found = item_issues({}, PATH)
    assert [i["code"] for i in found] == ["missing-required-field"] * 9


def test_sort_order_and_dedup():
    raw = [{"path": "p", "field": f, "code": "c", "message": "m"}
           for f in ("decisions[2].date", "decisions[10].date", "provenance.source", "provenance",
                     "provenance.recorded_at", "decisions[2].date")]
    assert [i["field"] for i in sorted_issues(raw)] == [
        "decisions[10].date", "decisions[2].date", "provenance", "provenance.recorded_at", "provenance.source"]
    # UTF-16 code units: U+FF5E sorts before U+1F600 by code point, after it in UTF-16
    utf16 = sorted_issues([{"path": "p", "field": "f", "code": "c", "message": m} for m in ("\U0001F600", "\uff5e")])
    assert [i["message"] for i in utf16] == ["\U0001F600", "\uff5e"]
