"""One canonical contract: every message text lives in backends/contract and
nowhere else in the product code (backends never format their own replies;
checkers compare against the contract's own table)."""

from __future__ import annotations

from pathlib import Path

from backends.contract import MESSAGE

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("backends", "checkers", "chaos", "workloads")


def _message_texts() -> set[str]:
    texts: set[str] = set()
    for value in MESSAGE.values():
        texts.update(value.values() if isinstance(value, dict) else [value])
    return {t for t in texts if isinstance(t, str) and len(t) > 20}


def test_message_texts_are_written_only_in_the_contract_module():
    texts = _message_texts()
    assert len(texts) >= 15
    offenders = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.is_relative_to(ROOT / "backends" / "contract"):
                continue
            source = path.read_text()
            offenders += [f"{path.relative_to(ROOT)}: {t!r}" for t in texts if t in source]
    assert offenders == []
