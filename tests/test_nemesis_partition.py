"""Partitions between workers and the PostgreSQL server: the per-worker proxy
refuses or blackholes (holding what follows a COMMIT), a partition run shows
cut-off lease holders and rivals taking over and stays valid on the correct
backend, and the worker-side lease-cache bug is caught."""

from __future__ import annotations

import json
import socket
import time

import pytest

from chaos.commands.test_all import RunRequest, run_one
from chaos.faults.proxy import FaultProxy
from chaos.nemesis.partition import COMMIT_STATEMENT, Routes, cut_off_holders
from pg_fixtures import needs_pg


@pytest.fixture()
def upstream():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    yield srv
    srv.close()


def test_refuse_stops_listening_and_resets_open_connections_accept_heals(upstream):
    p = FaultProxy("127.0.0.1", upstream.getsockname()[1])
    try:
        c = socket.create_connection(("127.0.0.1", p.port))
        upstream.accept()
        p.refuse()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", p.port), timeout=2)
        c.settimeout(2)
        try:
            assert c.recv(1) == b""      # the open connection is cut (RST, or FIN when the abort raced it)
        except ConnectionResetError:
            pass
        p.heal()
        c2 = socket.create_connection(("127.0.0.1", p.port), timeout=2)
        s2, _ = upstream.accept()
        c2.sendall(b"hello")
        assert s2.recv(5) == b"hello"
    finally:
        p.close()


def test_blackhole_after_commit_forwards_the_commit_and_holds_its_reply(upstream):
    p = FaultProxy("127.0.0.1", upstream.getsockname()[1])
    try:
        c = socket.create_connection(("127.0.0.1", p.port), timeout=3)
        s, _ = upstream.accept()
        s.settimeout(3)
        p.blackhole_after = COMMIT_STATEMENT
        c.sendall(b"Q....BEGIN ISOLATION LEVEL READ COMMITTED\x00")   # not a COMMIT statement
        assert b"READ COMMITTED" in s.recv(100)
        s.sendall(b"ok1")
        assert c.recv(3) == b"ok1" and not p.blackhole
        c.sendall(b"Q....COMMIT\x00")
        assert s.recv(100).endswith(b"COMMIT\x00")     # the server got the COMMIT ...
        s.sendall(b"ok2")
        c.settimeout(0.5)
        with pytest.raises(socket.timeout):             # ... its reply is held
            c.recv(3)
        assert p.blackhole and p.blackholed_at is not None
        p.heal()
        c.settimeout(3)
        assert c.recv(3) == b"ok2"                      # TCP would retransmit: delivered at the heal
    finally:
        p.close()


def test_each_slot_reaches_the_server_through_its_own_route(upstream):
    routes = Routes(("127.0.0.1", upstream.getsockname()[1]), 3)
    try:
        specs = [routes.spec_for({"backend": "postgres", "dsn": "host=/tmp/s port=5432 user=postgres"}, t)
                 for t in range(3)]
        ports = {dict(kv.split("=") for kv in s["dsn"].split())["port"] for s in specs}
        assert ports == {str(p.port) for p in routes.proxies} and len(ports) == 3
        routes.cut(1, "refuse")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", routes.proxies[1].port), timeout=2)
        socket.create_connection(("127.0.0.1", routes.proxies[0].port), timeout=2).close()   # the others go on
        routes.heal_all()
        socket.create_connection(("127.0.0.1", routes.proxies[1].port), timeout=2).close()
    finally:
        routes.close()


def _op(i, process, f, typ, epoch=None, item="i1"):
    rb = {"ledger_namespace": "ns", "item_id": item}
    value = {"envelope": {"result": {"read_back": rb, **({"claim": {"epoch": str(epoch)}} if epoch else {})}}}
    return {"index": i, "process": process, "f": f, "type": typ, "value": value}


def test_cut_off_holders_finds_the_takeover_inside_the_window_only():
    nem = lambda i, f, v: {"index": i, "process": "nemesis", "f": f, "type": "ok", "value": v}  # noqa: E731
    history = [_op(0, 1, "acquire", "ok", 1), nem(1, "partition", {"cut": [1]}),
               _op(2, 2, "acquire", "ok", 2), nem(3, "partition-heal", {"healed": [1]}),
               _op(4, 3, "acquire", "ok", 3)]
    found = cut_off_holders(history, workers=4)
    assert [(x["holder"], x["rival"], x["rival_epoch"]) for x in found] == [(1, 2, 2)]
    history[2] = _op(2, 5, "acquire", "ok", 2)      # process 5 runs on slot 1: cut off too, not a rival
    assert cut_off_holders(history, workers=4) == []


def _partition_run(tmp_path, pg, seed: int, scenario: str = "partitioned-holder", factory: str | None = None,
                   nemesis=("partition",), time_limit: float = 10):
    # RunRequest's factory means --backend python; over postgres it goes in as a plain flag. --dsn: the
    # session's server (a fresh schema per run, no initdb per run)
    extra = ["--scenario", scenario, "--dsn", pg.dsn()] + (["--factory", factory] if factory else [])
    return run_one(RunRequest(backend="postgres", nemesis=list(nemesis), seed=seed, time_limit=time_limit, workers=4,
                              store=str(tmp_path / f"s{seed}-{scenario}-{bool(factory)}-{len(nemesis)}"),
                              extra_args=extra))


def _history(out) -> list[dict]:
    return [json.loads(line) for line in open(f"{out.run_dir}/history.jsonl")]


@needs_pg
@pytest.mark.postgres
@pytest.mark.slow
def test_partition_run_on_postgres_cuts_holders_off_while_rivals_take_over_and_stays_valid(tmp_path, pg):
    # every run must be valid with the partition in effect; the takeover inside a cut is timing (at load
    # 10 seed 1 once had none in 10 s): the next seed, at most three, until one run shows it
    for seed in (1, 2, 3):
        out = _partition_run(tmp_path, pg, seed)
        assert out.results["verdict"] == "valid", out.results["notes"]
        assert out.results["fault_coverage"]["partition"]["took_effect"] >= 1
        history = _history(out)
        if cut_off_holders(history, workers=4):
            break
    else:
        raise AssertionError("no lease holder was cut off while a rival took its item, seeds 1-3")
    heals = [o["value"] for o in history if o.get("f") == "partition-heal" and o["type"] == "ok"]
    assert any(max(h.get("held_ms", {}).values(), default=0) >= 1500 for h in heals)   # held past a lease


TRUST_LEASE = "chaos.testing.lease_mutants:open_trust_lease_from_reply"


def _renew_run(tmp_path, pg, seed: int, **kw):
    # 2 s: one cut; the run goes on past its limit until the cut-off holder acted (renew_cut.waiting)
    return _partition_run(tmp_path, pg, seed, scenario="partitioned-renew", time_limit=2, **kw)


def _takeovers(history: list[dict]) -> list[dict]:
    """The renew cuts healed after a rival took the holder's item over."""
    return [o["value"] for o in history if o.get("f") == "partition-heal" and o["type"] == "ok"
            and o["value"].get("rival")]


def _after_takeover(history: list[dict], cut: dict) -> list[dict]:
    """The cut-off holder's completions from its (late) renew reply on."""
    done = [o for o in history if o.get("process") == cut["holder"] and o["type"] != "invoke"
            and o.get("index", 0) > cut["rival"]["index"]]
    return done[:2]


@needs_pg
@pytest.mark.postgres
@pytest.mark.slow
def test_worker_side_lease_cache_bug_is_caught_in_every_seed_by_the_renew_cut(tmp_path, pg):
    """partition_after: renew cuts whoever renews next right after its COMMIT and
    heals once a rival took the item over; the run lasts until the holder acted
    on its late renew reply: the planted bug is caught in every seed, by
    construction (no seed is retried)."""
    for seed in (1, 2, 3):
        out = _renew_run(tmp_path, pg, seed, factory=TRUST_LEASE)
        assert out.results["verdict"] == "invalid", (seed, out.results["notes"])
        stale = out.results["checkers"]["stale_write"]
        assert stale["valid"] is False and any(a["type"] == "stale-fence-accepted" for a in stale["anomalies"])
        cuts = _takeovers(_history(out))
        assert cuts and all(c["took_effect"] and c["held_ms"] >= 800 for c in cuts), (seed, cuts)


@needs_pg
@pytest.mark.postgres
@pytest.mark.slow
def test_the_renew_cut_stays_valid_on_the_correct_backend_and_its_holder_is_fenced_off(tmp_path, pg):
    out = _renew_run(tmp_path, pg, 1)
    assert out.results["verdict"] == "valid", out.results["notes"]
    assert out.results["fault_coverage"]["partition"]["took_effect"] >= 1
    history = _history(out)
    cut = _takeovers(history)[0]
    renew, publish = _after_takeover(history, cut)    # the run did not end before the holder acted
    assert (renew["f"], renew["type"]) == ("renew", "ok")
    assert (publish["f"], publish["type"]) == ("publish", "fail")
    assert publish["value"]["envelope"]["error"]["code"] == "claim-fence-rejected"
