"""How much a run's verdict rests on: flags for thin evidence.

A valid verdict says no checker found a violation in what the run did; it
says little when the run did little. ``evidence(ops, time_limit_s,
workload_coverage)`` measures three things from the history and the coverage
table and names each that is thin (``thin``: one plain sentence each):

* the share of client replies that were ``claim-store-unavailable`` (the
  store refused to decide: such a reply judges no request, contract §8; a
  docker run was VALID with 75 % of them);
* stalls: stretches of the workload (its first ``time_limit_s`` seconds)
  in which no client op completed;
* contract paths exercised (completed at least once) of those the workload
  knows.

Stored in ``results.json`` (``evidence``) by the runner, shown by the console
summary and report.html; a thin flag never changes the verdict.
"""

from __future__ import annotations

from backends.contract import Code

NEMESIS = "nemesis"
#: a share of store-unavailable replies above this is thin evidence
UNAVAILABLE_SHARE = 0.25
#: a stretch with no completed client op at least this long is a stall
STALL_S = 5.0
#: fewer paths exercised than this share of the known ones is thin evidence
PATHS_SHARE = 0.5
SHOWN_STALLS = 3


def _code(op: dict) -> str | None:
    env = (op.get("value") or {}).get("envelope") if isinstance(op.get("value"), dict) else None
    err = env.get("error") if isinstance(env, dict) else None
    return err.get("code") if isinstance(err, dict) else None


def _stalls(done_s: list[float], limit_s: float) -> list[tuple[float, float]]:
    """The gaps of at least ``STALL_S`` in ``[0, limit_s]`` between completions."""
    edges = [0.0] + [t for t in sorted(done_s) if t <= limit_s] + [limit_s]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b - a >= STALL_S]


def evidence(ops: list[dict], time_limit_s: float | None, workload_coverage: dict | None) -> dict:
    """The measures and the ``thin`` sentences (empty: nothing thin)."""
    done = [o for o in ops if o.get("type") in ("ok", "fail", "info") and o.get("process") != NEMESIS
            and isinstance(o.get("time"), (int, float))]
    unavailable = sum(1 for o in done if _code(o) == Code.CLAIM_STORE_UNAVAILABLE)
    share = unavailable / len(done) if done else 0.0
    limit = float(time_limit_s) if isinstance(time_limit_s, (int, float)) and time_limit_s > 0 else None
    stalls = _stalls([o["time"] / 1e9 for o in done], limit) if limit is not None else []
    rows = {k: v for k, v in (workload_coverage or {}).items() if isinstance(v, dict)}
    exercised = sum(1 for v in rows.values() if (v.get("completed") or 0) > 0)
    never = [k for k, v in rows.items() if v.get("requested") and not v.get("completed")]
    thin = []
    if done and share > UNAVAILABLE_SHARE:
        thin.append(f"{share:.0%} of {len(done)} replies were {Code.CLAIM_STORE_UNAVAILABLE} (the store decided nothing "
                    "for them)")
    if stalls:
        longest = max(b - a for a, b in stalls)
        where = ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in stalls[:SHOWN_STALLS])
        thin.append(f"no op completed for {longest:.1f} s ({len(stalls)} stall(s) of {STALL_S:g} s or more: {where})")
    if rows and exercised < PATHS_SHARE * len(rows):
        thin.append(f"only {exercised} of {len(rows)} contract paths were exercised")
    if never:
        thin.append(f"requested paths never completed: {', '.join(never[:5])}" + (" ..." if len(never) > 5 else ""))
    return {"replies": len(done), "store_unavailable": unavailable, "store_unavailable_share": round(share, 3),
            "stalls_s": [[round(a, 1), round(b, 1)] for a, b in stalls],
            "paths_exercised": exercised, "paths_known": len(rows), "thin": thin}


def summary_line(ev: dict) -> str:
    """One line: ``THIN: ...`` or the measures that are fine."""
    if ev.get("thin"):
        return "THIN: " + "; ".join(ev["thin"])
    paths = (f", {ev.get('paths_exercised')} of {ev.get('paths_known')} paths exercised"
             if ev.get("paths_known") else "")
    return (f"{ev.get('store_unavailable_share', 0):.0%} store-unavailable of {ev.get('replies', 0)} replies, "
            f"no stall of {STALL_S:g} s or more{paths}")
