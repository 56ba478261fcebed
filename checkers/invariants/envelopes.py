"""Envelope shapes: exact member sets, codes, messages, exit and state.

Contract §8 ("Error envelopes contain exactly ok: false, namespace, command,
contract_version: 1, state, and error with code, message, and details ...
Publication envelopes also contain operation_id once schema validation has
accepted it"; the exit / state table; "Stable messages ... are part of
version 1") and vectors.md §8-§9 (shapes per kind; capabilities has no
``state``). Codes, exits, states and messages come from
``backends.contract.codes`` - the one canonical copy.
"""

from __future__ import annotations

from checkers.raw.envelopes import OTHER_TUPLE, SURFACE, envelope_problems  # noqa: F401 - envelope_problems named here too

from ._common import Findings, prepare


def check(history, ctx: dict | None = None) -> dict:
    """The shape of every reply was judged once, while the history was read
    (``checkers.raw.envelopes``, ``History.envelope_problems``); this reports it."""
    h = prepare(history)
    out = Findings()
    for op, problems in h.envelope_problems:
        for problem in problems:
            if problem.startswith(OTHER_TUPLE):
                out.add(
                    "reply-for-another-tuple",
                    f"{op.f} reply by process {op.process}: {problem}. Every claim key is the immutable tuple "
                    "(ledger_namespace, item_id); a wrong ledger or item never falls through to another record "
                    "(contract §2, §6 step 7).",
                    op.indices, f=op.f, problem=problem,
                )
                continue
            out.add(
                "malformed-envelope",
                f"{op.f} reply (exit {op.exit}) by process {op.process}: {problem}. Envelope members, codes, "
                "messages, exit and state are exact in version 1 (contract §8; vectors.md §9).",
                op.indices, f=op.f, exit=op.exit, problem=problem,
            )
    checked = sum(1 for op in h.ops if op.exit is not None and op.f in SURFACE)
    return out.result({"envelopes_checked": checked})
