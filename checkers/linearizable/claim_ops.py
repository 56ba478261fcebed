"""A claim-chaos ``History`` -> the checker's operations (inputs and outputs as small tuples).

Each client op of ``checkers.history.History`` becomes one ``Operation`` on
the register ``(ledger_namespace, item_id)``. Inputs and outputs are hashable
tuples so the checker can memoize the model's step per (op, state). Call and
return "times" are the op's positions in the history (real-time order is the
order of the file, and positions never tie).

* ``ok`` / ``fail`` completions carry the parsed reply: the decision time the
  backend states IN the reply, the claim record it shows, and what the
  op-specific payload says (``parse_output``).
* ``info`` completions (crash, timeout, lost reply, an outcome the reply says
  is unknown) and ops still open at the end return at +inf with output
  ``UNKNOWN``.
* Ops that can neither change nor reveal state (an ``info`` read, a refusal
  whose reply says nothing changed and shows nothing, e.g. ``invalid-request``
  or ``clock-floor-persistence-failed``) are dropped: they are legal anywhere,
  and an ``unchanged`` reply is taken at its word.

Publication outcomes are compared as *specs* (what the decision was) and as
envelope identities (``Op.env_id``): a spec is
``("ok", committed_revision, last_epoch, owner_id, epoch)``,
``("claim-fence-rejected", reason, active_owner_id, active_epoch)`` or
``("ledger-revision-conflict", expected_revision, actual_revision)``.
"""

from __future__ import annotations

from typing import Any

from checkers.history import BAD, FAIL, OK, History, Op, instant_ms  # noqa: F401 - instant_ms re-exported

from .model import INF, UNKNOWN, Operation

CLAIM_OPS = ("read", "acquire", "renew", "release")
PUBLISH_OPS = ("publish", "publication-read")
CLAIM_CODES = frozenset(("claim-conflict", "claim-held", "claim-expired", "epoch-exhausted"))


def active_tuple(active: dict | None) -> tuple | None:
    """A manifest-shaped active claim dict -> ``(owner_id, epoch, issued_ms, expires_ms)``."""
    if active is None:
        return None
    return (active["owner_id"], int(active["epoch"]), instant_ms(active["issued_at"]),
            instant_ms(active["expires_at"]))


def _complete(a: Any) -> bool:
    """A fully known active tuple (or none)."""
    return a is None or (a is not BAD and None not in a)


def _fence_static(op: Op) -> str | None:
    """The fence rejection decided by the request alone (wrong namespace / item), or None."""
    fk = op.fence_key
    if fk is None or op.key is None:
        return "ledger-namespace-mismatch"
    if fk[0] != op.key[0]:
        return "ledger-namespace-mismatch"
    if fk[1] != op.key[1]:
        return "item-id-mismatch"
    return None


def parse_input(op: Op) -> tuple | None:
    """The register input of ``op``; ``None`` when the request is malformed
    (the backend refuses it before any decision)."""
    f = op.f
    if f == "read":
        return ("read",)
    if f == "acquire":
        if op.owner is None or op.lease is None or op.w_le is None or not _complete(op.w_active):
            return None
        return ("acquire", op.owner, op.lease, op.w_le, op.w_active)
    if f == "renew" or f == "release":
        lease = op.lease if f == "renew" else 0
        if op.owner is None or op.epoch is None or op.exp_expires is None or lease is None:
            return None
        return (f, op.owner, op.epoch, op.exp_expires, lease)
    if f == "publish":
        if None in (op.oid, op.digest, op.exp_rev, op.cand, op.owner, op.epoch):
            return None
        return ("publish", op.oid, op.digest, op.exp_rev, op.cand, _fence_static(op), op.owner, op.epoch)
    if f == "publication-read":
        return None if op.oid is None else ("pread", op.oid)
    return None


def reply_spec(op: Op) -> tuple | None:
    """The outcome spec of a definite publish reply (see the module docstring)."""
    if op.exit == 0:
        a = op.active
        if a is None or a is BAD:
            return ("ok", op.committed, op.le, None, None)
        return ("ok", op.committed, op.le, a[0], a[1])
    if op.code == "claim-fence-rejected":
        reason, _so, _se, owner, epoch = op.fence_details
        return (op.code, reason, owner, epoch)
    if op.code == "ledger-revision-conflict":
        return (op.code, *op.conflict_revisions)
    return None


def revealed_spec(spec: tuple | None) -> tuple | None:
    """``checkers.history.outcome_spec`` (a stored envelope read back) -> a model spec."""
    if spec is None:
        return None
    if spec[0] == "ok":
        _, committed, (le, a), _t = spec
        if a is None or a is BAD:
            return ("ok", committed, le, None, None)
        return ("ok", committed, le, a[0], a[1])
    if spec[0] == "claim-fence-rejected":
        return spec[:4]
    return spec


def parse_output(op: Op) -> tuple | None:
    """A definite reply -> ``(code, t, record, payload)``; ``None`` if it
    changes and reveals nothing (a no-op); ``UNKNOWN`` if it is too malformed
    to say (the envelopes checker judges it)."""
    f, code = op.f, op.code
    rec = (op.le, op.active) if op.le is not None else None
    if rec is not None and (op.le < 0 or not _complete(op.active)):
        return UNKNOWN
    if op.exit == 0:
        if f == "publication-read":
            _oid, dg, ex, env, spec, _code = op.outcome
            if dg is None or ex is None:
                return UNKNOWN
            return ("ok", None, None, (dg, ex == 0, env, revealed_spec(spec)))
        if rec is None or op.t is None:
            return UNKNOWN
        if f == "read":
            return ("ok", op.t, rec, None)
        if f == "publish":
            return ("ok", op.t, rec, (op.committed, op.env_id, reply_spec(op), op.fence_echo))
        if not _complete(op.claim) or op.claim is None:
            return UNKNOWN
        return ("ok", op.t, rec, op.claim)
    if f in CLAIM_OPS and code in CLAIM_CODES:
        return UNKNOWN if rec is None or op.t is None else (code, op.t, rec, None)
    if f == "publish":
        if code == "claim-fence-rejected":
            reason, s_owner, s_epoch, a_owner, a_epoch = op.fence_details
            if op.t is None:
                return UNKNOWN
            return (code, op.t, None, (reason, a_owner, a_epoch, op.env_id, s_owner, s_epoch))
        if code == "ledger-revision-conflict":
            expected, actual = op.conflict_revisions
            return (code, None, None, (actual, op.env_id, expected))
        if code == "idempotency-conflict":
            return (code, None, None, (op.conflict_digests[0], op.env_id))
    if f == "publication-read" and code == "operation-not-found":
        return (code, None, None, None)
    return None  # invalid request, ledger-invalid, capability, unchanged store failures: no change


def to_operation(op: Op) -> Operation | None:
    """One client op as a register operation; ``None`` when it can neither
    change nor reveal a register (see the module docstring)."""
    f = op.f
    if (f not in CLAIM_OPS and f not in PUBLISH_OPS) or op.key is None:
        return None
    inp = parse_input(op)
    if inp is None:
        return None  # a malformed request is refused before any decision
    output: Any = UNKNOWN
    ret = INF
    if op.type == OK or op.type == FAIL:
        output = parse_output(op) if op.exit is not None else UNKNOWN
        if output is None:
            return None
        ret = op.cp
    elif f == "read" or f == "publication-read":
        return None  # an info read proves nothing and changes nothing
    client = op.process
    return Operation(client if isinstance(client, int) else -1, inp, op.ip, output, ret, (op.i, op.c, op.key))


def _count_references(part: list[Operation]) -> list[Operation]:
    """Publication inputs end with how many ops of the register name their
    operation id (the model drops an outcome nobody can ask about any more)."""
    refs: dict = {}
    for o in part:
        if o.input[0] in ("publish", "pread"):
            refs[o.input[1]] = refs.get(o.input[1], 0) + 1
    for o in part:
        if o.input[0] in ("publish", "pread"):
            o.input = (*o.input, refs[o.input[1]])
    return part


def register_operations(history):
    """``(key, [Operation])`` per register, built one register at a time (in
    order of each register's first op). ``Operation.metadata`` is ``(invoke
    index, completion index | None, key)``."""
    by_key: dict = {}
    for op in History.of(history).ops:
        if op.key is not None:
            by_key.setdefault(op.key, []).append(op)
    for key, ops in by_key.items():
        part = [o for o in map(to_operation, ops) if o is not None]
        if part:
            yield key, _count_references(part)

