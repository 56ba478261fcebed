"""``checkers.history.decode_line``: orjson where it reads a line exactly as
``json`` does, ``json`` everywhere else; the value (types, NaN, -0.0, big
integers, lone surrogates) and the refusals are ``json``'s, byte for byte."""

from __future__ import annotations

import json
import math
import struct

from hypothesis import example, given, settings
from hypothesis import strategies as st

from checkers.history import decode_line

_json = json.JSONDecoder().decode


def reference(raw: bytes):
    """How the reader read a line before orjson: its UTF-8 text (bad bytes
    surrogate-escaped), by ``json``."""
    return _json(raw.decode("utf-8", "surrogateescape"))


def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def outcome(fn, raw: bytes):
    try:
        return "value", fn(raw)
    except RecursionError:
        return "error", "recursion"
    except ValueError:
        return "error", "value"


def check(raw: bytes, deep: bool = False) -> None:
    got, want = outcome(decode_line, raw), outcome(reference, raw)
    assert got[0] == want[0], (raw[:80], got[0], want[0])
    if got[0] == "value":
        assert got[1] == want[1] if deep else same(got[1], want[1]), (raw, got, want)


text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)  # lone surrogates included
numbers = (st.integers() | st.integers(-2**70, 2**70) | st.floats() | st.floats(allow_subnormal=True)
           | st.floats(-1e-300, 1e-300))
values = st.recursive(st.none() | st.booleans() | numbers | text,
                      lambda kids: st.lists(kids, max_size=4) | st.dictionaries(text, kids, max_size=4),
                      max_leaves=20)


@settings(max_examples=600, deadline=None)
@given(values, st.booleans(), st.sampled_from(["", " ", "\t", "\r", " \r"]))
def test_json_values_decode_as_json_reads_them(value, ascii_only, pad):
    dumped = json.dumps({"value": value, "index": 1}, ensure_ascii=ascii_only)
    check((pad + dumped + pad + "\n").encode("utf-8", "surrogatepass"))


digits = st.text("0123456789", min_size=1, max_size=40)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["", "-"]), digits, st.sampled_from(["", ".", ".5", "e5", "E-400", "e400", ".0e-7"]),
       st.one_of(st.just(""), digits))
@example("", "18446744073709551616", "", "")  # past 64 bits: orjson would say 1.8446744073709552e+19
@example("-", "9223372036854775809", "", "")
@example("", "1", "e400", "")                   # json: inf; orjson refuses
@example("", "1", ".5e", "18446744073709551616")  # a long exponent (its digits follow an e)
@example("", "1", ".", "18446744073709551616")   # a long fraction
def test_number_literals_decode_as_json_reads_them(sign, whole, tail, frac):
    check(f'{{"n":{sign}{whole}{tail}{frac}}}\n'.encode())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
@example(b'{"a":"\xff"}\n')                     # not UTF-8: surrogate-escaped, as the text reader did
@example(b'{"a":"\\ud800"}\n')                   # a lone surrogate escape
@example(b'{"a":NaN,"b":-Infinity}\n')
@example(b'\xef\xbb\xbf{}\n')                    # a BOM is not JSON
@example(b'{"a":1,"a":2}\n')                     # the last duplicate wins in both
@example(b'{"a":"\x1f"}\n')                      # a raw control character is refused
def test_arbitrary_bytes_decode_or_fail_as_json_does(junk):
    check(junk)
    check(b'{"k":"' + junk + b'"}\n')


def test_deep_nesting_is_refused_where_json_refuses_it():
    for depth in (150, 199, 200, 900, 1020, 1030, 5000):
        check(b"[" * depth + b"]" * depth + b"\n", deep=True)
        check(b'{"a":' * depth + b"1" + b"}" * depth + b"\n", deep=True)


def test_long_digit_runs_in_strings_and_numbers():
    """A run of 19+ digits inside a string (a canonical epoch near 2^64) is
    no number, and orjson reads that line; one that is a number, after any
    character that can lead a number's digits, is read as ``json`` reads it."""
    check(b'{"last_epoch":"18446744073709551614","n":1}\n')
    big = b"18446744073709551616"
    for doc in (b'{"n":X}', b'{"n":-X}', b'{"n": X}', b'{"n":\tX}', b"[1,X]", b"[X]", b"X",
                b'{"n":1.X}', b'{"n":1eX}', b'{"n":1E+X}', b'{"n":1e-X}'):
        line = doc.replace(b"X", big)
        check(line + b"\n")
        check(b'{"e":"18446744073709551614","d":' + line + b"}\n")
