"""Strict JSON: unique keys at any depth, no NaN/Infinity, strict UTF-8, no
trailing data; canonical and compact output forms."""

from __future__ import annotations

import pytest

from backends.contract import StrictJSONError, canonical_json, compact_json, loads_strict


@pytest.mark.parametrize("raw, pointer", [
    (b'{"a":1,"a":2}', "/a"),
    (b'{"a":{"b":1,"b":2}}', "/a/b"),
    (b'{"x":[0,{"k":1,"k":1}]}', "/x/1/k"),
    (b'[{"a/b":1,"a/b":2}]', "/0/a~1b"),
])
def test_duplicate_members_rejected_at_any_depth_with_pointer(raw, pointer):
    with pytest.raises(StrictJSONError) as info:
        loads_strict(raw)
    assert info.value.pointer == pointer


@pytest.mark.parametrize("raw", [
    b'{"a":NaN}', b'{"a":Infinity}', b'{"a":-Infinity}',
    b'{"a":1} x', b'{"a":1}{"b":2}', b'', b'   ',
    b'{"a":"\xff"}', b'{"a":"\xed\xa0\x80"}',  # invalid UTF-8, encoded surrogate
    b'\xef\xbb\xbf{"a":1}',  # BOM
    b"{'a':1}", b'{"a":1,}',
])
def test_non_strict_documents_rejected(raw):
    with pytest.raises(StrictJSONError):
        loads_strict(raw)


def test_valid_documents_parse_including_whitespace_and_unicode():
    assert loads_strict(b' {"a": [1, 2.5, null, true], "b": "\xc3\xa9"}\n') == {
        "a": [1, 2.5, None, True], "b": "\u00e9"}
    assert loads_strict(b"7") == 7


def test_loads_strict_requires_bytes():
    with pytest.raises(TypeError):
        loads_strict('{"a":1}')  # type: ignore[arg-type]


def test_canonical_json_sorts_keys_and_keeps_utf8():
    assert canonical_json({"b": 1, "a": ["\u00e9", {"d": None, "c": True}]}) == \
        '{"a":["\u00e9",{"c":true,"d":null}],"b":1}'.encode()


def test_compact_json_keeps_key_order():
    assert compact_json({"ok": True, "namespace": "work-claim"}) == b'{"ok":true,"namespace":"work-claim"}'


def test_canonical_json_refuses_nan():
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})


def test_absurd_nesting_is_a_strict_json_error_not_a_crash():
    with pytest.raises(StrictJSONError):
        loads_strict(b"[" * 100_000 + b"]" * 100_000)
