"""Histories as hard for the linearizability checker as a long real run, and one with a planted violation.

    python benchmarks/hard_history.py --ops 200000 --seed 1 --out DIR [--plant]

``benchmarks/history_gen.py`` drives the reference backend (a correct
contract engine: every reply is a real decision, so the history is
linearizable by construction) with 48 workers over 800 tuples: a few
overlapping ops per item, every partition easy. ``HARD`` is the same agent
loop concentrated the way a long run on a few items is:

* 64 workers on 2 agent items (plus the 6 racer tuples of the universe):
  about 8 overlapping ops on each busy item, 12-15k ops per item at 100k;
* 5-10 % ``info`` ops: replies lost after the call took effect (6 %) and
  workers killed before it ran (4 % of calls), each recovered by a new
  process as the contract says;
* backend restarts, and the clock moving both ways (0.4 % of steps each
  way: back 0.5-10 s, forward 2-20 s) with the clock advancing 0-1 ms a step,
  so decision times tie and cross the order of the calls.

``plant`` turns one ``claim-held`` refusal in the middle of the busiest item
into a takeover (a second owner while the lease was live, the reply built
by ``backends.contract``): a history with exactly one violation, which the
checker must find and explain.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from backends.contract import claim_success, format_epoch, format_instant  # noqa: E402
from benchmarks.history_gen import GenConfig, generate  # noqa: E402
from checkers.linearizable.claim_ops import instant_ms  # noqa: E402

HARD = dict(namespaces=1, items=2, hot=0.0, workers=64, p_lost=0.06, p_crash=0.04, p_restart=0.002,
            p_clock_back=0.004, p_clock_fwd=0.004, step_ms=(0, 1))


def hard_config(ops: int, seed: int) -> GenConfig:
    return GenConfig(ops=ops, seed=seed, **HARD)


def plant(path: str) -> dict:
    """Forge a takeover into ``path`` (a history.jsonl) in place; what was forged."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    recs = [json.loads(line) for line in lines]
    busiest = Counter((r["value"]["ledger_namespace"], r["value"]["item_id"]) for r in recs
                      if r.get("type") == "invoke" and r.get("f") == "acquire").most_common(1)[0][0]
    invokes: dict = {}
    held = []
    for i, r in enumerate(recs):
        if r.get("process") == "nemesis":
            continue
        if r["type"] == "invoke":
            invokes[r["process"]] = r
        elif r["type"] == "fail" and r["f"] == "acquire":
            err = r["value"]["envelope"]["error"]
            req = invokes[r["process"]]["value"]
            if err["code"] == "claim-held" and (req["ledger_namespace"], req["item_id"]) == busiest:
                held.append((i, req, err["details"]))
    if not held:
        raise SystemExit("plant: no claim-held acquire on the busiest item to forge")
    i, req, d = held[len(held) // 2]
    t = instant_ms(d["observed_at"])
    claim = {"owner_id": req["owner_id"], "epoch": format_epoch(int(d["last_epoch"]) + 1),
             "issued_at": format_instant(t), "expires_at": format_instant(t + req["lease_duration_ms"])}
    read_back = {**{k: d[k] for k in ("ledger_namespace", "item_id", "observed_at")},
                 "last_epoch": claim["epoch"], "active": claim}
    reply = claim_success("acquire", {"claim": claim, "read_back": read_back})
    recs[i] = dict(recs[i], type="ok", value={"exit": reply.exit, "envelope": reply.envelope})
    lines[i] = json.dumps(recs[i], ensure_ascii=False, separators=(",", ":")) + "\n"
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(path + ".tmp", path)
    return {"planted": "takeover during a live lease", "index": i, "item": list(busiest)}


def generate_hard(ops: int, seed: int, out_dir: str, planted: bool = False) -> dict:
    info = generate(hard_config(ops, seed), out_dir)
    if planted:
        info["planted"] = plant(os.path.join(out_dir, "history.jsonl"))
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plant", action="store_true", help="forge one takeover during a live lease")
    ap.add_argument("--out", required=True, help="the run directory to write")
    args = ap.parse_args()
    print(json.dumps(generate_hard(args.ops, args.seed, args.out, args.plant)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
