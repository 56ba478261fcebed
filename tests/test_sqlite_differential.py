"""Differential test: random operation sequences give byte-identical replies
and the same final durable state on the reference backend (in memory) and on
the SQLite backend (a real file; restart = close every connection and reopen).

Sequences mix several owners, 2 items x 2 namespaces, acquires against fresh
and stale expectations, renew/release with current and stale claims,
publishes (fresh, replayed, conflicting, stale-fenced), publication reads,
legacy writes, a clock that moves backward and forward, restarts and lost
replies (both backends must commit, then drop the reply)."""

from __future__ import annotations

import json
import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from backends import reference
from backends.api import FixedClock, Hooks, ReplyLost
from backends.sqlite import SqliteBackend, admin
from test_sqlite_support import AFTER, BEFORE, ITEM, ITEM2, NS1, NS2, T0, item_bytes, publish_req, seeded_durable

TUPLES = [(ns, it) for ns in (NS1, NS2) for it in (ITEM, ITEM2)]
OWNERS = ["agent-a", "agent-b", "agent-c"]
OP_IDS = ["pub-1", "pub-2", "pub-3", "pub-4"]
KINDS = ["clock", "read", "acquire", "acquire", "acquire", "renew", "release", "publish", "publish", "publication-read",
         "legacy-create", "legacy-transition", "restart", "lose"]


class LosingHooks(Hooks):
    """Drop the reply of the next committed success when ``armed``."""

    def __init__(self) -> None:
        self.armed = False

    def after_commit(self, op: str, request: dict, reply) -> None:
        if self.armed:
            self.armed = False
            raise ReplyLost(op)


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)  # type-strict: true != 1


def _sorted(durable: dict) -> dict:
    out = dict(durable)
    for key in ("claims", "ledgers"):
        out[key] = sorted(durable[key], key=lambda r: (r["ledger_namespace"], r["item_id"]))
    return out


class Pair:
    """The two backends driven in lock step."""

    def __init__(self, directory: str):
        seed = seeded_durable(TUPLES)
        self.clock = FixedClock(T0)
        self.ref_hooks, self.sql_hooks = LosingHooks(), LosingHooks()
        self.ref = reference.open_backend({"namespaces": [NS1, NS2], "durable": seed}, self.clock, self.ref_hooks)
        path = f"{directory}/claims.db"
        admin.provision(path, [NS1, NS2], name="reference-backend")
        self.sql = SqliteBackend({"path": path}, self.clock, self.sql_hooks)
        self.sql.store.seed(seed)
        self.claims: dict[tuple[str, str], list[dict]] = {t: [] for t in TUPLES}  # every claim ever granted

    def call(self, op: str, request: dict):
        out = []
        for backend in (self.ref, self.sql):
            try:
                reply = backend.call(op, request)
                out.append(("reply", reply.exit, _canon(reply.envelope)))
            except ReplyLost:
                out.append(("lost",))
        assert out[0] == out[1], f"{op} {request}: reference {out[0]} != sqlite {out[1]}"
        event(f"{op}: {'lost' if out[0][0] == 'lost' else out[0][1]}")
        if out[0][0] == "reply" and out[0][1] == 0 and op in ("acquire", "renew"):
            env = json.loads(out[0][2])
            self.claims[(request["ledger_namespace"], request["item_id"])].append(env["result"]["claim"])
        return out[0]

    def current(self, tup) -> dict:
        reply = self.ref.call("read", {"ledger_namespace": tup[0], "item_id": tup[1]})  # reads change nothing
        return reply.envelope["result"]["read_back"]

    def current_bytes(self, tup) -> bytes:
        return self.ref.store.ledgers[tup]


def _step(pair: Pair, data) -> None:
    kind = data.draw(st.sampled_from(KINDS))
    tup = data.draw(st.sampled_from(TUPLES))
    ns, item = tup
    if kind == "clock":
        pair.clock.set(pair.clock.ms + data.draw(st.integers(-90_000, 90_000)))
    elif kind == "restart":
        pair.ref.restart()
        pair.sql.restart()
    elif kind == "lose":
        pair.ref_hooks.armed = pair.sql_hooks.armed = True
    elif kind == "read":
        pair.call("read", {"ledger_namespace": ns, "item_id": item})
    elif kind == "acquire":
        rb = pair.current(tup)
        expected = {"last_epoch": rb["last_epoch"], "active": rb["active"]}
        if data.draw(st.booleans()) and pair.claims[tup]:  # a stale expectation
            old = data.draw(st.sampled_from(pair.claims[tup]))
            expected = {"last_epoch": old["epoch"], "active": data.draw(st.sampled_from([old, None]))}
        pair.call("acquire", {"ledger_namespace": ns, "item_id": item, "owner_id": data.draw(st.sampled_from(OWNERS)),
                              "lease_duration_ms": data.draw(st.sampled_from([1, 30_000, 120_000])),
                              "expected": expected})
    elif kind in ("renew", "release"):
        if not pair.claims[tup]:
            return
        claim = data.draw(st.sampled_from(pair.claims[tup][-3:]))
        req = {"ledger_namespace": ns, "item_id": item, "owner_id": claim["owner_id"], "epoch": claim["epoch"],
               "expected_expires_at": claim["expires_at"]}
        if kind == "renew":
            req["lease_duration_ms"] = data.draw(st.sampled_from([1, 60_000]))
        pair.call(kind, req)
    elif kind == "publish":
        fence_tup = data.draw(st.sampled_from([tup, tup, (NS2 if ns == NS1 else NS1, item)]))
        candidates = pair.claims[fence_tup][-2:] or [{"owner_id": "agent-a", "epoch": "1"}]
        claim = candidates[-1] if data.draw(st.booleans()) else data.draw(st.sampled_from(candidates))
        current = pair.current_bytes(tup)
        if data.draw(st.integers(0, 4)) == 0:
            current = item_bytes(item, BEFORE if current != item_bytes(item, BEFORE) else AFTER)  # stale revision
        candidate = item_bytes(item, data.draw(st.sampled_from([BEFORE, AFTER])))
        req = publish_req(data.draw(st.sampled_from(OP_IDS)), ns, item, claim, current, candidate)
        req["claim_fence"]["ledger_namespace"], req["claim_fence"]["item_id"] = fence_tup
        pair.call("publish", req)
    elif kind == "publication-read":
        pair.call("publication-read", {"operation_id": data.draw(st.sampled_from(OP_IDS)),
                                       "ledger_namespace": ns, "item_id": item})
    else:
        pair.call(kind, {"ledger_namespace": ns, "item_id": item})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_reference_and_sqlite_agree_on_random_histories(data):
    with tempfile.TemporaryDirectory(prefix="sqlite-diff-") as directory:
        pair = Pair(directory)
        try:
            for _ in range(data.draw(st.integers(5, 40), label="steps")):
                _step(pair, data)
            pair.ref_hooks.armed = pair.sql_hooks.armed = False
            assert _canon(_sorted(pair.sql.store.export_durable())) == _canon(_sorted(pair.ref.store.export_durable()))
        finally:
            pair.sql.close()
