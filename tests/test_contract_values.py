"""Value formats: identifiers, epochs (uint64), instants with calendar
validation, lease durations, canonical base64, size limits."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from backends.contract import values as v

NS = "wbns_" + "1" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"


@pytest.mark.parametrize("value, ok", [
    (NS, True), ("wbns_" + "a" * 32, True), ("wbns_" + "A" * 32, False), ("wbns_" + "1" * 31, False),
    ("wbns_" + "1" * 33, False), (NS + "\n", False), ("wbns_" + "g" * 32, False), (None, False), (1, False),
])
def test_namespace(value, ok):
    assert v.is_namespace(value) is ok


@pytest.mark.parametrize("value, ok", [
    (ITEM, True), ("wb_81Q4837BM01W70T30B184GG1R6", False),  # first char 0-7
    ("wb_01Q4837BM01W70T30B184GG1RI", False), ("wb_01Q4837BM01W70T30B184GG1RL", False),
    ("wb_01Q4837BM01W70T30B184GG1RO", False), ("wb_01Q4837BM01W70T30B184GG1RU", False),
    ("wb_01q4837bm01w70t30b184gg1r6", False), ("wb_01Q4837BM01W70T30B184GG1R", False),
])
def test_item_id(value, ok):
    assert v.is_item_id(value) is ok


@pytest.mark.parametrize("value, owner_ok, op_ok", [
    ("agent-a-run-1", True, True), ("a", True, True), ("a/b", True, False), ("-a", False, False),
    ("a" * 128, True, True), ("a" * 129, False, False), ("", False, False), ("a b", False, False),
    ("a:b.c_d", True, True), ("é", False, False),
])
def test_owner_and_operation_ids(value, owner_ok, op_ok):
    assert v.is_owner_id(value) is owner_ok
    assert v.is_operation_id(value) is op_ok


@pytest.mark.parametrize("value, ok, active_ok", [
    ("0", True, False), ("1", True, True), ("18446744073709551615", True, True),
    ("18446744073709551616", False, False), ("01", False, False), ("-1", False, False),
    ("1.0", False, False), ("", False, False), (1, False, False), ("99999999999999999999", False, False),
])
def test_epochs(value, ok, active_ok):
    assert v.is_epoch(value) is ok
    assert v.is_epoch(value, active=True) is active_ok


def test_epoch_parse_and_format_bounds():
    assert v.parse_epoch("18446744073709551615") == 2**64 - 1
    assert v.format_epoch(2**64 - 1) == "18446744073709551615"
    for bad in (2**64, -1, True):
        with pytest.raises(ValueError):
            v.format_epoch(bad)
    with pytest.raises(ValueError):
        v.parse_epoch("0", active=True)
    with pytest.raises(ValueError):
        v.parse_epoch("007")


@pytest.mark.parametrize("value, ok", [
    ("2030-01-11T09:00:00.000Z", True), ("2028-02-29T00:00:00.000Z", True),
    ("2030-02-29T00:00:00.000Z", False), ("2030-04-31T00:00:00.000Z", False),
    ("2100-02-29T00:00:00.000Z", False), ("2000-02-29T23:59:59.999Z", True),
    ("2030-13-01T00:00:00.000Z", False), ("2030-00-01T00:00:00.000Z", False),
    ("2030-01-00T00:00:00.000Z", False), ("2030-01-11T24:00:00.000Z", False),
    ("2030-01-11T09:60:00.000Z", False), ("2030-01-11T09:00:60.000Z", False),
    ("2030-01-11T09:00:00Z", False), ("2030-01-11T09:00:00.00Z", False),
    ("2030-01-11T09:00:00.000+00:00", False), ("2030-01-11 09:00:00.000Z", False),
    ("2030-01-11T09:00:00.000z", False), ("0000-01-01T00:00:00.000Z", False),
])
def test_instants(value, ok):
    assert v.is_instant(value) is ok


def test_instant_known_values():
    assert v.parse_instant("1970-01-01T00:00:00.000Z") == 0
    assert v.parse_instant("2030-01-11T09:00:00.000Z") == 1894352400000
    assert v.format_instant(1894352400000 + 60_000) == "2030-01-11T09:01:00.000Z"
    assert v.format_instant(-1) == "1969-12-31T23:59:59.999Z"


@given(st.integers(min_value=v.parse_instant("0001-01-01T00:00:00.000Z"),
                   max_value=v.parse_instant("9999-12-31T23:59:59.999Z")))
def test_instant_round_trip(ms):
    text = v.format_instant(ms)
    assert v.parse_instant(text) == ms
    assert len(text) == 24


@pytest.mark.parametrize("value, ok", [
    (1, True), (86_400_000, True), (0, False), (86_400_001, False), (True, False),
    (60000.0, False), ("60000", False), (None, False), (-5, False),
])
def test_lease_duration(value, ok):
    assert v.is_lease_duration(value) is ok


@pytest.mark.parametrize("text, data", [
    ("", b""), ("YQ==", b"a"), ("YWI=", b"ab"), ("YWJj", b"abc"), ("YWZ0ZXIK", b"after\n"),
    ("YR==", None),  # non-zero pad bits: decodes but does not round-trip
    ("YWI", None), ("YQ", None), ("YW Jj", None), ("YWJj\n", None), ("YW-j", None), ("YW_j", None),
    ("Y===", None), ("=YWJ", None), ("YQ==YQ==", None), ("\u00e9WJj", None),
])
def test_canonical_base64(text, data):
    assert v.decode_canonical_base64(text) == data


@given(st.binary(max_size=64))
def test_base64_round_trip(data):
    assert v.decode_canonical_base64(v.encode_base64(data)) == data


def test_limits_and_sha256_refs():
    assert v.CANDIDATE_MAX_BYTES == 8_388_608
    assert v.REQUEST_MAX_BYTES == 11_534_336
    assert v.is_sha256_ref("sha256:" + "0" * 64)
    assert not v.is_sha256_ref("sha256:" + "A" * 64)
    assert not v.is_sha256_ref("sha256:" + "0" * 63)
    assert not v.is_sha256_ref("SHA256:" + "0" * 64)


@given(st.datetimes(min_value=__import__("datetime").datetime(1, 1, 1),
                    max_value=__import__("datetime").datetime(9999, 12, 31, 23, 59, 59)))
def test_instant_agrees_with_datetime(dt):
    import datetime as _dt
    dt = dt.replace(microsecond=dt.microsecond // 1000 * 1000)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    text = f"{dt.year:04d}" + text[text.index("-"):]  # strftime may not zero-pad years < 1000
    epoch = _dt.datetime(1970, 1, 1)
    assert v.parse_instant(text) == (dt - epoch) // _dt.timedelta(milliseconds=1)
    assert v.format_instant(v.parse_instant(text)) == text
