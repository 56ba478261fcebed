"""The envelope shape of one raw reply (contract §8, vectors.md §8-§9), judged
while the history is read (``checkers.history`` calls ``envelope_problems``
with the raw reply in hand); ``checkers.invariants.envelopes`` reports what it
found. Codes, exits, states and messages come from ``backends.contract.codes``.
"""

from __future__ import annotations

from backends.contract import codes as C
from checkers.wire import epoch_int, instant_ms, obj

SURFACE = {
    "capabilities": ("work-claim", "capabilities"),
    "read": ("work-claim", "read"),
    "acquire": ("work-claim", "acquire"),
    "renew": ("work-claim", "renew"),
    "release": ("work-claim", "release"),
    "publish": ("ledger-publication", "publish-claimed"),
    "publication-read": ("ledger-publication", "read"),
    "legacy-create": ("ledger-mutation", "create-v1"),
    "legacy-transition": ("ledger-mutation", "transition-v1"),
}
PUBLICATION_FS = frozenset(("publish", "publication-read"))
BASE = frozenset(("ok", "namespace", "command", "contract_version"))
RESULT_MEMBERS = {
    "read": {"read_back"},
    "acquire": {"claim", "read_back"},
    "renew": {"claim", "read_back"},
    "release": {"released_claim", "read_back"},
    "publish": {"ledger_namespace", "item_id", "committed_revision", "claim_fence", "claim_read_back"},
    "publication-read": {"operation_id", "ledger_namespace", "item_id", "operation_digest", "outcome"},
    "capabilities": {"backend", "operations"},
}
READ_BACK = frozenset(("ledger_namespace", "item_id", "observed_at", "last_epoch", "active"))
CLAIM = frozenset(("owner_id", "epoch", "issued_at", "expires_at"))
FENCE = frozenset(("ledger_namespace", "item_id", "owner_id", "epoch"))
OP_TUPLE = frozenset(("operation_id", "ledger_namespace", "item_id"))
DETAILS = {
    C.Code.CLAIM_HELD: READ_BACK, C.Code.CLAIM_CONFLICT: READ_BACK, C.Code.CLAIM_EXPIRED: READ_BACK,
    C.Code.EPOCH_EXHAUSTED: READ_BACK, C.Code.ACTIVE_CLAIM_WRITE_REFUSED: READ_BACK,
    C.Code.CLAIMED_ITEM_WRITE_REFUSED: READ_BACK,
    C.Code.CLOCK_FLOOR_PERSISTENCE_FAILED: frozenset(("ledger_namespace", "item_id")),
    C.Code.CLAIM_FENCE_REJECTED: frozenset(("ledger_namespace", "item_id", "observed_at", "reason", "supplied_owner_id",
                                            "supplied_epoch", "active_owner_id", "active_epoch")),
    C.Code.CAPABILITY_UNAVAILABLE: frozenset(("reason",)),
    C.Code.PUBLICATION_OUTCOME_UNKNOWN: OP_TUPLE,
    C.Code.OPERATION_NOT_FOUND: OP_TUPLE,
    C.Code.LEDGER_REVISION_CONFLICT: frozenset(("ledger_namespace", "item_id", "expected_revision", "actual_revision")),
    C.Code.IDEMPOTENCY_CONFLICT: frozenset(("operation_id", "expected_operation_digest", "actual_operation_digest")),
    C.Code.CANDIDATE_DIGEST_MISMATCH: frozenset(("operation_id",)),
}
FENCE_REASONS = frozenset(("ledger-namespace-mismatch", "item-id-mismatch", "no-active-claim", "owner-mismatch",
                           "epoch-mismatch", "claim-expired"))
#: publication codes that may come before the operation_id is accepted / read
OPERATION_ID_OPTIONAL = frozenset((C.Code.INVALID_REQUEST, C.Code.CAPABILITY_UNAVAILABLE,
                                   C.Code.CANDIDATE_DIGEST_MISMATCH))
_SUCCESS_MEMBERS = {f: frozenset(BASE | ({"result"} if f == "capabilities" else {"state", "result"})
                                 | ({"operation_id"} if f in PUBLICATION_FS else set())) for f in SURFACE}
_ERROR_MEMBERS = frozenset(BASE | {"state", "error"})
_ERROR_MEMBERS_OID = _ERROR_MEMBERS | {"operation_id"}
_ERROR_PARTS = frozenset(("code", "message", "details"))
_OUTCOME = frozenset(("exit", "stdout"))
RESULT_MEMBERS = {f: frozenset(m) for f, m in RESULT_MEMBERS.items()}
_messages: dict = {}


def _message(code: str, cmd: str) -> str:
    got = _messages.get((code, cmd))
    if got is None:
        got = _messages[(code, cmd)] = C.message_for(code, cmd)
    return got


#: a problem that is the §2 rule, not a shape rule: it gets its own anomaly type
OTHER_TUPLE = "the reply names another tuple"


def envelope_problems(f, ex, env, req: dict) -> list[str]:
    """Every way the reply ``env`` (exit ``ex``) to the request ``req`` of op
    ``f`` deviates from the contract's envelope shape (the raw records)."""
    if f not in SURFACE or not isinstance(env, dict):
        return []
    ns, cmd = SURFACE[f]
    p: list[str] = []
    if env.get("namespace") != ns or env.get("command") != cmd:
        p.append(f"namespace/command are {env.get('namespace')!r}/{env.get('command')!r}, expected {ns!r}/{cmd!r}")
    if env.get("contract_version") != 1 or isinstance(env.get("contract_version"), bool):
        p.append(f"contract_version is {env.get('contract_version')!r}, not 1")
    _same_tuple(p, env, req)
    want_oid = f in PUBLICATION_FS
    ok = env.get("ok")
    if ok is True:
        if ex != 0:
            p.append(f"ok is true but exit is {ex}")
        _exact(p, "envelope", env, _SUCCESS_MEMBERS[f])
        if f != "capabilities" and env.get("state") != "committed":
            p.append(f"success state is {env.get('state')!r}, not 'committed'")
        if want_oid and env.get("operation_id") != req.get("operation_id"):
            p.append("top-level operation_id does not echo the request")
        _result(p, f, obj(env.get("result")))
        return p
    if ok is not False:
        p.append(f"ok is {ok!r}, not a boolean")
        return p
    err = env.get("error")
    members = _ERROR_MEMBERS
    code = err.get("code") if isinstance(err, dict) else None
    if want_oid and ("operation_id" in env or code not in OPERATION_ID_OPTIONAL):
        members = _ERROR_MEMBERS_OID
        if env.get("operation_id") != req.get("operation_id") and f == "publish":
            p.append("top-level operation_id does not echo the request")
    _exact(p, "error envelope", env, members)
    if not isinstance(err, dict):
        p.append("error is not an object")
        return p
    _exact(p, "error", err, _ERROR_PARTS)
    if code not in C.EXIT:
        p.append(f"unknown error code {code!r}")
        return p
    if ex != C.EXIT[code]:
        p.append(f"code {code} requires exit {C.EXIT[code]}, got {ex}")
    if env.get("state") != C.STATE[code]:
        p.append(f"code {code} requires state {C.STATE[code]!r}, got {env.get('state')!r}")
    if code == C.Code.INVALID_REQUEST:
        if not isinstance(err.get("message"), str) or not err.get("message"):
            p.append("invalid-request has no message")
    elif err.get("message") != _message(code, cmd):
        p.append(f"message for {code} is {err.get('message')!r}, expected {_message(code, cmd)!r}")
    details = err.get("details")
    want = DETAILS.get(code)
    if code == C.Code.LEDGER_NAMESPACE_UNBOUND:
        want = frozenset(("ledger_namespace",)) if f == "publish" else frozenset(("ledger_namespace", "item_id"))
    if want is not None:
        if not isinstance(details, dict):
            p.append(f"{code} details are not an object")
            return p
        _exact(p, f"{code} details", details, want)
        if want is READ_BACK:
            _read_back(p, "details", details)
        if code == C.Code.CLAIM_FENCE_REJECTED and details.get("reason") not in FENCE_REASONS:
            p.append(f"unknown fence rejection reason {details.get('reason')!r}")
        if code == C.Code.CAPABILITY_UNAVAILABLE and details.get("reason") != "advisory-capability":
            p.append("capability-unavailable details.reason is not 'advisory-capability'")
    if code == C.Code.CLAIM_STORE_UNAVAILABLE and not isinstance(obj(details).get("reason"), str):
        p.append("claim-store-unavailable details carry no reason")
    return p


def _same_tuple(p: list[str], env: dict, req: dict) -> None:
    """Every tuple a reply names (read-backs, details, result) is the request's."""
    ns, item = req.get("ledger_namespace"), req.get("item_id")
    if type(ns) is not str or type(item) is not str:
        return
    r, err = env.get("result"), env.get("error")
    parts = []
    if type(r) is dict:
        parts = [("result.read_back", r.get("read_back")), ("result.claim_read_back", r.get("claim_read_back")),
                 ("result", r if "item_id" in r else None)]
    elif type(err) is dict and type(err.get("details")) is dict and "item_id" in err["details"] \
            and err.get("code") != "ledger-invalid":   # step 5 details are validation issues, not a tuple (§6)
        parts = [("error.details", err["details"])]
    for where, part in parts:
        if type(part) is dict and (part.get("item_id") != item or part.get("ledger_namespace") != ns):
            p.append(f"{OTHER_TUPLE}: {where} is ({part.get('ledger_namespace')}, {part.get('item_id')}), "
                     f"the request's is ({ns}, {item})")


def _exact(p: list[str], what: str, value: dict, members: frozenset) -> None:
    if value.keys() != members:
        have = set(value)
        extra, missing = sorted(have - members), sorted(members - have)
        p.append(f"{what} members differ (extra {extra}, missing {missing})")


def _claim(p: list[str], what: str, c: object) -> None:
    if not isinstance(c, dict):
        p.append(f"{what} is not an object")
        return
    _exact(p, what, c, CLAIM)
    if not epoch_int(c.get("epoch")):
        p.append(f"{what}.epoch {c.get('epoch')!r} is not an active epoch")
    if instant_ms(c.get("issued_at")) is None:
        p.append(f"{what}.issued_at {c.get('issued_at')!r} is not an instant")
    if instant_ms(c.get("expires_at")) is None:
        p.append(f"{what}.expires_at {c.get('expires_at')!r} is not an instant")


def _read_back(p: list[str], what: str, rb: object) -> None:
    if not isinstance(rb, dict):
        p.append(f"{what} is not an object")
        return
    _exact(p, what, rb, READ_BACK)
    if instant_ms(rb.get("observed_at")) is None:
        p.append(f"{what}.observed_at {rb.get('observed_at')!r} is not an instant")
    if epoch_int(rb.get("last_epoch")) is None:
        p.append(f"{what}.last_epoch {rb.get('last_epoch')!r} is not a canonical epoch")
    act = rb.get("active")
    if act is not None:
        _claim(p, f"{what}.active", act)
        if isinstance(act, dict) and act.get("epoch") != rb.get("last_epoch"):
            p.append(f"{what}.active.epoch differs from last_epoch")


def _result(p: list[str], f: str, r: dict) -> None:
    want = RESULT_MEMBERS.get(f)
    if want is None:
        return
    _exact(p, "result", r, want)
    if "read_back" in want:
        _read_back(p, "result.read_back", r.get("read_back"))
    if "claim" in want:
        _claim(p, "result.claim", r.get("claim"))
    if "released_claim" in want:
        _claim(p, "result.released_claim", r.get("released_claim"))
    if f == "publish":
        _read_back(p, "result.claim_read_back", r.get("claim_read_back"))
        if not isinstance(r.get("claim_fence"), dict) or r["claim_fence"].keys() != FENCE:
            p.append("result.claim_fence is not the four-member fence")
    if f == "publication-read":
        outcome = r.get("outcome")
        if not isinstance(outcome, dict) or outcome.keys() != _OUTCOME:
            p.append("result.outcome is not {exit, stdout}")
