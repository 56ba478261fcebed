"""Slow programs: measure the backend's call latency at start and scale the
run's times to it (issue 10; nothing here is tuned for one program).

The defaults of the claims workload (1.5 s leases, 0.1-2 s of work, 8 s op
deadlines, 10 workers, 30 s) fit a backend answering in milliseconds. A
backend whose every call starts a process (0.3 s idle, seconds under load)
would see its leases expire before any work is done, and a run would end
``valid`` having published nothing. So before the workload starts, one worker
host makes a few real calls: ``read`` of a scratch tuple (observational) and
``acquire`` + ``release`` of it (decisions: lock, floor, journal), each timed
end to end. The scratch item is not one of the run's tuples (the checkers
never see it); its calls are listed in ``timing.calls``.

From the slowest decision (``decision_ms``, the max of the timed decisions,
not the median, since contention only makes it worse), when reads show a
process per call (median read above ``PROCESS_MS``):

* the lease grows by ``LEASE_MARGIN`` decisions (renew -> publish -> release
  must fit in it), ``scale = (lease + LEASE_MARGIN * decision) / lease``, and
  the longest work by one decision less: the renew that follows the work is
  itself decided about a decision after the work ends, so a lease still
  expires before its renew about as often as the workload designs (fast: the
  longest work 2 s against a 1.5-s lease, 26%; with the full margin, seed 12
  against Wowbagger: 16 of 53 renews ``claim-expired``) (``scaled_claims``);
* the gaps between faults grow with ``sqrt(scale)`` (``chaos.nemesis._scaled``);
* the op deadline is at least ``DEADLINE_COVERS`` decisions;
* when a read costs more than ``PROCESS_MS`` (the median: a process per call;
  in-process backends answer in a few ms even on a loaded machine), the
  default worker count drops to one agent per core (at least 2, and with the
  racers no more than the default worker count): more CPU-bound processes
  than that only queue behind each other; plus two racer pairs
  (``RACER_THREADS``, ``race_pairs: 2``, as in a fast run;
  ``workloads.races``) on top, so the racers' episodes do not take agents
  that publish. Two pairs, not one: a pair has about one call in flight (most
  of an episode's steps are one role's op), so with one pair a loaded
  machine's 30-s run of a process-per-call program reached only 11-26 of the
  37 episode kinds (the planted bugs' own episodes among those missed,
  ``docs/mutants.md``); the pairs take turns through one rotation, so two
  reach about twice the kinds. One agent per core, not two: an agent calls
  whenever its work is done while a pair waits for each reply, so on a 2-core
  machine whose CLI call costs more CPU than on the one above
  (``benchmarks/cli_call_cost.py``: a compiled CLI read 223 ms of CPU there,
  79 on the other machine) four agents made 151 of a run's 215 calls and the
  pairs reached 15-23 of the 39 kinds in 30 s, 31-39 in 60 s; two agents let
  them reach 39 of 39 in 45 s (control, seeds 1-3, run one after another,
  ``docs/mutants.md`` session 8);
* a forward clock skew moves the durable floor ahead of real time by its
  offset, and until real time catches up every unskewed worker's "now" is the
  floor, frozen: a lease whose holder died (a kill, a lost reply) never expires
  meanwhile. The default offsets (2 min to 1 h) outlast any run, so a run of a
  process-per-call program, whose every fault strands a claim, ended with most
  items held by dead owners (seed 9: 101 of 166 acquires ``claim-held``). Its
  forward and strobe offsets (``clock_offsets``) are whole seconds between
  ``FORWARD_LEASES`` leases: more than one lease, so a skewed worker sees every
  live lease expired and takes it over, and not much more, since every second
  beyond only freezes the other workers' time. A clock fault comes every 9 s or
  so and two in three skew forward: offsets of 4 leases to a quarter of the
  run (15-35 s) kept the agents' namespaces frozen throughout (seed 11: the
  floor ahead of real time in 70-87% of their replies, 103 of 194 agent
  acquires ``claim-held`` by a dead or frozen holder); ``FORWARD_SHARE`` of the
  time limit caps them (long leases). The shortest is at least twice the clock
  nemesis's evidence tolerance (``chaos.nemesis.clock.TOLERANCE_MS``): a
  shorter skew could not be told from an unshifted clock, and its
  ``took_effect`` would be vacuous;
* an agent whose read shows a live claim skips the acquire (``skip_held``,
  ``workloads.claims``): every fault strands a claim until its lease runs out,
  and each refused acquire cost a process (seed 11: 103 of 194 agent acquires
  ``claim-held``, 110 s of the agents' 560);
* the default time limit is ``MAX_TIME_LIMIT_S``: the gaps between faults
  grow only with ``sqrt(scale)``, so a slow run loses a larger share of its
  agent cycles to faults than a fast one does, and needs every second of the
  budget (matching the default run's agent cycles instead gave an idle
  machine's Wowbagger run 121 s, and 20-28 acknowledged publications at load
  10-17 in 140 s).

A value the user set explicitly (``--workers``, ``--time-limit``, a scenario's
``claims``) is kept. ``chaos run --scale K`` skips the measurement and uses
``K``: the recorded command carries ``--scale`` (and the chosen workers and
time limit), so a run reproduces without measuring again. The chosen values
are printed and stored in ``test.yaml`` and ``results.json["timing"]``.
"""

from __future__ import annotations

import os
import statistics
import time

LEASE_MARGIN = 3      # decisions a lease must cover beyond the work: renew, publish, release
DEADLINE_COVERS = 12
PROCESS_MS = 100
RACER_THREADS = 4     # a slow run's two racer pairs, on top of its agents
MAX_TIME_LIMIT_S = 140.0   # with set-up and the final phase, a default run ends within 3 minutes
FORWARD_LEASES = (1.25, 2.5)   # the shortest and longest forward skew, in leases (module docstring)
FORWARD_SHARE = 0.25  # and at most this share of the time limit (real time catches up within the run)


def measure(spec: dict, env: dict, namespace: str, item_id: str, log_path: str, timeout: float = 60.0) -> dict:
    """Time real calls through one worker host (see the module docstring)."""
    from chaos.host import HostClient

    calls: list[dict] = []
    tup = {"ledger_namespace": namespace, "item_id": item_id}
    host = HostClient(spec, env=env, log_path=log_path)
    try:
        def timed(f: str, req: dict):
            t = time.monotonic()
            reply = host.call(f, req, timeout=timeout)
            ms = (time.monotonic() - t) * 1000
            calls.append({"f": f, "ms": round(ms, 1), "exit": reply.exit})
            return reply

        rb = None
        for _ in range(3):
            rb = (timed("read", tup).envelope.get("result") or {}).get("read_back") or rb
        for n in range(2):
            expected = {"last_epoch": (rb or {}).get("last_epoch", "0"), "active": (rb or {}).get("active")}
            owner = f"calibration-{n}"
            got = timed("acquire", dict(tup, owner_id=owner, lease_duration_ms=60_000, expected=expected))
            claim = (got.envelope.get("result") or {}).get("claim")
            if not claim:
                break
            rel = timed("release", dict(tup, owner_id=owner, epoch=claim["epoch"],
                                        expected_expires_at=claim["expires_at"]))
            rb = (rel.envelope.get("result") or {}).get("read_back") or rb
    finally:
        host.close()
    reads = [c["ms"] for c in calls if c["f"] == "read"]
    decisions = [c["ms"] for c in calls if c["f"] != "read"]
    return {"read_ms": round(statistics.median(reads), 1) if reads else None,
            "decision_ms": round(max(decisions), 1) if decisions else None,
            "calls": calls, "scratch": tup}


def choose(measured: dict | None, scale: float | None, *, lease_ms: int, workers_default: int,
           time_limit_default: float) -> dict:
    """The scale and what it implies (``scale`` given: no measurement needed)."""
    decision = (measured or {}).get("decision_ms") or 0.0
    read = (measured or {}).get("read_ms") or 0.0
    slow = read > PROCESS_MS or (scale is not None and scale > 1.0)
    if scale is None:  # only a process-per-call backend is scaled: an in-process one stays put under load too
        scale = max(1.0, round((lease_ms + LEASE_MARGIN * decision) / lease_ms, 2)) if slow else 1.0
    agents = max(2, min(workers_default - RACER_THREADS, os.cpu_count() or 1))
    workers = agents + RACER_THREADS if slow else workers_default
    time_limit = MAX_TIME_LIMIT_S if slow and measured and decision else time_limit_default
    return {"scale": scale, "workers": workers, "time_limit": float(time_limit), "slow": slow,
            "op_timeout_min": round(DEADLINE_COVERS * decision / 1000, 1)}


def scaled_claims(claims: dict, scale: float, defaults) -> dict:
    """``claims`` overrides for ``scale`` (members the user set are kept): the
    lease grows by ``margin = lease * (scale - 1)`` and the longest work by
    that margin less one decision (the renew's own), so a lease still expires
    before its renew about as often as the workload designs while a renewed
    lease covers the calls that follow it;
    two racer pairs; agents skip an acquire their read shows held (the module
    docstring)."""
    out = dict(claims)
    if scale == 1.0:
        return out
    margin = int(round(defaults.lease_ms * (scale - 1)))
    out.setdefault("lease_ms", defaults.lease_ms + margin)
    out.setdefault("race_pairs", RACER_THREADS // 2)
    out.setdefault("skip_held", True)
    if "work_ms" not in out:
        out["work_ms"] = (defaults.work_ms[0], defaults.work_ms[1] + margin - margin // LEASE_MARGIN)
    return out


def clock_offsets(lease_ms: int, time_limit_s: float) -> list[int]:
    """Forward / strobe clock offsets (s) of a slow run (module docstring):
    up to three whole seconds from ``FORWARD_LEASES[0]`` to ``FORWARD_LEASES[1]``
    leases, the shortest at least twice the evidence tolerance, the longest at
    most ``FORWARD_SHARE`` of the time limit (never below the shortest)."""
    from chaos.nemesis.clock import TOLERANCE_MS

    lo = max(-(-2 * TOLERANCE_MS // 1000), -(-int(FORWARD_LEASES[0] * lease_ms) // 1000))
    hi = max(lo, min(-(-int(FORWARD_LEASES[1] * lease_ms) // 1000), int(time_limit_s * FORWARD_SHARE)))
    return sorted({lo, (lo + hi) // 2, hi})
