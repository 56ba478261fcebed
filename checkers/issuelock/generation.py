"""``lock_generation`` strictly increasing per lock (spec: "monotonic; every write advances it").

Per issue, over every lock a reply showed in full and the seeded locks:

* ``duplicate-generation``: two writes reported the same generation, or two
  different lock records were seen at one generation;
* ``generation-not-advanced``: an ok write's generation is not above the
  generation it reports replacing (``prior``), nor above every write that
  completed before it was invoked, nor above the seeded lock;
* ``generation-regressed``: a read (inspect, recovery evidence) that started
  after a write completed shows an older generation;
* ``final-generation-regressed``: the final export holds a generation below
  the highest one any write reported.
"""

from __future__ import annotations

from backends.issuelock.contract import reader as R
from checkers.issuelock._model import Model, add, findings

RULE = "The contract: lock_generation is monotonic; every write advances it"


def check(history: list[dict], ctx: dict) -> dict:
    m = Model(history, ctx)
    f = findings()
    n_writes = 0
    for key, ops in m.by_key.items():
        seen: dict[int, tuple[dict, object]] = {}
        seed = m.seeded.get(key)
        if seed is not None:
            seen[R.lock_generation(seed)] = (seed, None)
        done: list = []   # ok writes in completion order: (completion position, generation, op)
        for lo in ops:
            for lock in (lo.lock, lo.env.get("prior_lock")):
                if not isinstance(lock, dict):
                    continue
                g = R.lock_generation(lock)
                if g in seen and seen[g][0] != lock:
                    other = seen[g][1]
                    add(f, RULE, "duplicate-generation",
                        f"{key}: two different locks at generation {g} ({'seed' if other is None else other.f} and "
                        f"{lo.f})", (other.ops if other else []) + lo.ops, generation=g)
                seen.setdefault(g, (lock, lo))
            w = lo.wrote
            if w is None:
                continue
            n_writes += 1
            g = R.lock_generation(w)
            prior = (lo.env.get("prior") or {}).get("lock_generation")
            if isinstance(prior, int) and g <= prior:
                add(f, RULE, "generation-not-advanced",
                    f"{key}: {lo.f} wrote generation {g} over the generation {prior} it replaced", lo.ops)
            if seed is not None and g <= R.lock_generation(seed):
                add(f, RULE, "generation-not-advanced",
                    f"{key}: {lo.f} wrote generation {g}, not above the seeded generation "
                    f"{R.lock_generation(seed)}", lo.ops)
            done.append((lo.op.cp, g, lo))
        done.sort(key=lambda x: x[0])
        for lo in ops:
            g_obs = None
            if lo.wrote is not None:
                g_obs = R.lock_generation(lo.wrote)
            elif lo.f == "inspect" and lo.type == "ok":
                g_obs = R.lock_generation(lo.lock) if lo.lock is not None else 0
            if g_obs is None:
                continue
            before = [(g, w) for cp, g, w in done if cp < lo.op.ip and w is not lo]
            if not before:
                continue
            g_max, w_max = max(before, key=lambda x: x[0])
            if lo.wrote is not None and g_obs <= g_max:
                add(f, RULE, "generation-not-advanced",
                    f"{key}: {lo.f} wrote generation {g_obs} after {w_max.f} had completed with generation {g_max}",
                    w_max.ops + lo.ops)
            elif lo.wrote is None and g_obs < g_max:
                add(f, RULE, "generation-regressed",
                    f"{key}: inspect saw generation {g_obs} after {w_max.f} had completed with generation {g_max}",
                    w_max.ops + lo.ops)
        if m.final is not None and done:
            g_max, w_max = max(((g, w) for _, g, w in done), key=lambda x: x[0])
            final = R.lock_generation(m.final.get(key))
            if final < g_max:
                add(f, RULE, "final-generation-regressed",
                    f"{key}: the final export holds generation {final}, below {w_max.f}'s {g_max}",
                    w_max.ops + [m.final_index])
    if n_writes == 0:
        f.unknown("no write completed: lock_generation was not exercised")
    return f.result({"writes": n_writes})
