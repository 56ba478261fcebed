"""The YAML 1.2 core-schema reading of front matter (ledger-item.md §1.5)."""

from __future__ import annotations

import math

import pytest

from backends.contract.ledger_yaml import (LedgerParseError, YamlObject, js_number_str,
                                           load_front_matter)


def reason(text: str) -> str:
    with pytest.raises(LedgerParseError) as raised:
        load_front_matter(text)
    return raised.value.reason


@pytest.mark.parametrize("plain, expected", [
    ("", None), ("~", None), ("null", None), ("Null", None), ("NULL", None),
    ("true", True), ("True", True), ("TRUE", True), ("false", False), ("False", False), ("FALSE", False),
    ("1", 1.0), ("-1", -1.0), ("+1", 1.0), ("010", 10.0), ("0o17", 15.0), ("0x1F", 31.0), ("0xff", 255.0),
    ("1.5", 1.5), (".5", 0.5), ("1.", 1.0), ("-2.5e3", -2500.0), ("1e3", 1000.0), ("1.0", 1.0),
    (".inf", math.inf), ("-.Inf", -math.inf), ("+.INF", math.inf),
    # strings: YAML 1.1 forms and near misses
    ("2030-01-11", "2030-01-11"), ("2030-01-11T08:00:00Z", "2030-01-11T08:00:00Z"), ("yes", "yes"),
    ("on", "on"), ("no", "no"), ("1_000", "1_000"), ("0b101", "0b101"), ("1:20", "1:20"),
    ("-0x1", "-0x1"), ("+0o7", "+0o7"), ("0O7", "0O7"), ("nULL", "nULL"), ("tRUE", "tRUE"),
    (".NaN.", ".NaN."), ("1e", "1e"), ("x#y", "x#y"),
])
def test_plain_scalars_resolve_by_the_core_schema_only(plain, expected):
    assert load_front_matter(f"a: {plain}") == {"a": expected}


@pytest.mark.parametrize("nan", [".nan", ".NaN", ".NAN"])
def test_nan(nan):
    assert math.isnan(load_front_matter(f"a: {nan}")["a"])


def test_numbers_are_doubles():
    assert load_front_matter("a: 9007199254740993")["a"] == 9007199254740992.0
    assert load_front_matter("a: " + "9" * 400)["a"] == math.inf
    assert math.copysign(1, load_front_matter("a: -0")["a"]) == -1


@pytest.mark.parametrize("text, expected", [
    ("a: '1'", "1"), ('a: "true"', "true"), ("a: |\n  1\n", "1\n"), ("a: >-\n  null\n", "null"),
    ("a: !!str 1", "1"), ("a: !!int '12'", 12.0), ("a: !!int 0x10", 16.0), ("a: !!int hello", "hello"),
    ("a: !!int 1.0", "1.0"), ("a: !!float 1", "1"), ("a: !!float '2.5'", 2.5), ("a: !!bool yes", "yes"),
    ("a: !!bool 'True'", True), ("a: !!null ''", None), ("a: !!null x", "x"), ("a: !foo 1", "1"),
    ("a: ! 1", "1"), ("a: !<tag:yaml.org,2002:int> 5", 5.0), ("a: !!str", ""),
])
def test_quoting_and_explicit_core_tags(text, expected):
    assert load_front_matter(text) == {"a": expected}


def test_timestamp_and_set_are_opaque_objects():
    assert isinstance(load_front_matter("a: !!timestamp 2030-01-11")["a"], YamlObject)
    assert isinstance(load_front_matter("a: !!timestamp 2030-1-1 8:00:00 +01:00")["a"], YamlObject)
    assert isinstance(load_front_matter("!!timestamp 2030-01-11"), YamlObject)
    assert isinstance(load_front_matter("!!set {}"), YamlObject)
    assert isinstance(load_front_matter("a: !!set {x, y}")["a"], YamlObject)
    assert isinstance(load_front_matter("a: !!set\n  ? x\n  ? y\n")["a"], YamlObject)


@pytest.mark.parametrize("text", [
    "a: !!timestamp hello", "a: !!set {x: 1}",
    # refused deviations: the reference may accept these
    "a: !!binary aGk=", "a: !!omap [x: 1]", "a: !!pairs [x: 1]", "a: !!set {x: ~}",
])
def test_bad_or_unsupported_tags_are_invalid_yaml(text):
    assert reason(text) == "invalid-yaml"


@pytest.mark.parametrize("text", [
    "a: 1\na: 2", "a: 1\n'a': 2", 'a: 1\n"a": 2', "1: x\n0x1: y", "1: x\n1.0: y", "1: x\n0o1: y",
    "null: x\n~: y", "?\n: x\nnull: y", "true: x\nTrue: y", "<<: 1\n<<: 2", "{a: 1, a: 2}",
    "p:\n  source: x\n  source: y", "d:\n  - action: x\n    action: y", "x:\n  y:\n    z: 1\n    z: 2",
    "0: x\n-0: y",
])
def test_duplicate_keys_at_any_depth(text):
    assert reason(text) == "duplicate-yaml-key"


@pytest.mark.parametrize("text, expected", [
    ("1: x\n'1': y", {"1": "y"}), ("true: x\n'true': y", {"true": "y"}),
    (".nan: x\n.nan: y", {"NaN": "y"}), ("[a: 1, a: 2]", [{"a": 1.0}, {"a": 2.0}]),
])
def test_keys_that_do_not_clash(text, expected):
    assert load_front_matter(text) == expected


def test_duplicate_key_versus_syntax_error_first_in_document_order():
    assert reason("a: 1\nb: 2\na: 3\nx: 1\ny: 2\nz: 3\nq: 4\nw: 5\nbad: x: y\n") == "duplicate-yaml-key"
    assert reason("a: 1\nb: 2\nbad: x: y\nx: 1\ny: 2\nz: 3\nq: 4\nw: 5\na: 3\n") == "invalid-yaml"
    assert reason("a: 1\na: 2\nb: [\n") == "duplicate-yaml-key"
    assert reason("a:\n\tb: 1\na: 2") == "invalid-yaml"


@pytest.mark.parametrize("text, expected", [
    ("1: a", {"1": "a"}), ("1.0: a", {"1": "a"}), ("0x10: a", {"16": "a"}), ("1e21: a", {"1e+21": "a"}),
    ("true: a", {"true": "a"}), ("~: a", {"": "a"}), (".inf: a", {"Infinity": "a"}),
    ("'<<': a", {"<<": "a"}),
])
def test_keys_become_strings(text, expected):
    assert load_front_matter(text) == expected


@pytest.mark.parametrize("x, text", [
    (1.0, "1"), (-1.5, "-1.5"), (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"),
    (1e-6, "0.000001"), (0.1, "0.1"), (123.456, "123.456"), (-0.0, "0"), (2**53 + 0.0, "9007199254740992"),
    (1.5e300, "1.5e+300"), (math.nan, "NaN"), (-math.inf, "-Infinity"),
])
def test_js_number_str(x, text):
    assert js_number_str(x) == text


def test_anchors_aliases_and_no_merge():
    assert load_front_matter("a: &x 1\nb: &x 2\nc: *x") == {"a": 1.0, "b": 2.0, "c": 2.0}
    merged = load_front_matter("a: &x {b: 1}\nc:\n  <<: *x\n  d: 2")
    assert merged["c"] == {"<<": {"b": 1.0}, "d": 2.0}
    assert reason("a: *x") == "invalid-yaml"  # unresolved alias
    assert reason("a: &x [*x]") == "invalid-yaml"  # recursive: refused (deviation)


def test_alias_expansion_guard():
    ok = "a: &x 1\n" + "".join(f"b{i}: *x\n" for i in range(99))
    assert load_front_matter(ok)["b98"] == 1.0
    assert reason(ok + "c: *x\n") == "invalid-yaml"
    # an empty collection has alias count 0: never limited
    empty = "a: &x []\n" + "".join(f"b{i}: *x\n" for i in range(300))
    assert load_front_matter(empty)["b299"] == []
    # nested: 10 aliases of a list of 10 aliases exceed 100
    nested = "s: &s 1\nl: &l [" + ", ".join(["*s"] * 9) + "]\n" + "".join(f"m{i}: *l\n" for i in range(10))
    assert reason(nested) == "invalid-yaml"


def test_alias_problem_ranks_after_a_duplicate_key():
    assert reason("a: *x\nb: 1\nb: 2") == "duplicate-yaml-key"


@pytest.mark.parametrize("text, expected", [
    ("", None), ("# only a comment\n\n", None), ("...", None), ("# c\n...\n# d", None),
    ("--- ", None), ("--- \na: 1", {"a": 1.0}), ("--- # c\na: 1", {"a": 1.0}), ("a: 1\n...\n# c\n\n", {"a": 1.0}),
    ("a: 1\n... # end\n", {"a": 1.0}), ("- 1", [1.0]), ("x", "x"),
])
def test_document_markers_and_empty_documents(text, expected):
    assert load_front_matter(text) == expected


@pytest.mark.parametrize("text", [
    "a: 1\n--- \nb: 2", "a: 1\n...\n...\n", "a: 1\n...\nb: 2", "a: 1\n... x", "...\n...", "...\n--- x",
    "%YAML 1.2\n--- \na: 1", "%TAG !e! tag:e.com,2000:\n--- \na: 1", "a: [1, 2", "a: 'x", "a:\n\tb: 1",
    "a: 1\n b: 2", "a: @x", "a: b: c",
])
def test_syntax_errors_and_second_documents(text):
    assert reason(text) == "invalid-yaml"


@pytest.mark.parametrize("char", ["\r", "\x85", "\u2028", "\u2029", "\ufeff", "\x00", "\x7f", "\x9f", "\ufffe"])
def test_refused_characters(char):
    assert reason(f"ti{char}tle: x") == "invalid-yaml"
    assert reason(f'title: "a{char}b"') == "invalid-yaml"
    # a duplicate key before the character still decides the reason
    assert reason(f"a: 1\na: 2\nb: x{char}") == "duplicate-yaml-key"
    assert reason(f"b: x{char}\na: 1\na: 2") == "invalid-yaml"


def test_escaped_characters_are_fine_and_surrogate_pairs_join():
    assert load_front_matter('a: "\\u2028\\x85\\r"') == {"a": "\u2028\x85\r"}
    assert load_front_matter('a: "\\ud83d\\ude00"') == {"a": "\U0001F600"}
    assert load_front_matter('a: "\\ud800"') == {"a": "\ud800"}  # lone surrogates stay
    assert load_front_matter("a: \U0001F600") == {"a": "\U0001F600"}


def test_collection_keys_are_refused():
    assert reason("? [a]\n: 1") == "invalid-yaml"
    assert load_front_matter("&k a: 1\n*k : 2") == {"a": 2.0}  # alias keys never clash


def test_deep_nesting_is_refused():
    assert reason("a: " + "[" * 500 + "]" * 500) == "invalid-yaml"
    value, depth = load_front_matter("a: " + "[" * 50 + "]" * 50)["a"], 0
    while value:
        value, depth = value[0], depth + 1
    assert value == [] and depth == 49
