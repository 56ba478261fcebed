"""The value formats of the contract (contract §2, §4, §6; vectors.md §4).

Each ``is_*`` predicate is exact: it accepts only the canonical wire form.
Epochs are ``int`` inside the suite and canonical decimal strings on the wire;
instants are ``int`` milliseconds since the Unix epoch inside and
``YYYY-MM-DDTHH:MM:SS.mmmZ`` on the wire.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import re

EPOCH_MAX = 2**64 - 1   # the largest epoch: a canonical unsigned 64-bit decimal on the wire

NAMESPACE_RE = re.compile(r"wbns_[a-f0-9]{32}")
ITEM_ID_RE = re.compile(r"wb_[0-7][0-9A-HJKMNP-TV-Z]{25}")
OWNER_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
OPERATION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
EPOCH_RE = re.compile(r"0|[1-9][0-9]{0,19}")
ACTIVE_EPOCH_RE = re.compile(r"[1-9][0-9]{0,19}")
SHA256_REF_RE = re.compile(r"sha256:[0-9a-f]{64}")
INSTANT_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z")
BASE64_RE = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")

LEASE_MIN_MS = 1
LEASE_MAX_MS = 86_400_000
CANDIDATE_MAX_BYTES = 8_388_608
REQUEST_MAX_BYTES = 11_534_336


def _full(regex: re.Pattern, value: object) -> bool:
    # fullmatch, and refuse a trailing "\n" that "$" would tolerate
    return isinstance(value, str) and regex.fullmatch(value) is not None


def is_namespace(value: object) -> bool:
    return _full(NAMESPACE_RE, value)


def is_item_id(value: object) -> bool:
    return _full(ITEM_ID_RE, value)


def is_owner_id(value: object) -> bool:
    return _full(OWNER_ID_RE, value)


def is_operation_id(value: object) -> bool:
    return _full(OPERATION_ID_RE, value)


def is_sha256_ref(value: object) -> bool:
    return _full(SHA256_REF_RE, value)


# --------------------------------------------------------------------------- epochs


def is_epoch(value: object, *, active: bool = False) -> bool:
    """Canonical uint64 decimal; ``active`` additionally forbids ``"0"``."""
    if not _full(ACTIVE_EPOCH_RE if active else EPOCH_RE, value):
        return False
    return int(value) <= EPOCH_MAX  # type: ignore[arg-type]


def parse_epoch(value: str, *, active: bool = False) -> int:
    if not is_epoch(value, active=active):
        raise ValueError(f"not a canonical {'active ' if active else ''}epoch: {value!r}")
    return int(value)


def format_epoch(epoch: int) -> str:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= EPOCH_MAX:
        raise ValueError(f"epoch out of range: {epoch!r}")
    return str(epoch)


# --------------------------------------------------------------------------- instants


def is_instant(value: object) -> bool:
    try:
        parse_instant(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return False
    return True


def parse_instant(value: str) -> int:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` -> ms since the Unix epoch, with a real
    calendar check (no Feb 30, no hour 24, no leap second)."""
    if not isinstance(value, str):
        raise TypeError("an instant is a string")
    m = INSTANT_RE.fullmatch(value)
    if m is None:
        raise ValueError(f"not an instant: {value!r}")
    year, month, day, hour, minute, second, milli = (int(g) for g in m.groups())
    if year < 1:
        raise ValueError(f"year out of range: {value!r}")
    if not 1 <= month <= 12:
        raise ValueError(f"month out of range: {value!r}")
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        raise ValueError(f"day out of range: {value!r}")
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"time out of range: {value!r}")
    days = _days_from_civil(year, month, day)
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli


def format_instant(ms: int) -> str:
    """ms since the Unix epoch -> ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (exactly three
    fraction digits; ``isoformat()`` does not give this form)."""
    if isinstance(ms, bool) or not isinstance(ms, int):
        raise TypeError("an instant is integer milliseconds")
    days, rem = divmod(ms, 86_400_000)
    year, month, day = _civil_from_days(days)
    if not 1 <= year <= 9999:
        raise ValueError(f"instant out of range: {ms}")
    hour, rem = divmod(rem, 3_600_000)
    minute, rem = divmod(rem, 60_000)
    second, milli = divmod(rem, 1000)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


# --------------------------------------------------------------------------- lease, base64, sizes


def is_lease_duration(value: object) -> bool:
    """A JSON integer (not a bool, not a float) from 1 through 86,400,000."""
    return type(value) is int and LEASE_MIN_MS <= value <= LEASE_MAX_MS


def decode_canonical_base64(text: object) -> bytes | None:
    """Decode canonical padded RFC 4648 base64, or ``None`` when ``text`` is
    not canonical (whitespace, missing padding, non-zero pad bits, URL
    alphabet, ...): decoding then re-encoding must give ``text`` back."""
    if not isinstance(text, str) or not text.isascii() or BASE64_RE.fullmatch(text) is None:
        return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(data).decode("ascii") != text:
        return None
    return data


def encode_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
