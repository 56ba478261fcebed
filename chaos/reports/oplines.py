"""One operation as a person reads it: ``p3 acquire(ns=wbns_1111…, item=wb_…GG1R6, ...) -> ok claim(...)``.

The report used to print each op's request and reply as raw JSON, long
digests and all; an anomaly needs the call and what it answered at a glance,
the full records one click away (``html`` keeps them in a ``<details>``).
``call_line`` and ``reply_line`` shorten what carries no meaning at a
glance: SHA-256 digests to their first 8 hex digits, namespaces to 6, item
ids to their last 6 characters, other long strings to 28; the best-known
request members get short names (``ledger_namespace`` -> ``ns``).
"""

from __future__ import annotations

import re

SHA = re.compile(r"^sha256:([0-9a-f]{64})$")
NAMESPACE = re.compile(r"^wbns_([0-9a-f]{32})$")
ITEM = re.compile(r"^wb_([0-9A-Z]{20,})$")
LONG = 28
MAX_LINE = 240

#: request / result member -> its short name on the line
SHORT_KEYS = {"ledger_namespace": "ns", "item_id": "item", "operation_id": "op", "owner_id": "owner",
              "lease_duration_ms": "lease_ms", "expected_revision": "exp_rev", "expected_expires_at": "exp_expires",
              "committed_revision": "rev", "candidate_revision": "cand_rev", "operation_digest": "digest",
              "claim_fence": "fence", "claim_read_back": "read_back"}


def short_text(s: str) -> str:
    m = SHA.match(s)
    if m:
        return f"sha256:{m.group(1)[:8]}…"
    m = NAMESPACE.match(s)
    if m:
        return f"wbns_{m.group(1)[:6]}…"
    m = ITEM.match(s)
    if m:
        return f"wb_…{m.group(1)[-6:]}"
    return s if len(s) <= LONG else s[:LONG - 1] + "…"


def short_value(v, depth: int = 0) -> str:
    if isinstance(v, str):
        return short_text(v)
    if v is None or isinstance(v, bool):
        return {None: "null", True: "true", False: "false"}[v]
    if isinstance(v, dict):
        if depth >= 2:
            return "{…}"
        return "{" + ", ".join(f"{SHORT_KEYS.get(k, k)}: {short_value(x, depth + 1)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        inner = ", ".join(short_value(x, depth + 1) for x in v[:4])
        return f"[{inner}{', …' if len(v) > 4 else ''}]"
    return str(v)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 1] + "…"


def call_line(process, f, request) -> str:
    """``p<process> f(key=value, ...)``."""
    who = f"p{process}" if isinstance(process, int) else str(process)
    if isinstance(request, dict):
        args = ", ".join(f"{SHORT_KEYS.get(k, k)}={short_value(v)}" for k, v in request.items())
    else:
        args = "" if request is None else short_value(request)
    return _clip(f"{who} {f}({args})")


def reply_line(completion: dict | None) -> str:
    """``ok {...}`` / ``fail exit 4 claim-held {details}`` / ``info: <why>`` / ``(no reply)``."""
    if completion is None:
        return "(no reply: open at the end of the history)"
    typ = str(completion.get("type"))
    value = completion.get("value") if isinstance(completion.get("value"), dict) else {}
    env = value.get("envelope") if isinstance(value.get("envelope"), dict) else None
    bits = [typ]
    if value.get("exit") not in (None, 0):
        bits.append(f"exit {value['exit']}")
    if env is not None:
        err = env.get("error") if isinstance(env.get("error"), dict) else None
        if err is not None:
            bits.append(str(err.get("code")))
            if err.get("details"):
                bits.append(short_value(err["details"]))
        elif isinstance(env.get("result"), dict):
            bits.append(short_value(env["result"]))
    text = " ".join(bits)
    return _clip(f"{text}: {completion['error']}" if completion.get("error") else text)


def op_line(process, f, request, completion: dict | None) -> str:
    """``call -> reply``."""
    return f"{call_line(process, f, request)} -> {reply_line(completion)}"
