"""``chaos repro RUN``: a finding of a deterministic run as a standalone script (issue #31 item 3).

For a Python-class backend (``--backend python`` or ``sqlite``, whose class is
``backends.sqlite:open_backend``) the script calls the class as its users do
(``repro_script.py``: the factory, then ``backend.call`` per command), on a
fresh store seeded as the run's was, one call at a time, each decided at the
instant the run's reply says it was (its ``observed_at``). The calls are the
run's completed calls up to the finding's; delta debugging drops every call
not cited by the finding's anomaly while each cited call still gets the reply
the run recorded (those replies are what the checker judged as breaking the
rule). The script is kept only when it shows the finding on three runs out
of three; otherwise the output says why (the finding needs an interleaving
inside calls, or a killed call's partial effect, which one-at-a-time calls
cannot give) and no script is written. A black-box program's finding
(``--backend external``) is written as plain program calls by
``chaos.explore.blackbox``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

SCRIPT = os.path.join(os.path.dirname(__file__), "repro_script.py")
#: backends whose class this module can call directly; their factory
FACTORIES = {"sqlite": "backends.sqlite:open_backend"}
RUNS_TO_KEEP = 3


class NotReproducible(Exception):
    """One line: why no standalone script could be made for this finding."""


def findings(results: dict) -> list[tuple[str, str, dict]]:
    """(id, checker, anomaly) of every anomaly of an invalid checker, in shrink's preference order."""
    from chaos.shrink import failing_invariants

    out = []
    for checker in failing_invariants(results):
        for a in results["checkers"][checker].get("anomalies") or []:
            fid = f"{checker}-{a.get('type', 'anomaly')}"
            if fid not in {f for f, _, _ in out}:
                out.append((fid, checker, a))
    return out


def decided_at(op: dict) -> int:
    """The ms a call was decided at: its reply's ``observed_at`` (the backend's own word), else the
    worker's wall clock at the reply."""
    def find(x):
        if isinstance(x, dict):
            if isinstance(x.get("observed_at"), str):
                return x["observed_at"]
            for v in x.values():
                got = find(v)
                if got:
                    return got
        return None

    stamp = find(op.get("value"))
    if stamp:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    return int(op["wall_ms"])


def calls_of(ops: list[dict], cited: set[int]) -> list[dict]:
    """The completed client calls up to the last cited one, in completion order (the history's)."""
    invoked: dict = {}
    calls = []
    last = max(cited)
    for op in ops:
        if op["index"] > last:
            break
        if not isinstance(op.get("process"), int):
            continue
        if op["type"] == "invoke":
            invoked[op["process"]] = op
        elif op["type"] in ("ok", "fail") and op["process"] in invoked:
            inv = invoked.pop(op["process"])
            calls.append({"f": op["f"], "value": inv["value"], "at_ms": decided_at(op), "exit": op["value"]["exit"],
                          "envelope": op["value"]["envelope"], "cited": bool({inv["index"], op["index"]} & cited),
                          "index": op["index"]})
    return calls


def chosen_finding(run_dir: str, finding: str | None, findings_of, not_deterministic: str) -> tuple:
    """(cfg, results, (id, checker, anomaly), ops, cited): the stored run's finding ``finding`` (the first
    without one) and the history entries it cites, each a call; ``NotReproducible`` with the reason else."""
    from chaos.shrink import load_run

    cfg, results, _ = load_run(run_dir)
    if not cfg.get("deterministic"):
        raise NotReproducible(not_deterministic)
    found = findings_of(results)
    if not found:
        raise NotReproducible(f"the run found nothing (verdict {results.get('verdict')})")
    chosen = [f for f in found if finding in (None, f[0])]
    if not chosen:
        raise NotReproducible(f"no finding {finding!r}; the run's: {', '.join(f for f, _, _ in found)}")
    fid = chosen[0][0]
    cited = {int(i) for i in chosen[0][2].get("ops") or [] if isinstance(i, int)}
    if not cited:
        raise NotReproducible(f"{fid}: its anomaly cites no calls")
    with open(os.path.join(run_dir, "history.jsonl")) as f:
        ops = [json.loads(line) for line in f if line.strip()]
    # a script of calls shows a finding only when all its evidence is calls: one that cites the final
    # durable state or a fault (e.g. a floor the store lost) would print SHOWN on a correct program too
    beyond = sorted(i for i in cited if i >= len(ops) or not isinstance(ops[i].get("process"), int))
    if beyond:
        what = ", ".join(f"#{i} {ops[i].get('f') if i < len(ops) else '?'}" for i in beyond[:3])
        raise NotReproducible(f"{fid}: its evidence includes history entries that are not calls ({what}); a "
                              "script of calls cannot show it (not built yet)")
    return cfg, results, chosen[0], ops, cited


def script_data(run_dir: str, finding: str | None) -> dict:
    from chaos.runner import RunConfig
    from chaos.shrink import _fields
    from chaos.workload_kinds import workload_kind

    cfg, results, (fid, _, anomaly), ops, cited = chosen_finding(
        run_dir, finding, findings, "not a deterministic run: its calls' timing is not recorded exactly (chaos shrink it)")
    factory = cfg.get("factory") if cfg["backend"] == "python" else FACTORIES.get(cfg["backend"])
    if not factory:
        raise NotReproducible(f"--backend {cfg['backend']}: a standalone script for this backend is not built yet")
    run_cfg = RunConfig(**_fields(cfg))
    kind = workload_kind(run_cfg)
    _, world = kind.build(run_cfg)
    return judge_of(cfg, results), {"finding": fid, "explanation": anomaly.get("explanation", ""), "factory": factory,
            "namespaces": list(kind.namespaces(world)), "seed": kind.durable(world), "calls": calls_of(ops, cited)}


def judge_of(cfg: dict, results: dict):
    """``judge(history) -> {checker: anomaly types}``: the suite's checkers of the run's workload, as the
    run configured them, on a history of the caller's making (before any known deviation is applied)."""
    from chaos.runner import RunConfig
    from chaos.shrink import _fields
    from chaos.workload_kinds import workload_kind

    run_cfg = RunConfig(**_fields(cfg))
    kind = workload_kind(run_cfg)
    _, world = kind.build(run_cfg)
    ctx = kind.ctx(run_cfg, world, results.get("capabilities") or {})

    def judge(history: list[dict]) -> dict:
        merged = kind.check(history, ctx)
        return {name: {a.get("type") for a in r.get("anomalies") or [] if isinstance(a, dict)}
                for name, r in (merged.get("checkers") or {}).items() if isinstance(r, dict) and r.get("valid") is False}
    return judge


_REPLAY: list = []
#: where the search's replays keep their stores: tmpfs when there is one (each commit's fsync
#: costs nothing there, and a search runs hundreds of replays)
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _shows(data: dict) -> bool:
    """The script's own replay, in this process (the search's test): one definition, the script's."""
    if not _REPLAY:
        namespace: dict = {"__name__": "repro"}
        with open(SCRIPT) as f:
            exec(compile(f.read(), SCRIPT, "exec"), namespace)
        _REPLAY.append(namespace["replay"])
    return _REPLAY[0](data, quiet=True, tmp_root=FAST_TMP)


def _tuple(call: dict):
    v = call["value"]
    return (v.get("ledger_namespace"), v.get("item_id")) if isinstance(v, dict) else None


def judged(data: dict, calls: list[dict], judge) -> bool:
    """Do ``calls`` alone, one at a time in this order with the run's replies, break the finding's
    rule by the suite's own checker (``judge(history) -> anomaly types per checker``)?"""
    checker, _, anomaly = data["finding"].partition("-")
    ops, t = [], 0
    for n, c in enumerate(calls):
        ops.append({"index": len(ops), "process": n, "type": "invoke", "f": c["f"], "value": c["value"], "time": t})
        ops.append({"index": len(ops), "process": n, "type": "ok" if c["exit"] == 0 else "fail", "f": c["f"],
                    "value": {"exit": c["exit"], "envelope": c["envelope"]}, "time": t + 1})
        t += 2
    return anomaly in judge(ops).get(checker, ())


def minimal_calls(data: dict, judge) -> dict:
    """ddmin over the uncited calls: the fewest with which every kept call gets the run's reply when
    replayed one at a time and the suite's checker still judges those calls as breaking the rule
    (first without the calls on other items, which a one-item finding seldom needs)."""
    cited = [c for c in data["calls"] if c["cited"]]
    others = [c for c in data["calls"] if not c["cited"]]

    def ok(keep: list) -> bool:
        ids = {id(c) for c in keep}
        calls = [c for c in data["calls"] if c["cited"] or id(c) in ids]
        return judged(data, calls, judge) and _shows(dict(data, calls=calls))

    same_items = [c for c in others if _tuple(c) in {_tuple(x) for x in cited}]
    if ok(same_items):
        others = same_items
    elif not ok(others):
        raise NotReproducible("replayed one call at a time, the calls do not get the run's replies, or their "
                              "replies alone do not break the rule: the finding needs an interleaving inside "
                              "calls, a killed call's partial effect, or calls the run had overlap")
    n = 2
    while others:
        chunks = [others[i::n] for i in range(n) if others[i::n]]
        for c in chunks:
            rest = [x for x in others if all(x is not y for y in c)]
            if ok(rest):
                others, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(others):
                break
            n = min(len(others), 2 * n)
    keep = {id(c) for c in others} | {id(c) for c in cited}
    return dict(data, calls=[c for c in data["calls"] if id(c) in keep])


def write(run_dir: str, finding: str | None = None, python: str | None = None) -> dict:
    """Write RUN/repro/<finding>/{repro.sh, data.json, README.md} after three runs that show it;
    without ``finding``, for the first of the run's findings that a script can show."""
    if finding is None:
        from chaos.shrink import load_run

        reasons = []
        for fid, _, _ in findings(load_run(run_dir)[1]):
            try:
                return write(run_dir, fid, python)
            except NotReproducible as e:
                reasons.append(f"{fid}: {e}")   # each finding's own reason, named (they often share one)
        if reasons:
            raise NotReproducible("; ".join(reasons))
    judge, data = script_data(run_dir, finding)
    data = minimal_calls(data, judge)
    out = os.path.join(run_dir, "repro", data["finding"])
    os.makedirs(out, exist_ok=True)
    with open(SCRIPT) as f:
        code = f.read()
    with open(os.path.join(out, "repro.py"), "w") as f:
        f.write(code)
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump({k: v for k, v in data.items()}, f, indent=1)
    sh = os.path.join(out, "repro.sh")
    with open(sh, "w") as f:
        f.write(f"#!/bin/sh\n# {data['finding']}: {len(data['calls'])} calls of {data['factory']}, one at a time\n"
                f"# (PY: a python that can import the backend's module)\n"
                f"cd \"$(dirname \"$0\")\" && exec \"${{PY:-{python or sys.executable}}}\" repro.py < data.json\n")
    os.chmod(sh, 0o755)
    shown = [subprocess.run(["sh", sh], capture_output=True, text=True, timeout=120).returncode == 0
             for _ in range(RUNS_TO_KEEP)]
    if not all(shown):
        for name in ("repro.sh", "repro.py", "data.json"):
            os.unlink(os.path.join(out, name))
        raise NotReproducible(f"the script showed the finding in {sum(shown)} of {RUNS_TO_KEEP} runs: not kept")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme(data, run_dir))
    return {"finding": data["finding"], "dir": out, "calls": len(data["calls"]), "shown": sum(shown)}


def readme(data: dict, run_dir: str) -> str:
    lines = [f"# {data['finding']}", "", data["explanation"], "",
             f"Found by the deterministic run `{run_dir}` (replay it exactly: `chaos run --config "
             f"{os.path.join(run_dir, 'test.yaml')}`).", "",
             f"`sh repro.sh` calls `{data['factory']}` as its users do, {len(data['calls'])} calls one at a time on a "
             "fresh store seeded as the run's was, each decided at the instant the run's reply says "
             "(`observed_at`), and prints each reply. It exits 0 and prints SHOWN when every call gets the "
             "reply the run recorded: replies that the suite's checker judged, these calls alone in this order, "
             "as breaking the rule; 1 otherwise. It imports nothing of the claim-chaos harness; `repro.py` is the replay, "
             "`data.json` its calls. Shown on 3 runs of 3 before it was kept.", "", "## Calls", ""]
    for n, c in enumerate(data["calls"], 1):
        lines.append(f"{n}. `{c['f']}` at {c['at_ms']} ms{' (cited)' if c['cited'] else ''}: exit {c['exit']}")
    return "\n".join(lines) + "\n"
