"""``chaos repro RUN``: a finding of a deterministic run as a standalone script (issue #31 item 3).

For a Python-class backend (``--backend python`` or ``sqlite``, whose class is
``backends.sqlite:open_backend``) the script calls the class as its users do
(``repro_script.py``: the factory, then ``backend.call`` per command), on a
fresh store seeded as the run's was, one call at a time, each decided at the
clock the run decided it with (``decided_at``), each client process of the
run through an instance of its own. The calls are the run's completed calls
up to the finding's. When no set of them one at a time breaks the finding's
rule, the run's interleaving inside a call is put back (``interleaved``; the
run's earlier ones first when the replay strays before the finding:
``faithful``): a call started in a process of its own with ``faultshim.c``
(built with gcc) preloaded stops right after its n-th write transaction ended,
the calls the run completed while it was in flight run in that gap, then it
goes on. Then delta debugging drops calls while the replies the class gives
the rest are still judged by the suite's checker as the finding
(``minimal_calls``; a script still over ``SHORT`` calls may start from the
state the class reached after a prefix of them: ``later_start``); those
replies are the script's expected ones. The script is kept only when it
shows the finding on three runs out of three; otherwise the output says why
and no script is written. A black-box program's finding (``--backend
external``) is written as plain program calls by ``chaos.explore.blackbox``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from checkers.history import final_state_records
from chaos.store import private_dir

SCRIPT = os.path.join(os.path.dirname(__file__), "repro_script.py")
FAULTSHIM = os.path.join(os.path.dirname(__file__), "faultshim.c")
#: the write transactions of a gated call after which its stop is tried (the first ends a split
#: decision's check; opening a store may commit one before it)
GATE_NTH = (1, 2, 3)
#: how many replays dropping calls may take (the cited calls' pass gets half as many again)
MINIMISE_TRIES = 300
#: a script longer than this many calls is tried with a later start (``later_start``)
SHORT = 10
#: the store file the gate watches (the Python-class script's store: ``claims.db`` in its temp dir)
GATE_FILE = "claims.db"
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
    """The ms of the clock a call was decided with: the clock the run pinned for it (``clock_ms``: an
    episode that runs a call at a chosen instant); else its reply's ``observed_at`` (the backend's own
    word: max(its clock, the floor)) when that is not past the worker's wall clock at the reply,
    else that wall clock (a floor ahead of the clock, which the replay must not take for the clock:
    it would hide a floor the program moved wrongly); else the wall clock."""
    if isinstance(op.get("clock_ms"), int):
        return op["clock_ms"]

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
    wall = int(op["wall_ms"])
    if stamp:
        return min(int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000), wall)
    return wall


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
                          "index": op["index"], "invoked": inv["index"], "process": op["process"],
                          **({"clock_ms": op["clock_ms"]} if isinstance(op.get("clock_ms"), int) else {})})
    return calls


def chosen_finding(run_dir: str, finding: str | None, findings_of, not_deterministic: str) -> tuple:
    """(cfg, results, (id, checker, anomaly), ops, cited): the stored run's finding ``finding`` (the first
    without one) and the history entries it cites, each a call; ``NotReproducible`` with the reason else."""
    from chaos.shrink import load_run

    cfg, results, _ = load_run(run_dir)
    if not cfg.get("deterministic"):
        raise NotReproducible(not_deterministic)
    if cfg.get("workload", "claims") != "claims":   # the scripts call the work-claim contract
        raise NotReproducible(f"the {cfg['workload']} workload: a standalone script is built for the claims "
                              "workload only (chaos shrink it; its test.yaml replays it)")
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
    # a script of calls shows a finding only when all its evidence is calls or the final durable state
    # (which the script exports and compares too): one that cites a fault would print SHOWN on a
    # correct program too
    beyond = sorted(i for i in cited if i >= len(ops) or not (isinstance(ops[i].get("process"), int)
                                                              or ops[i].get("f") == "final-state"))
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
    final = any(i < len(ops) and ops[i].get("f") == "final-state" for i in cited)
    return judge_of(cfg, results), {"finding": fid, "explanation": anomaly.get("explanation", ""), "factory": factory,
            "namespaces": list(kind.namespaces(world)), "seed": kind.durable(world), "final_state": final,
            "calls": calls_of(ops, cited)}


def judge_of(cfg: dict, results: dict):
    """``judge(history, initial=None) -> {checker: {anomaly type: its first explanation}}``: the suite's
    checkers of the run's workload, as the run configured them (from ``initial``, a durable state, when
    given), on a history of the caller's making (before any known deviation is applied)."""
    from chaos.runner import RunConfig
    from chaos.shrink import _fields
    from chaos.workload_kinds import workload_kind

    run_cfg = RunConfig(**_fields(cfg))
    kind = workload_kind(run_cfg)
    _, world = kind.build(run_cfg)
    ctx = kind.ctx(run_cfg, world, results.get("capabilities") or {})

    def judge(history: list[dict], initial: dict | None = None) -> dict:
        merged = kind.check(history, ctx if initial is None else dict(ctx, initial_durable=initial))
        out: dict = {}
        for name, r in (merged.get("checkers") or {}).items():
            if isinstance(r, dict) and r.get("valid") is False:
                found = out.setdefault(name, {})
                for a in r.get("anomalies") or []:
                    if isinstance(a, dict):
                        found.setdefault(a.get("type"), a.get("explanation", ""))
        return out
    return judge


_REPLAY: list = []
_SCRATCH: list = []
#: where the search's replays keep their stores: tmpfs when there is one (each commit's fsync
#: costs nothing there, and a search runs hundreds of replays)
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _replay(data: dict, observed: list | None = None, state: dict | None = None) -> bool:
    """The script's own replay, in this process (the search's test): one definition, the script's."""
    if not _REPLAY:
        namespace: dict = {"__name__": "repro", "__file__": SCRIPT}
        with open(SCRIPT) as f:
            exec(compile(f.read(), SCRIPT, "exec"), namespace)
        _REPLAY.append(namespace["replay"])
    return _REPLAY[0](data, quiet=True, tmp_root=_scratch(), faultshim=_faultshim() if _gated(data) else None,
                      observed=observed, state=state)


def broken(data: dict, calls: list[dict], judge) -> dict | None:
    """``data`` with ``calls`` carrying the replies the program gives them when replayed as the
    script replays them (and, for a finding that cites the final durable state, the state they
    leave: ``final``) and the checker's explanation of them, when the suite's checker judges those
    as breaking the finding's rule; None otherwise."""
    got: list = []
    state: dict | None = {} if data.get("final_state") else None
    _replay(dict(data, calls=calls, final=None), got, state)
    if len(got) != len(calls) or None in got:
        return None
    shown = dict(data, calls=[dict(c, exit=r[0], envelope=r[1]) for c, r in zip(calls, got)], final=state)
    explanation = judged(shown, shown["calls"], judge)   # the checker's words for these calls, not the run's
    return None if explanation is None else dict(shown, explanation=explanation)


def _gated(data: dict) -> bool:
    """Does a call of ``data`` run stopped inside (in a window)?"""
    return any(c.get("gate") for c in data["calls"])


def _scratch() -> str:
    """This process's scratch directory (the replays' stores), on ``FAST_TMP``:
    removed at exit; one a SIGKILLed search left (its pid gone) is removed by the next search."""
    if not _SCRATCH:
        _SCRATCH.append(private_dir("chaos-repro-", FAST_TMP))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


def _faultshim() -> str:
    """faultshim.so, built with gcc as the suite's other shims are (``build_shim``: once per source
    version, cached), as the script builds it."""
    from chaos.faults.failsync import build_shim

    if not shutil.which("gcc"):
        raise NotReproducible("a script that stops a call inside needs gcc to build faultshim.c: not found")
    try:
        return build_shim(Path(FAULTSHIM), "faultshim")
    except RuntimeError as e:
        raise NotReproducible(str(e)[-300:]) from None


def _tuple(call: dict):
    v = call["value"]
    return (v.get("ledger_namespace"), v.get("item_id")) if isinstance(v, dict) else None


def judged(data: dict, calls: list[dict], judge) -> str | None:
    """Do ``calls`` alone, in this order with the replies they carry (a gated call spanning its gap),
    from ``data``'s seeded state, break the finding's rule by the suite's own checker
    (``judge``)? The checker's explanation when they do, else None."""
    checker, _, anomaly = data["finding"].partition("-")
    ops: list = []

    def add(n: int, c: dict, kind: str) -> None:
        value = c["value"] if kind == "invoke" else {"exit": c["exit"], "envelope": c["envelope"]}
        pinned = {"clock_ms": c["clock_ms"]} if "clock_ms" in c else {}   # a call the run decided at a pinned instant
        ops.append({"index": len(ops), "process": n, "type": kind, "f": c["f"], "value": value, "time": len(ops),
                    **pinned})

    starts = {first: g for first, g in _blocks(calls)}   # a gated call is in flight across its gap
    for n, c in enumerate(calls):
        if n in starts:
            add(starts[n], calls[starts[n]], "invoke")
        if not c.get("gate"):
            add(n, c, "invoke")
        add(n, c, "ok" if c["exit"] == 0 else "fail")
    if data.get("final") is not None:
        ops += [dict(rec, index=len(ops) + k, time=len(ops) + k) for k, rec in enumerate(final_state_records(data["final"]))]
    return judge(ops, data["seed"]).get(checker, {}).get(anomaly)


def _blocks(calls: list[dict]) -> list[tuple[int, int]]:
    """(first position, gated call's position) of every window: a gated call and its gap's calls just
    before it (``with_window``)."""
    out = []
    for g, c in enumerate(calls):
        if c.get("gate"):
            w = c["gate"]["window"]
            out.append((next(n for n, x in enumerate(calls) if x.get("in_gap") == w or x is c), g))
    return out


def with_window(calls: list[dict], a: int, gap: list[dict], nth: int) -> list[dict]:
    """``calls`` with call ``a`` stopped right after its ``nth`` write transaction while ``gap`` (calls
    that overlapped it in the run) run: the gap moved just before it, a window of its own."""
    w = 1 + max((c["gate"]["window"] for c in calls if c.get("gate")), default=0)
    ids = {id(c) for c in gap}
    gated = dict(calls[a], gate={"call": "txn-end", "match": GATE_FILE, "nth": nth, "window": w})
    return ([c for c in calls[:a] if id(c) not in ids] + [dict(c, in_gap=w) for c in gap] + [gated]
            + [c for c in calls[a + 1:] if id(c) not in ids])


def _windows_for(calls: list[dict], a: int):
    """Every (gap, nth) to try for call ``a``: the calls the run completed while it was in flight, then
    also those it started during it, none of them in an earlier window."""
    free = max((g for _, g in _blocks(calls)), default=-1) + 1
    call = calls[a]
    if a < free or call.get("in_gap"):
        return
    inside = [c for c in calls[free:a] if c["index"] > call["invoked"]]     # completed while it was in flight
    later = [c for c in calls[a + 1:] if c["invoked"] < call["index"] and not c.get("in_gap")]  # started during it
    for gap in filter(None, (inside, inside + later) if later else (inside,)):
        for nth in GATE_NTH:
            yield gap, nth


def interleaved(data: dict, judge) -> dict:
    """The run's interleaving inside one call: a cited call stopped right after its n-th write
    transaction (``GATE_NTH``) while the calls the run completed during its flight (then also those
    it started during it) run in the gap; the first (call, gap, n) whose replies the checker judges
    as breaking the rule (``broken``). ``NotReproducible`` when none does."""
    calls = data["calls"]
    for a, call in enumerate(calls):
        if call["cited"]:
            for gap, nth in _windows_for(calls, a):
                shown = broken(data, with_window(calls, a, gap, nth), judge)
                if shown:
                    return shown
    raise NotReproducible("replayed one call at a time, or with the run's overlapping calls stopped inside one "
                          f"another (after any of their first {len(GATE_NTH)} write transactions), the replies the "
                          "calls get do not break the rule: the finding needs a killed call's partial effect, a "
                          "deeper interleaving, or a part of the run the calls do not carry")


def _diverges(data: dict, calls: list[dict]) -> int | None:
    """The first position whose reply is not the one the call carries (the run's), None when none."""
    got: list = []
    _replay(dict(data, calls=calls), got)
    for n, (c, g) in enumerate(zip(calls, got)):
        if g is None or (g[0], g[1]) != (c["exit"], c["envelope"]):
            return n
    return None if len(got) == len(calls) else len(got)


def faithful(data: dict, tries: list) -> dict:
    """``data`` with the run's earlier interleavings back: walking the calls, wherever a reply first
    differs from the run's and the run had that call (or a call it overlapped) in flight with others,
    the window (``with_window``) that moves that first difference furthest on is kept, until every
    reply is the run's or no window helps. A check-then-act bug met several times in a run needs
    each of its earlier windows for the state the finding's calls see."""
    calls = data["calls"]
    at = _diverges(data, calls)
    while at is not None and tries[0] > 0:
        suspects = [n for n, c in enumerate(calls) if n == at or (
            c["index"] > calls[at]["invoked"] and c["invoked"] < calls[at]["index"])]
        best = (at, None)   # (how far the replies stay the run's: len(calls) when all do, the calls)
        for a, (gap, nth) in ((a, w) for a in suspects for w in _windows_for(calls, a)):
            if tries[0] <= 0 or best[0] == len(calls):
                break
            tries[0] -= 1
            tried = with_window(calls, a, gap, nth)
            moved = _diverges(data, tried)
            moved = len(tried) if moved is None else moved
            if moved > best[0]:
                best = (moved, tried)
        if best[1] is None:
            break
        calls = best[1]
        at = None if best[0] == len(calls) else best[0]
    return dict(data, calls=calls)


def _ddmin(items: list, ok, tries: list) -> list:
    """Delta debugging: the fewest of ``items`` for which ``ok(kept)`` holds (one-minimal, or the
    fewest found when ``tries[0]`` tries are spent: a count, so the script does not depend on the
    machine's speed)."""
    n = 2
    while items and tries[0] > 0:
        size = -(-len(items) // n)
        for start in range(0, len(items), size):
            if tries[0] <= 0:
                return items
            rest = items[:start] + items[start + size:]
            tries[0] -= 1
            if ok(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


def later_start(data: dict, calls: list[dict], judge, tries: list) -> tuple[dict, list[dict]] | None:
    """(data seeded with the store's state after the first k calls, the calls from k on) for the
    largest k with which those calls still break the rule (judged from that state): a lease chain of
    twenty takeovers before the finding becomes its last epoch, seeded. The state is the one the
    program itself reached, replayed one call at a time, as ``backend.store.export_durable()``
    gives it. A cut never separates a stopped call from its gap."""
    inside = {k for first, g in _blocks(calls) for k in range(first + 1, g + 1)}
    for k in range(len(calls) - 1, 0, -1):
        if k in inside:
            continue
        if tries[0] <= 0:
            return None
        tries[0] -= 1
        state: dict = {}
        _replay(dict(data, calls=calls[:k]), [], state)
        later = dict(data, seed=state, seeded_after=data.get("seeded_after", 0) + k)
        if broken(later, calls[k:], judge):
            return later, calls[k:]
    return None


def _starting_calls(data: dict, judge, tries: list) -> dict:
    """``data`` whose calls break the rule when replayed (``broken``): the run's calls one at a time;
    else with one cited call stopped inside (``interleaved``); else with the run's earlier
    interleavings back (``faithful``), then one at a time or with a cited call stopped inside."""
    shown = broken(data, data["calls"], judge)
    if shown:
        return shown
    try:
        return interleaved(data, judge)
    except NotReproducible:
        again = faithful(data, tries)
        if again["calls"] is data["calls"]:
            raise
    return broken(again, again["calls"], judge) or interleaved(again, judge)


def minimal_calls(data: dict, judge) -> dict:
    """The fewest calls that, replayed as the script replays them (one at a time, or with the run's
    one call stopped inside: ``interleaved``), get replies the suite's checker judges as breaking the
    finding's rule; each call's expected reply is then the one the program gave it (the run's, for a
    call whose context the shrinking kept). ddmin over the uncited calls (first without the calls on
    other items, which a one-item finding seldom needs); a script still over ``SHORT`` calls then
    tries a later start (``later_start``); then ddmin over every call left, the cited ones too: an
    epoch reallocated at epoch 12 is shown as well at epoch 1."""
    tries = [MINIMISE_TRIES]
    data = _starting_calls(data, judge, tries)
    cited = [c for c in data["calls"] if c["cited"]]
    others = [c for c in data["calls"] if not c["cited"]]

    def with_cited(keep: list) -> list:
        ids = {id(c) for c in keep}
        return [c for c in data["calls"] if c["cited"] or id(c) in ids]

    same_items = [c for c in others if _tuple(c) in {_tuple(x) for x in cited}]
    if broken(data, with_cited(same_items), judge):
        others = same_items
    others = _ddmin(others, lambda keep: broken(data, with_cited(keep), judge), tries)
    tries[0] += MINIMISE_TRIES // 2
    calls = with_cited(others)
    if len(calls) > SHORT:
        later = later_start(data, calls, judge, tries)
        if later:
            data, calls = later
    return broken(data, _ddmin(calls, lambda keep: broken(data, keep, judge), tries), judge)


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
    py = f"\"${{PY:-{python or sys.executable}}}\" repro.py < data.json"
    head = (f"#!/bin/sh\n# {data['finding']}: {len(data['calls'])} calls of {data['factory']}, one at a time"
            + (f", {sum(bool(c.get('gate')) for c in data['calls'])} of them stopped inside (faultshim.c, built here "
               "with gcc) while others run" if _gated(data) else "")
            + "\n# (PY: a python that can import the backend's module)\ncd \"$(dirname \"$0\")\" || exit 2\n")
    if _gated(data):
        shutil.copy(FAULTSHIM, os.path.join(out, "faultshim.c"))
        body = ("T=$(mktemp -d) || exit 2\n"
                "gcc -shared -fPIC -O2 -o \"$T/faultshim.so\" faultshim.c -ldl || { rm -rf \"$T\"; exit 2; }\n"
                f"FAULTSHIM=\"$T/faultshim.so\" {py}\ncode=$?\nrm -rf \"$T\"\nexit $code\n")
    else:
        body = f"exec {py}\n"
    with open(sh, "w") as f:
        f.write(head + body)
    os.chmod(sh, 0o755)
    shown = [subprocess.run(["sh", sh], capture_output=True, text=True, timeout=120).returncode == 0
             for _ in range(RUNS_TO_KEEP)]
    if not all(shown):
        for name in ("repro.sh", "repro.py", "data.json", "faultshim.c"):
            if os.path.exists(os.path.join(out, name)):
                os.unlink(os.path.join(out, name))
        raise NotReproducible(f"the script showed the finding in {sum(shown)} of {RUNS_TO_KEEP} runs: not kept")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme(data, run_dir))
    return {"finding": data["finding"], "dir": out, "calls": len(data["calls"]), "shown": sum(shown),
            "seeded_after": data.get("seeded_after", 0), "stopped_inside": sum(bool(c.get("gate")) for c in data["calls"])}


def readme(data: dict, run_dir: str) -> str:
    lines = [f"# {data['finding']}", "", data["explanation"], "",
             f"Found by the deterministic run `{run_dir}` (replay it exactly: `chaos run --config "
             f"{os.path.join(run_dir, 'test.yaml')}`).", "",
             f"`sh repro.sh` calls `{data['factory']}` as its users do, {len(data['calls'])} calls one at a time on a "
             "fresh store seeded as the run's was, each decided with the clock the run decided it with (its "
             "pinned clock, else its reply's `observed_at` when not past the worker's clock), each client process of the run through an instance of its own, and prints each "
             "reply. It exits 0 and prints SHOWN when every call gets its expected reply (`data.json`: the "
             "run's, or the one the class gave when the shrinking dropped calls before it): replies that the "
             "suite's checker judged, these calls alone in this order, as breaking the rule; 1 otherwise. It imports nothing of the claim-chaos harness; `repro.py` is the replay, "
             "`data.json` its calls. Shown on 3 runs of 3 before it was kept."]
    if data.get("seeded_after"):
        lines += ["", f"The store does not start empty: it is seeded (as the run's own initial state was) with the "
                  f"durable state this class reached after the run's first {data['seeded_after']} calls, replayed one "
                  "at a time (`data.json`'s `seed`, from `store.export_durable()`), so the script starts where the "
                  "finding's calls begin; the suite's checker judged the calls below from that state."]
    for gated in (c for c in data["calls"] if c.get("gate")):
        g = gated["gate"]
        lines += ["", f"One call runs inside others, as in the run: the `{gated['f']}` (call "
                  f"{data['calls'].index(gated) + 1}) runs in a process of its own with `faultshim.c` preloaded "
                  f"(built by `repro.sh` with gcc), which stops it right after its {g['nth']}. write transaction on "
                  f"`{g['match']}` ended (an exclusive record lock taken, then the whole file unlocked: it holds no "
                  "lock there) and tells `repro.py` through a pipe; the calls of its gap (marked \"in the gap\" just "
                  "before it) run then, and closing the pipe lets it go on. Nothing waits on a timer."]
    lines += ["", "## Calls", ""]
    for n, c in enumerate(data["calls"], 1):
        where = " (stopped inside while the gap's calls run)" if c.get("gate") else " (in the gap)" if c.get("in_gap") else ""
        lines.append(f"{n}. `{c['f']}` at {c['at_ms']} ms{where}{' (cited)' if c['cited'] else ''}: exit {c['exit']}")
    return "\n".join(lines) + "\n"
