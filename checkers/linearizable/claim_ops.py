"""A claim-chaos history -> the checker's operations (inputs and outputs as small tuples).

Each client invoke/completion pair becomes one ``Operation`` on the register
``(ledger_namespace, item_id)``. Inputs and outputs are hashable tuples so the
checker can memoize the model's step per (op, state).

* ``ok`` / ``fail`` completions carry a parsed reply: the decision time the
  backend states IN the reply (``observed_at`` of read_back, claim_read_back
  or error details), the claim record it shows, and what the op-specific
  payload says.
* ``info`` completions (crash, timeout, lost reply, uncertain exit 6) and ops
  still open at the end return at +inf with output ``UNKNOWN``.
* Ops that can neither change nor reveal state (an ``info`` read, an
  ``invalid-request``) are dropped: they are legal anywhere.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from checkers.history import FAIL, INFO, OK, pairs

from .model import INF, UNKNOWN, Operation

#: stored-outcome / envelope identity: canonical JSON of {exit, envelope}
Envelope = str
Active = tuple  # (owner_id, epoch, issued_at_ms | None, expires_at_ms | None); None = unknown time
Record = tuple  # (last_epoch, Active | None)

CLAIM_OPS = ("read", "acquire", "renew", "release")
PUBLISH_OPS = ("publish", "publication-read")


def instant_ms(text: str) -> int:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` -> ms since the Unix epoch."""
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(dt.timestamp() * 1000)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(request: dict) -> str:
    return "sha256:" + hashlib.sha256(canonical(request).encode()).hexdigest()


def active_tuple(active: dict | None) -> Active | None:
    if active is None:
        return None
    return (active["owner_id"], int(active["epoch"]), instant_ms(active["issued_at"]),
            instant_ms(active["expires_at"]))


def record_of(rb: dict) -> tuple[int | None, Record]:
    """A read_back-shaped dict -> (observed_at, (last_epoch, active))."""
    t = instant_ms(rb["observed_at"]) if rb.get("observed_at") else None
    return t, (int(rb["last_epoch"]), active_tuple(rb.get("active")))


def parse_input(f: str, req: dict) -> tuple:
    if f == "read":
        return ("read",)
    if f == "acquire":
        exp = req["expected"]
        return ("acquire", req["owner_id"], int(req["lease_duration_ms"]), int(exp["last_epoch"]),
                active_tuple(exp.get("active")))
    if f == "renew":
        return ("renew", req["owner_id"], int(req["epoch"]), instant_ms(req["expected_expires_at"]),
                int(req["lease_duration_ms"]))
    if f == "release":
        return ("release", req["owner_id"], int(req["epoch"]), instant_ms(req["expected_expires_at"]), 0)
    if f == "publish":
        fence = req["claim_fence"]
        return ("publish", req["operation_id"], digest(req), req["expected_revision"], req["candidate_sha256"],
                fence.get("ledger_namespace") == req["ledger_namespace"] and fence.get("item_id") == req["item_id"],
                fence.get("owner_id"), int(fence["epoch"]))
    if f == "publication-read":
        return ("pread", req["operation_id"])
    raise ValueError(f"not a register op: {f}")


def parse_output(f: str, exit_code: int, env: dict) -> tuple | None:
    """A definite reply -> (code, t, record, payload); None if it reveals nothing (a no-op)."""
    if exit_code == 0:
        res = env["result"]
        if f == "read":
            t, rec = record_of(res["read_back"])
            return ("ok", t, rec, None)
        if f in ("acquire", "renew"):
            t, rec = record_of(res["read_back"])
            return ("ok", t, rec, active_tuple(res["claim"]))
        if f == "release":
            t, rec = record_of(res["read_back"])
            return ("ok", t, rec, active_tuple(res["released_claim"]))
        if f == "publish":
            t, rec = record_of(res["claim_read_back"])
            return ("ok", t, rec, (res["committed_revision"], canonical({"exit": 0, "envelope": env})))
        if f == "publication-read":
            out = res["outcome"]
            stored = canonical({"exit": out["exit"], "envelope": out.get("stdout", out.get("envelope"))})
            return ("ok", None, None, (res["operation_digest"], out["exit"] == 0, stored))
    err = env.get("error") or {}
    code, details = err.get("code"), err.get("details") or {}
    if f in CLAIM_OPS and code in ("claim-conflict", "claim-held", "claim-expired", "epoch-exhausted"):
        t, rec = record_of(details)
        return (code, t, rec, None)
    if f == "publish":
        whole = canonical({"exit": exit_code, "envelope": env})
        if code == "claim-fence-rejected":
            active_epoch = details.get("active_epoch")
            return (code, instant_ms(details["observed_at"]), None,
                    (details.get("reason"), details.get("active_owner_id"),
                     None if active_epoch is None else int(active_epoch), whole))
        if code == "ledger-revision-conflict":
            return (code, None, None, (details.get("actual_revision"), whole))
        if code == "idempotency-conflict":
            return (code, None, None, (details.get("expected_operation_digest"), whole))
    if f == "publication-read" and code == "operation-not-found":
        return (code, None, None, None)
    return None  # invalid request, ledger-invalid, capability...: changes and reveals nothing


def history_to_operations(history: list[dict]) -> tuple[list[Operation], list[int]]:
    """Client ops on registers -> (operations, history index of each op's invoke).

    ``Operation.metadata`` is ``(invoke index, completion index | None)``.
    """
    ops: list[Operation] = []
    for pair in pairs(history):
        inv, done = pair.invoke, pair.completion
        f = inv.get("f")
        if f not in CLAIM_OPS and f not in PUBLISH_OPS:
            continue
        req = inv.get("value")
        if not isinstance(req, dict) or "ledger_namespace" not in req or "item_id" not in req:
            continue
        try:
            inp = parse_input(f, req)
        except (KeyError, TypeError, ValueError):
            continue  # a malformed request is refused before any decision
        kind = pair.type
        output: Any = UNKNOWN
        ret = INF
        if kind in (OK, FAIL):
            value = done.get("value") or {}
            try:
                output = parse_output(f, value.get("exit"), value.get("envelope") or {})
            except (KeyError, TypeError, ValueError, AttributeError):
                output = UNKNOWN  # an unparseable reply proves nothing here (envelope checkers judge it)
            if output is None:
                continue
            ret = done["time"]
        elif kind == INFO and f in ("read", "publication-read"):
            continue
        key = (req["ledger_namespace"], req["item_id"])
        meta = (inv["index"], done["index"] if done else None, key)
        client = inv.get("process")
        ops.append(Operation(client if isinstance(client, int) else -1, inp, inv["time"], output, ret, meta))
    return ops, [op.metadata[0] for op in ops]
