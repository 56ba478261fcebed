"""libyaml's parser and PyYAML's pure one give ``load_front_matter`` the same
answer on every text the libyaml path reads (backends/contract/ledger_yaml.py).

The pure parser is the reference. ``load_front_matter`` reads with libyaml
unless ``_LIBYAML_DIFFERS`` finds a construct the two parsers disagree on;
these tests diff the two on every candidate and front matter the vectors and
the ledger tests hold, on each known disagreement, and on random texts.
"""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from backends.contract import ledger_yaml
from backends.contract.ledger_item import LedgerParseError, render_item, split_item
from backends.contract.ledger_yaml import C_EVENTS, PURE_EVENTS, load_front_matter

ROOT = Path(__file__).resolve().parents[1]
SHARED_VECTORS = ROOT.parent / "shared" / "vectors"
LEDGER_TESTS = ("test_ledger_item.py", "test_ledger_item_yaml.py", "test_ledger_item_rules.py")

needs_libyaml = pytest.mark.skipif(C_EVENTS is None, reason="PyYAML was built without libyaml")


def outcome(text: str, events) -> tuple:
    """What the caller sees: the value (repr, so NaN equals NaN) or the reason."""
    try:
        return "value", repr(load_front_matter(text, events))
    except LedgerParseError as error:
        return "refused", error.reason


def assert_same(text: str) -> None:
    reference = outcome(text, PURE_EVENTS)
    assert outcome(text, None) == reference, f"default reader differs from the reference on {text!r}"
    if not ledger_yaml._LIBYAML_DIFFERS.search(text):
        assert outcome(text, C_EVENTS) == reference, f"libyaml differs from the reference on {text!r}"


def front_texts(raw: str) -> list[str]:
    """The text itself, and its front matter when it is framed as an item."""
    texts = [raw]
    try:
        texts.append(split_item(raw.encode("utf-8", "surrogatepass"))[0])
    except LedgerParseError:
        pass
    return texts


def _candidates(node, found: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "candidate_source_base64" and isinstance(value, str):
                found.append(base64.b64decode(value).decode("utf-8", "replace"))
            _candidates(value, found)
    elif isinstance(node, list):
        for value in node:
            _candidates(value, found)


def vector_texts() -> list[str]:
    found: list[str] = []
    for root in (SHARED_VECTORS, ROOT / "vectors"):
        for path in sorted(root.rglob("*.json")):
            _candidates(json.loads(path.read_text()), found)
        found += [path.read_text() for path in sorted(root.rglob("*.md"))]
    return found


def ledger_test_strings() -> list[str]:
    """Every string literal of the ledger tests (module constants built by
    f-strings included), whole and as an item's front matter."""
    texts: list[str] = []
    for name in LEDGER_TESTS:
        tree = ast.parse((ROOT / "tests" / name).read_text())
        texts += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        module: dict = {}
        for statement in tree.body:  # module-level constants (ITEM_61 and the like)
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.JoinedStr):
                try:
                    exec(compile(ast.Module([statement], []), name, "exec"), module)
                except NameError:
                    continue
        texts += [v for k, v in module.items() if isinstance(v, str) and not k.startswith("__")]
    assert len(texts) > 500
    return texts


@needs_libyaml
def test_every_vector_candidate_and_ledger_fixture():
    texts = vector_texts()
    assert len(texts) >= 35, "the shared vectors hold 35 candidates and two ledger items"
    for raw in texts:
        for text in front_texts(raw):
            assert_same(text)


@needs_libyaml
def test_every_string_of_the_ledger_tests():
    for raw in ledger_test_strings():
        for text in front_texts(raw):
            assert_same(text)


#: One text per construct on which the parsers were seen to disagree: the
#: guard must send each to the reference.
DISAGREEMENTS = [
    "a: x\t# c", "kind:\ttask", ".\t",                # tabs: PyYAML refuses more
    "a: !, ", "!?.,x,",                               # tags with flow indicators: libyaml refuses
    "[a?b]", "- {a: u? , b: 1}",                      # ? in a flow plain scalar: libyaml accepts
    "|#", ">+#", "a: |-#x",                           # block header then # without a space
    "{a:, b}", "[a:]", "x: {a:}",                     # : before a flow indicator: PyYAML reads a key
    "%l\n---", "%FOO bar\n--- x",                     # unknown directive: libyaml refuses
    'a: "\\ud83d\\ude00"', '"\\ud800": 1\n"\\ud800": 2', 'a: "\\U0000DFFF"',  # escaped surrogates
]


@needs_libyaml
@pytest.mark.parametrize("text", DISAGREEMENTS)
def test_known_disagreements_go_to_the_reference(text):
    assert ledger_yaml._LIBYAML_DIFFERS.search(text)
    assert outcome(text, None) == outcome(text, PURE_EVENTS)


@needs_libyaml
def test_the_guard_is_needed():
    """The disagreements are real for the libyaml built in here: without the
    guard, these answers would change."""
    changed = [t for t in DISAGREEMENTS if outcome(t, C_EVENTS) != outcome(t, PURE_EVENTS)]
    assert len(changed) >= len(DISAGREEMENTS) // 2, changed


@pytest.mark.parametrize("escape", ["\\U00110000", "\\UFFFFFFFF"])
def test_escape_past_unicode_is_invalid_yaml_on_both_paths(escape):
    """PyYAML's pure scanner raised ValueError/OverflowError (a traceback out
    of History.read) for these; libyaml refuses them."""
    for events in [PURE_EVENTS, None] + ([C_EVENTS] if C_EVENTS else []):
        assert outcome(f'a: "{escape}"', events) == ("refused", "invalid-yaml")


def test_default_reader_is_libyaml_when_built_in():
    assert (C_EVENTS is not None) == yaml.__with_libyaml__
    canonical = render_item({"schema_version": 1, "id": "wb_01Q4843R2AN6VQ7XKD3MP8RT2W", "title": "T",
                             "kind": "task", "status": "open", "created": "2030-01-11",
                             "updated": "2030-01-11", "depends_on": []}).decode()
    assert not ledger_yaml._LIBYAML_DIFFERS.search(split_item(canonical.encode())[0]), \
        "a canonical item must take the fast path"


# ---------------------------------------------------------------- random texts

ATOMS = ["a", "b", "key", ":", ": ", " ", "  ", "\n", "\t", "-", "- ", "? ", "?", "[", "]", "{", "}", ",",
         '"', "'", "\\", "#", " #", "&x ", "*x", "&y", "*y", "!", "!!str ", "!!int ", "!!set ", "!!timestamp ",
         "!x ", "|", ">", "|-", ">+", "|2", "%YAML 1.2\n", "%TAG ! tag:x,2000:\n", "---", "...", "--- ", "1",
         "0x1F", ".inf", "~", "null", "true", "2030-01-11", "é", "😀", "\u2028", "\x85", "\r", "\\u00e9", "\\x41",
         "\\n", "\\ud83d", "\\U0001F600", "<<", "@", "`", "%", "=", ".", "0", "1e3", '"a"', "'b'", "\n  ",
         "\n    ", "\n- ", "x: y\n", "\ufeff", "\x00", "\x07", ":x", "a:b", "-1", " - ", "\n...\n", "\n---\n",
         "\n#c\n", " \n", "\n\n", '\\"', "''", "\\ ", "\\\n"]
SEED = """schema_version: 1
id: wb_01Q474AK00J7SR2PH0CP6ADYVP
title: "agent-p27 update 1"
kind: task
status: in-progress
created: 2030-01-11
provenance:
  source: "generator/claims"
  recorded_at: "2030-01-11T09:15:30.250Z"
depends_on: []
decisions:
  - action: create
    date: 2030-01-11
    summary: 'one, two'
    rationale: >
      folded
      text
  - {action: update, date: 2030-01-12}
related: [a, "b", 'c']
"""

atom_texts = st.lists(st.sampled_from(ATOMS), max_size=40).map("".join)


@st.composite
def mutated_items(draw):
    text = SEED
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.sampled_from([0, 0, 1, 2, 5]))
        text = text[:at] + draw(st.lists(st.sampled_from(ATOMS), max_size=3).map("".join)) + text[at + cut:]
    return text


@needs_libyaml
@settings(max_examples=600, deadline=None)
@given(st.one_of(atom_texts, mutated_items()))
def test_random_texts_read_the_same(text):
    assert_same(text)


core_plains = st.lists(st.sampled_from(list("0123456789abcdefxoXOeE.+-_~:") + ["inf", "Inf", "nan", "NaN", "null",
                                                                              "true", "False", "NULL", "INF"]),
                       max_size=8).map("".join)


@settings(max_examples=800, deadline=None)
@given(core_plains)
def test_one_pattern_resolves_plain_scalars_like_the_table(text):
    """The single ``_CORE_PLAIN`` match gives the type the §1.5 table gives
    when its kinds are tried one by one (null, bool, int, float)."""
    expected = text
    for kind in ("null", "bool", "int", "float"):
        fits, value = ledger_yaml._typed(text, kind)
        if fits:
            expected = value
            break
    assert repr(ledger_yaml._resolve_scalar(text, None, None)) == repr(expected)
