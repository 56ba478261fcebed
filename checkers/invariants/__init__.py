"""The contract's invariants, one small module each (see each module's docstring).

``INVARIANTS`` maps a checker name to its ``check(history, ctx) -> result``.
Every checker is pure, near-linear in the history length, and treats ``info``
(and never-completed) operations as "may or may not have happened".
"""

from __future__ import annotations

from . import (capability_honesty, decisions, dual_ownership, durability, envelopes, epochs, floors, git_finalization,
               idempotence, reply_protocol, requests, stale_write)

INVARIANTS = {
    "dual_ownership": dual_ownership.check,
    "decisions": decisions.check,
    "epochs": epochs.check,
    "floors": floors.check,
    "idempotence": idempotence.check,
    "stale_write": stale_write.check,
    "durability": durability.check,
    "envelopes": envelopes.check,
    "capability_honesty": capability_honesty.check,
    "git_finalization": git_finalization.check,
    "reply_protocol": reply_protocol.check,
    "requests": requests.check,
}

__all__ = ["INVARIANTS"]
