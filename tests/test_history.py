"""The one history type (checkers.history.History): read once, from disk or
from records, paired, parsed one way; the final state split over records."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from test_invariants_support import simulate, standard_scenario

from backends.contract.values import format_instant, parse_instant
from checkers import default_checkers, run_checkers
from checkers.history import BAD, FINAL_CHUNK, History, final_state_records, instant_ms


def _write(tmp_path, records, tail: str = "") -> str:
    path = tmp_path / "history.jsonl"
    with open(path, "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
        f.write(tail)
    return str(path)


def test_reading_the_file_and_the_records_give_the_same_history(tmp_path):
    history, ctx = simulate(3, n_workers=4, steps=300, n_items=2, p_lost=0.1)
    from_disk = History.read(_write(tmp_path, history))
    in_memory = History.of(history)
    keys = ("i", "c", "ip", "cp", "f", "key", "type", "exit", "code", "t", "le", "active", "claim", "oid",
            "digest", "env_id", "det", "definite")
    assert [tuple(getattr(o, k) for k in keys) for o in from_disk.ops] == \
           [tuple(getattr(o, k) for k in keys) for o in in_memory.ops]
    assert list(from_disk.events) == list(in_memory.events)
    assert run_checkers(from_disk, ctx)["valid"] is True


def test_pairing_real_time_order_and_open_ops():
    s, L = standard_scenario()
    h = History.of(s.history)
    assert all(op.cp is not None for op in h.ops)
    order = [(comp, op.i) for comp, op in h.in_order()]
    assert order[:2] == [(False, 0), (True, 0)]  # the first read, invoked then completed
    assert list(h.completed()) == [op for comp, op in h.in_order() if comp]  # completions, in that order
    open_op = s.history + [{"index": len(s.history), "time": 1, "process": 9, "type": "invoke", "f": "read",
                            "value": s.key()}]
    last = History.of(open_op).ops[-1]
    assert last.type == "info" and last.cp is None and last.uncertain and not last.definite
    a, b = h.ops[0], h.ops[1]
    assert a.precedes(b) and not b.precedes(a)


def test_ops_are_parsed_once_into_plain_fields():
    s, L = standard_scenario()
    h = History.of(s.history)
    acq = next(op for op in h.ops if op.f == "acquire" and op.type == "ok")
    claim = L["a_acq"]["value"]["envelope"]["result"]["claim"]
    assert acq.claim == ("agent-a", 1, parse_instant(claim["issued_at"]), parse_instant(claim["expires_at"]))
    assert acq.le == 1 and acq.active == acq.claim and acq.t == parse_instant(claim["issued_at"])
    assert acq.w_le == 0 and acq.w_active is None and acq.owner == "agent-a"
    held = next(op for op in h.ops if op.code == "claim-held")
    assert held.type == "fail" and held.le == 1 and held.active[0] == "agent-a"
    # interning: every op of the tuple shares one key object
    assert len({id(op.key) for op in h.ops if op.key}) == 1


def test_malformed_values_are_none_not_errors():
    recs = [{"index": 0, "time": 0, "process": 1, "type": "invoke", "f": "acquire",
             "value": {"ledger_namespace": "wbns_x", "item_id": "wb_y", "owner_id": 7, "expected": "nope"}},
            {"index": 1, "time": 1, "process": 1, "type": "ok", "f": "acquire",
             "value": {"exit": 0, "envelope": {"ok": True, "result": {"claim": [1], "read_back": {
                 "observed_at": "yesterday", "last_epoch": "01", "active": 3}}}}}]
    op = History.of(recs).ops[0]
    assert op.owner is None and op.w_le is None and op.claim is BAD and op.active is BAD
    assert op.t is None and op.le == -1
    assert History.of(recs).envelope_problems  # the envelopes checker reports it


def test_torn_tail_and_corrupt_lines(tmp_path):
    s, _ = standard_scenario()
    path = _write(tmp_path, s.history, tail='{"index": 99, "proc')
    h = History.read(path)
    assert len(h.ops) == len(History.of(s.history).ops) and "torn last line" in h.problems[0]
    bad = _write(tmp_path, s.history[:3], tail="not json\n")
    try:
        History.read(bad)
    except ValueError as e:
        assert "not JSON" in str(e)
    else:
        raise AssertionError("a corrupt line must be an error when not tolerant")
    assert "not JSON" in History.read(bad, tolerant=True).problems[0]


def test_final_state_is_split_and_merged_compact(tmp_path):
    s, L = standard_scenario()
    durable = L["final"]["value"]["durable"]
    outcomes = durable["publication_outcomes"]
    big = dict(durable, publication_outcomes=[dict(outcomes[i % len(outcomes)], operation_id=f"pub_{i}")
                                              for i in range(2 * FINAL_CHUNK + 5)])
    recs = final_state_records(big)
    assert len(recs) == 3 and [len(r["value"]["durable"]["publication_outcomes"]) for r in recs] == \
        [FINAL_CHUNK, FINAL_CHUNK, 5]
    history = s.history[:-1] + [dict(r, index=len(s.history) - 1 + n, time=0) for n, r in enumerate(recs)]
    h = History.read(_write(tmp_path, history))
    assert len(h.final.outcomes) == 2 * FINAL_CHUNK + 5 and h.final.index == len(s.history) - 1
    assert set(h.final.claims) == set(History.of(s.history).final.claims)
    assert all("value" not in rec for rec in h.nemesis if rec.get("f") == "final-state")  # not kept twice


def test_raw_reads_back_only_the_records_asked_for(tmp_path):
    s, L = standard_scenario()
    h = History.read(_write(tmp_path, s.history))
    want = [L["b_held"]["index"], L["b_held"]["index"] - 1]
    assert h.raw(want) == {i: s.history[i] for i in want}
    assert History.of(s.history).raw(want) == {i: s.history[i] for i in want}
