"""The claims agent loop against the real SQLite engine, in logical time."""

from __future__ import annotations

import collections
from dataclasses import replace

import pytest

from backends.api import FixedClock
from backends.registry import open_backend
from checkers.history import classify
from workloads import scenario
from workloads.claims import ClaimsConfig, claims_workload
from workloads.generator import clients, secs
from workloads.interpreter import simulate

BASE_MS = 1_894_353_330_250


def run_claims(tmp_path, seed=5, workers=3, seconds=10, cfg=None, lose=lambda op: False):
    gen, world = claims_workload(seed, cfg or ClaimsConfig(namespaces=1, items=2))
    clock = FixedClock(BASE_MS)
    backend = open_backend({"backend": "sqlite", "path": str(tmp_path / "c.db"),
                            "namespaces": list(world.namespaces)}, clock)
    backend.store.seed(world.durable())

    def complete(op):
        clock.set(BASE_MS + op["time"] // 1_000_000)
        reply = backend.call(op["f"], op["value"])
        if lose(op):
            return {"type": "info", "error": "reply lost", "latency": 1_000_000}
        return {"type": classify(reply.exit, reply.envelope), "value": reply.to_json(), "latency": 1_000_000}

    h = simulate(clients(gen), seed=seed, workers=workers, complete=complete, time_limit=secs(seconds))
    return h, world, backend


def test_agent_loop_is_read_acquire_renew_publish_release(tmp_path):
    h, world, _ = run_claims(tmp_path, workers=1, seconds=5)
    fs = [o["f"] for o in h if o["type"] == "invoke"]
    assert fs[:5] == ["read", "acquire", "renew", "publish", "release"]
    acquire = next(o for o in h if o["f"] == "acquire" and o["type"] == "invoke")
    assert acquire["value"]["expected"] == {"last_epoch": "0", "active": None}
    assert acquire["value"]["owner_id"] == "agent-p0"
    pub = next(o for o in h if o["f"] == "publish" and o["type"] == "invoke")
    assert pub["value"]["operation_id"] == "pub_agent-p0_0"
    ok = next(o for o in h if o["f"] == "publish" and o["type"] != "invoke")
    assert ok["type"] == "ok", ok


def test_contention_expiry_and_takeover_really_happen(tmp_path):
    h, _, _ = run_claims(tmp_path, workers=3, seconds=10)
    seen = collections.Counter((o["f"], o["type"], ((o.get("value") or {}).get("envelope") or {}).get("error", {}).get("code"))
                               for o in h if o["type"] != "invoke")
    assert seen[("publish", "ok", None)] > 0
    assert seen[("acquire", "fail", "claim-held")] > 0
    assert seen[("renew", "fail", "claim-expired")] + seen[("renew", "fail", "claim-conflict")] > 0


def _held_reads(h):
    """(read completion, the same agent's next invoke) for each ok read that showed a live claim."""
    from workloads.claims import _live_claim

    done = [o for o in h if o["type"] != "invoke" and o["f"] == "read" and o["type"] == "ok"
            and _live_claim(o["value"]["envelope"]["result"]["read_back"])]
    out = []
    for d in done:
        nxt = next((o for o in h if o["index"] > d["index"] and o["type"] == "invoke" and o["process"] == d["process"]),
                   None)
        out.append((d, nxt))
    return out


def test_a_slow_runs_agent_skips_the_acquire_its_read_shows_held(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cfg = ClaimsConfig(namespaces=1, items=2, race_pairs=0)
    h, _, _ = run_claims(tmp_path / "a", workers=3, seconds=10, cfg=cfg)
    h = [dict(o, index=i) for i, o in enumerate(h)]
    assert any(n is not None and n["f"] == "acquire" for _, n in _held_reads(h))   # the default: acquire anyway
    h, _, _ = run_claims(tmp_path / "b", workers=3, seconds=10, cfg=replace(cfg, skip_held=True))
    h = [dict(o, index=i) for i, o in enumerate(h)]
    held = _held_reads(h)
    assert len(held) > 3 and all(n is None or n["f"] == "read" for _, n in held)
    codes = collections.Counter(((o.get("value") or {}).get("envelope") or {}).get("error", {}).get("code")
                                for o in h if o["type"] == "fail" and o["f"] == "acquire")
    assert sum(1 for o in h if o["f"] == "publish" and o["type"] == "ok") > 0
    assert codes["claim-held"] <= 1, codes   # only a claim taken between the read and the acquire


def test_lost_publish_is_read_then_retried_with_the_same_request(tmp_path):
    lost = set()

    def lose(op):
        if op["f"] == "publish" and not lost:
            lost.add(op["value"]["operation_id"])
            return True
        return False

    honest = ClaimsConfig(namespaces=1, items=2, replay_after_info_rate=0, stale_after_loss_rate=0)
    h, _, _ = run_claims(tmp_path, workers=1, seconds=5, lose=lose, cfg=honest)
    invokes = [o for o in h if o["type"] == "invoke"]
    i = next(k for k, o in enumerate(invokes) if o["f"] == "publish")
    first = invokes[i]
    assert invokes[i + 1]["f"] == "publication-read"
    assert invokes[i + 1]["value"]["operation_id"] == first["value"]["operation_id"]
    assert invokes[i + 1]["process"] != first["process"]  # the worker was retired
    # the publish had committed, so the read finds it and no retry is needed
    done = [o for o in h if o["type"] != "invoke" and o["f"] == "publication-read"]
    assert done[0]["type"] == "ok"


def test_same_seed_same_ops(tmp_path):
    a, _, _ = run_claims(tmp_path / "a", seed=11, seconds=4) if (tmp_path / "a").mkdir() is None else None
    b, _, _ = run_claims(tmp_path / "b", seed=11, seconds=4) if (tmp_path / "b").mkdir() is None else None
    strip = lambda h: [(o["time"], o["process"], o["type"], o["f"]) for o in h]
    assert strip(a) == strip(b)


def test_builtin_scenarios_load_and_bad_files_are_one_line_errors(tmp_path):
    assert {"paused-writer", "clock-regression", "response-loss", "restart-aba"} <= set(scenario.builtin())
    assert scenario.load("paused-writer")["nemesis"] == ["pause"]
    bad = tmp_path / "bad.yaml"
    for text in ("- a list", "name: x\ndescription: y\nworkers: -1", "name: x\ndescription: y\nbogus: 1", "a: [unclosed"):
        bad.write_text(text)
        with pytest.raises(ValueError) as e:
            scenario.load(str(bad))
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("committed", [True, False])
def test_after_its_commit_an_agent_verifies_and_goes_on_with_its_hold(tmp_path, committed):
    """Git-backed ledgers (``commit``): the commit of an acknowledged publish
    is followed by ``claim-verify`` when it put the bytes into HEAD (contract
    §6: "The caller commits ... and runs claim-verify"; a program may finalize
    only there), then by what the publish's reply led to (the next revision of
    the same hold, or the release), not by a new cycle that leaves the claim to
    expire (every default Wowbagger run did that: one publish per hold, no
    release). A commit that found its bytes superseded runs no verify."""
    gen, world = claims_workload(5, ClaimsConfig(namespaces=1, items=2, race_pairs=0, commit=True,
                                                 publishes=(2, 2), blind_retry_rate=0, stale_fence_rate=0))
    clock = FixedClock(BASE_MS)
    backend = open_backend({"backend": "sqlite", "path": str(tmp_path / "c.db"),
                            "namespaces": list(world.namespaces)}, clock)
    backend.store.seed(world.durable())

    def complete(op):
        if op["f"] == "commit":   # the cooperating agent's git commit (no Git here: the workload's step is tested)
            return {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "result": {"committed": committed}}},
                    "latency": 1_000_000}
        if op["f"] == "verify":
            assert op["value"] == {"ledger_namespace": world.namespaces[0]} and op["intent"] == "agent:verify"
            return {"type": "ok", "value": {"exit": 0, "envelope": {"ok": True, "result": {"findings": []}}},
                    "latency": 1_000_000}
        clock.set(BASE_MS + op["time"] // 1_000_000)
        reply = backend.call(op["f"], op["value"])
        return {"type": classify(reply.exit, reply.envelope), "value": reply.to_json(), "latency": 1_000_000}

    try:
        h = simulate(clients(gen), seed=5, workers=1, complete=complete, time_limit=secs(6))
    finally:
        backend.close()
    fs = [o["f"] for o in h if o["type"] == "invoke"]
    verify = ["verify"] if committed else []
    expected = ["read", "acquire", "renew", "publish", "commit", *verify, "publish", "commit", *verify, "release"]
    assert fs[:len(expected)] == expected, fs[:len(expected)]


def test_a_cycles_plan_and_a_racers_episode_are_the_same_from_a_config_read_from_yaml():
    """A profile or test.yaml gives ranges and episode lists as lists, not tuples: the seeded plan of a
    cycle and the episode of a racer pair (kept once drawn, since the generator asks for them at every
    op it considers) are the same as from tuples, and a list is no key they fail on."""
    from workloads.claims import plan_cycle
    from workloads.races import EPISODES, episode_of

    tuples = ClaimsConfig()
    lists = ClaimsConfig(work_ms=list(tuples.work_ms), backoff_ms=list(tuples.backoff_ms),
                         publishes=list(tuples.publishes), episodes=list(tuples.episodes))
    plans = [plan_cycle(7, t, c, 12, tuples) for t in range(4) for c in range(30)]
    assert [plan_cycle(7, t, c, 12, lists) for t in range(4) for c in range(30)] == plans
    assert len({p["item"] for p in plans}) > 6 and len({p["work_ms"] for p in plans}) > 60   # drawn, not one value
    plans[0]["item"] = -1                          # a caller's copy: what is kept is not changed by it
    assert plan_cycle(7, 0, 0, 12, tuples)["item"] != -1
    order = [episode_of(7, 0, n, EPISODES, 1) for n in range(3 * len(EPISODES))]
    assert [episode_of(7, 0, n, list(EPISODES), 1) for n in range(3 * len(EPISODES))] == order
    assert order[:len(EPISODES)] != order[len(EPISODES):2 * len(EPISODES)]   # each block its own permutation
