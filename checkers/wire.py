"""The wire values of a history, parsed with memory: a canonical epoch, an
instant. One reply repeats its instants and the next replies repeat them
again, so recent answers are remembered (bounded: cleared when full).

Below ``checkers.history`` and ``checkers.raw``: both read these while a
history is read.
"""

from __future__ import annotations

from typing import Any

from backends.contract.values import parse_instant

_minute_ms: dict[str, int | None] = {}
_UNSEEN = object()
_seen_instants: dict[str, int | None] = {}


def instant_ms(value: Any) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` -> ms since the Unix epoch; ``None`` when
    malformed (``_instant_ms``; recent answers are remembered: one reply
    repeats its instants, and the next replies repeat them again)."""
    try:
        return _seen_instants[value]
    except (KeyError, TypeError):
        pass
    ms = _instant_ms(value)
    if type(value) is str:
        if len(_seen_instants) > 200_000:
            _seen_instants.clear()
        _seen_instants[value] = ms
    return ms


def _instant_ms(value: Any) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` -> ms since the Unix epoch; ``None`` when
    malformed. The calendar part (to the minute) goes through
    ``backends.contract``'s parser once per minute seen (cached); seconds and
    milliseconds are checked here."""
    if type(value) is not str or len(value) != 24 or value[16] != ":" or value[19] != "." or value[23] != "Z":
        return None
    minute = value[:16]
    base = _minute_ms.get(minute, _UNSEEN)
    if base is _UNSEEN:
        try:
            base = parse_instant(minute + ":00.000Z")
        except (ValueError, TypeError):
            base = None
        if len(_minute_ms) > 100_000:
            _minute_ms.clear()
        _minute_ms[minute] = base
    sec, milli = value[17:19], value[20:23]
    if base is None or not (sec.isdigit() and milli.isdigit() and sec.isascii() and milli.isascii()) or sec > "59":
        return None
    return base + int(sec) * 1000 + int(milli)


_seen_epochs: dict[str, int | None] = {}


def epoch_int(value: Any) -> int | None:
    """A canonical decimal epoch string -> int; ``None`` otherwise."""
    try:
        return _seen_epochs[value]
    except (KeyError, TypeError):
        pass
    if type(value) is not str:
        return None
    e = int(value) if value.isdigit() and value.isascii() and (value == "0" or value[0] != "0") else None
    if len(_seen_epochs) > 100_000:
        _seen_epochs.clear()
    _seen_epochs[value] = e
    return e


def obj(value: Any) -> dict:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}
