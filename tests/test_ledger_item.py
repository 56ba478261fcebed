"""Candidate validation end to end: bytes framing, shapes A/B, §4.6 and §6
examples, the fixtures, and render_item (ledger-item.md)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from backends.contract.ledger_item import (LedgerParseError, parse_item, render_item, split_item,
                                           validate_candidate, validate_item_file)
from backends.contract.ledger_rules import (ACTIONS, ID_ALPHABET, JS_WHITESPACE, REQUIRED_FIELDS, TERMINAL,
                                            is_non_empty_string)

ID = "wb_01Q4843R2AN6VQ7XKD3MP8RT2W"
PATH = f"ledger/{ID}.md"
FIXTURES = Path("/work/shared/vectors/work-claims/ledger")
BODY = "\nSynthetic work item for publication tests.\n"

ITEM_61 = f"""---
schema_version: 1
id: {ID}
title: "Chart the fictional harbour approach"
kind: task
status: in-progress
created: 2030-01-11
updated: 2030-01-11
provenance:
  source: "generator/ledger-item"
  recorded_at: "2030-01-11T09:15:30.250Z"
depends_on: []
---
{BODY}"""

ITEM_62 = f"""---
schema_version: 1
id: {ID}
title: "Chart the fictional harbour approach"
kind: task
status: done
created: 2030-01-11
updated: 2030-01-12
completed: 2030-01-12
provenance:
  source: "generator/ledger-item"
  recorded_at: "2030-01-11T09:15:30.250Z"
depends_on: []
related: []
decisions:
  - action: complete
    date: 2030-01-12
    summary: "Complete the harbour chart."
    rationale: "The synthetic chart was drawn and checked."
---
{BODY}"""

ITEM_63 = f"""---
schema_version: 1
id: {ID}
title: "Chart the fictional harbour approach and its buoys"
kind: task
status: in-progress
created: 2030-01-11
updated: 2030-01-12
provenance:
  source: "generator/ledger-item"
  recorded_at: "2030-01-11T09:15:30.250Z"
depends_on: []
related: []
priority: 2
decisions:
  - action: record
    date: 2030-01-12
    summary: "Widen the scope to include buoys."
    rationale: "The approach cannot be charted safely without them."
---
{BODY}
Scope note: buoys added on 2030-01-12.
"""


def shape_a(reason: str) -> dict:
    return {"item_id": ID, "reason": reason}


def check(text: str | bytes):
    data = text.encode("utf-8") if isinstance(text, str) else text
    return validate_candidate(data, ID, PATH)


@pytest.mark.parametrize("text", [ITEM_61, ITEM_62, ITEM_63])
def test_section_6_items_are_valid_and_render_identically(text):
    assert check(text) is None
    assert render_item(parse_item(text.encode()), split_item(text.encode())[1]) == text.encode()


@pytest.mark.parametrize("name", ["before.md", "after.md"])
def test_fixture_items_are_valid(name):
    data = (FIXTURES / name).read_bytes()
    item_id = parse_item(data)["id"]
    assert validate_candidate(data, item_id, f"ledger/{item_id}.md") is None
    assert validate_item_file(data, "ledger/x.md") == []
    assert render_item(parse_item(data), split_item(data)[1]) == data


def test_example_a_not_front_matter():
    assert check("Hello, ledger!\n") == shape_a("malformed-frontmatter")
    assert validate_item_file(b"Hello, ledger!\n", PATH) == [{
        "path": PATH, "field": "frontmatter", "code": "malformed-frontmatter",
        "message": "Item must begin with one YAML frontmatter document delimited by --- lines."}]


@pytest.mark.parametrize("change", [
    lambda t: t.replace(ID, ID[:-1] + "X", 1), lambda t: t.replace(f"id: {ID}\n", ""),
    lambda t: t.replace(f"id: {ID}", f"id: {ID.lower()}"), lambda t: t.replace(f"id: {ID}", "id: 1"),
    lambda t: t.replace(f"id: {ID}", f"id: [{ID}]"),
])
def test_example_b_wrong_id(change):
    assert check(change(ITEM_62)) == shape_a("item-id-mismatch")


def test_example_c_invalid_status():
    assert check(ITEM_63.replace("status: in-progress", "status: paused")) == [{
        "path": PATH, "field": "status", "code": "unknown-status",
        "message": "Status paused is not one of the schema version 1 statuses."}]


def test_quoted_id_and_dates_are_fine():
    quoted = ITEM_61.replace(f"id: {ID}", f'id: "{ID}"').replace("created: 2030-01-11", "created: '2030-01-11'")
    assert check(quoted) is None


@pytest.mark.parametrize("text, reason", [
    ("", "malformed-frontmatter"), ("\n" + ITEM_61, "malformed-frontmatter"),
    (ITEM_61.replace("---", "--- ", 1), "malformed-frontmatter"), (ITEM_61.replace("---", "----", 1), "malformed-frontmatter"),
    ("---\nid: x\n", "malformed-frontmatter"), ("---\nid: x\n...\n", "malformed-frontmatter"),
    ("---\n---\n", "invalid-frontmatter-type"), ("---\n- a\n---\n", "invalid-frontmatter-type"),
    ("---\njust text\n---\n", "invalid-frontmatter-type"), ("---\n!!timestamp 2030-01-11\n---\n", "item-id-mismatch"),
    (ITEM_61.replace("kind: task", "kind: task\nkind: epic"), "duplicate-yaml-key"),
    (ITEM_61.replace("kind: task", "kind: [task"), "invalid-yaml"),
    (ITEM_61.replace("  source:", "  recorded_at: x\n  source:"), "duplicate-yaml-key"),
    (ITEM_61.replace("kind: task", "kind:\ttask"), "invalid-yaml"),
    (ITEM_61.replace("title:", "ti\rtle:"), "invalid-yaml"),
    (ITEM_61.replace("kind: task", "kind: task\n--- \nx: 1"), "invalid-yaml"),
])
def test_parse_stage_reasons(text, reason):
    assert check(text) == shape_a(reason)


def test_explicit_document_start_and_end_inside_front_matter():
    assert check(ITEM_61.replace("---\n", "---\n--- # explicit start\n", 1)) is None
    assert check(ITEM_61.replace("depends_on: []\n", "depends_on: []\n...\n# trailing comment\n")) is None
    assert check(ITEM_61.replace("depends_on: []\n", "depends_on: []\n...\n...\n")) == shape_a("invalid-yaml")


def test_body_is_not_parsed():
    assert check(ITEM_61 + "---\nkind: [\n\r\x00") is None
    assert check(ITEM_61.replace(BODY, "")) is None
    assert check(ITEM_61.replace("---\n" + BODY, "---")) is None  # ends with --- and no newline
    assert check(ITEM_61.replace("---\n" + BODY, "---\r")) == shape_a("malformed-frontmatter")


def test_bom():
    data = b"\xef\xbb\xbf" + ITEM_61.encode()
    assert check(data) == shape_a("malformed-frontmatter")
    assert validate_item_file(data, PATH) == []  # the on-disk loader drops one BOM
    assert validate_item_file(b"\xef\xbb\xbf" + data, PATH)[0]["code"] == "malformed-frontmatter"


@pytest.mark.parametrize("bad", [b"\xff", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80"])
def test_invalid_utf8_anywhere(bad):
    for data in (ITEM_61.encode() + bad, ITEM_61.encode().replace(b"harbour", b"harbour" + bad)):
        assert check(data) == shape_a("invalid-utf8")
        assert validate_item_file(data, PATH) == [{"path": PATH, "field": "encoding", "code": "invalid-utf8",
                                                  "message": "Ledger items must be valid UTF-8."}]
    with pytest.raises(LedgerParseError) as raised:
        parse_item(bad)
    assert raised.value.reason == "invalid-utf8"


def test_crlf():
    crlf = ITEM_62.replace("\n", "\r\n")
    assert check(crlf) is None
    assert parse_item(crlf.encode()) == parse_item(ITEM_62.encode())
    mixed = ITEM_62.replace("kind: task\n", "kind: task\r\n").replace("---\n\n", "---\r\n\n")
    assert check(mixed) is None
    assert check(ITEM_62.replace("kind: task\n", "kind: task\r\r\n")) == shape_a("invalid-yaml")


def test_shape_b_lists_every_issue_sorted():
    text = (ITEM_62.replace("status: done", "status: done\nkilled: 2030-01-12")
            .replace("depends_on: []", "depends_on: [wb_01Q4843R2AN6VQ7XKD3MP8RT2X, junk]")
            .replace("title: ", "title: ' '\nx-title: "))
    assert [(i["field"], i["code"]) for i in check(text)] == [
        ("depends_on", "done-item-has-dependencies"), ("depends_on[1]", "invalid-relation-reference"),
        ("killed", "terminal-date-conflict"), ("title", "invalid-field-type")]
    assert all(i["path"] == PATH and list(i) == ["path", "field", "code", "message"] for i in check(text))


def test_timestamp_and_set_in_items():
    assert [i["field"] for i in check(ITEM_61.replace("created: 2030-01-11", "created: !!timestamp 2030-01-11"))] == ["created"]
    prov = ITEM_61.replace('provenance:\n  source: "generator/ledger-item"\n  recorded_at: "2030-01-11T09:15:30.250Z"',
                           "provenance: !!set {}")
    assert [i["field"] for i in check(prov)] == ["provenance.recorded_at", "provenance.source"]
    assert [i["code"] for i in validate_item_file(b"---\n!!timestamp 2030-01-11\n---\n", PATH)] == \
        ["missing-required-field"] * 9


def test_render_escapes_hostile_text():
    fields = parse_item(ITEM_61.encode())
    fields["title"] = 'a "quoted" \\ title\n---\n\t\r\x00\x7f\x85\u2028\u2029\ufeff\U0001F600 #x: [y] & *z'
    fields["provenance"]["source"] = "true"
    data = render_item(fields, BODY)
    assert check(data) is None
    assert parse_item(data) == fields
    assert b"\r" not in data and not data.startswith(b"\xef\xbb\xbf")
    assert data.decode().split("\n").count("---") == 2


# ---------------------------------------------------------------- properties

def _day(n: int) -> str:
    return (date(1970, 1, 1) + timedelta(days=n)).isoformat()


def _encode_ms(ms: int) -> str:
    out = ""
    for _ in range(10):
        out, ms = ID_ALPHABET[ms % 32] + out, ms // 32
    return out


LAST_DAY = (date(9999, 12, 31) - date(1970, 1, 1)).days
TEXT = st.text(min_size=1, max_size=40).filter(is_non_empty_string)
OTHER_IDS = st.lists(st.text(ID_ALPHABET, min_size=16, max_size=16).map(lambda e: "wb_01Q4843R2A" + e),
                     max_size=4, unique=True)


@st.composite
def valid_fields(draw) -> dict:
    """Field sets that satisfy every single-item rule (§6.4 recipes)."""
    day = draw(st.integers(0, LAST_DAY))
    item_id = "wb_" + _encode_ms(day * 86_400_000 + draw(st.integers(0, 86_399_999))) + \
        draw(st.text(ID_ALPHABET, min_size=16, max_size=16))
    updated_day = min(LAST_DAY, day + draw(st.integers(0, 400)))
    kind = draw(st.sampled_from(["task", "epic"]))
    statuses = ["triage", "backlog", "done", "killed", "archived", "deferred"] + (["in-progress"] if kind == "task" else [])
    status = draw(st.sampled_from(statuses))
    updated = _day(updated_day)
    actions = [a for a in ACTIONS if not (kind == "epic" and a == "complete")]
    decision = st.fixed_dictionaries({"action": st.sampled_from(actions),
                                      "date": st.integers(0, LAST_DAY).map(_day), "summary": TEXT, "rationale": TEXT})
    fields: dict = {
        "schema_version": draw(st.sampled_from([1, 1.0])), "id": item_id, "title": draw(TEXT), "kind": kind,
        "status": status, "created": _day(day), "updated": updated,
        "provenance": {"source": draw(TEXT), "recorded_at": draw(st.sampled_from(
            ["2030-01-11T09:15:30.250Z", "1970-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"]))},
        "depends_on": [] if status == "done" else [i for i in draw(OTHER_IDS) if i != item_id],
        "decisions": draw(st.lists(decision, max_size=3)),
    }
    related = [i for i in draw(OTHER_IDS) if i != item_id and i not in fields["depends_on"]]
    if related or draw(st.booleans()):
        fields["related"] = related
    if draw(st.booleans()):
        fields["priority"] = draw(st.integers(0, 2**53 - 1))
    if draw(st.booleans()):
        fields["number"] = draw(st.integers(1, 2**53 - 1))
    if status in TERMINAL:
        field, action = TERMINAL[status]
        fields[field] = updated
        final = {"action": action, "date": updated, "summary": draw(TEXT), "rationale": draw(TEXT)}
        if kind == "epic" and status == "done":
            final["rollup"] = []
        fields["decisions"].append(final)
    return fields


BAD_VALUES = {
    "schema_version": st.sampled_from(["1", True, 1.5, None, 3, 0, -1, [1]]),
    "id": st.sampled_from(["x", ID.lower(), None, 5, "wb_81Q4843R2AN6VQ7XKD3MP8RT2W"]),
    "title": st.one_of(st.text(st.sampled_from(JS_WHITESPACE), max_size=5), st.sampled_from([None, 3, []])),
    "kind": st.sampled_from(["story", "Task", None, 1, []]),
    "status": st.sampled_from(["paused", "DONE", None, 2, {}]),
    "created": st.sampled_from(["2030-02-30", "2030-1-1", "x", None, 20300111, "10000-01-01"]),
    "updated": st.sampled_from(["2030-13-01", "yesterday", None, 1.0, "1969-12-31"]),
    "provenance": st.sampled_from(["x", None, [], 1, {"source": "s"}, {"recorded_at": "2030-01-11T00:00:00Z"}]),
    "depends_on": st.sampled_from(["x", None, {}, 1, ["junk"], [ID.lower()]]),
}


def _has_issue_on(issues: list[dict], field: str) -> bool:
    return any(i["field"] == field or i["field"].startswith((field + ".", field + "[")) for i in issues)


@settings(max_examples=150, deadline=None)
@given(valid_fields(), st.text(max_size=30))
def test_rendered_valid_field_sets_validate(fields, body):
    data = render_item(fields, "\n" + body)
    assert validate_candidate(data, fields["id"], PATH) is None
    assert parse_item(data) == fields


@settings(max_examples=150, deadline=None)
@given(valid_fields(), st.sampled_from(REQUIRED_FIELDS), st.data())
def test_an_invalid_required_field_yields_an_issue_on_it(fields, field, data):
    fields[field] = data.draw(BAD_VALUES[field])
    issues = validate_item_file(render_item(fields), PATH)
    assert _has_issue_on(issues, field), issues
    if field != "id":
        assert validate_candidate(render_item(fields), fields["id"], PATH) == issues
    del fields[field]
    assert {"path": PATH, "field": field, "code": "missing-required-field",
            "message": f"Field {field} is required."} in validate_item_file(render_item(fields), PATH)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(ITEM_62)), st.integers(0, 8), st.text(max_size=6) | st.sampled_from(
    [":", "- ", "&a ", "*a", "!!", "[", "{", "'", '"', "#", "\t", "\r", "...\n", "--- ", "? ", "|\n", "\n  "]))
def test_mutated_candidates_always_get_a_shape(position, cut, insert):
    """Any edit of a valid item yields None, shape A or shape B, never an exception."""
    text = ITEM_62[:position] + insert + ITEM_62[position + cut:]
    found = check(text)
    if isinstance(found, dict):
        assert found["item_id"] == ID and found["reason"] in {
            "invalid-utf8", "malformed-frontmatter", "invalid-yaml", "duplicate-yaml-key",
            "invalid-frontmatter-type", "item-id-mismatch"}
    elif found is not None:
        assert found and found == sorted(found, key=lambda i: tuple(i[k].encode("utf-16-be", "surrogatepass")
                                                                      for k in ("path", "field", "code", "message")))
