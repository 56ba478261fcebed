"""Crash points, enumerated: kill one call of each mutating kind at each of its scheduling points.

One recording run (no fault fires) notes, for every op handed to a worker
(``Scheduler.begin_call``: its serial and kind), the scheduling points it
reached. For each mutating kind (``KINDS``) the first call that changed the
store (reached a point in ``CHANGES``) is the one explored; then one run per
point k kills that call exactly there (``CallPointKill``: SIGKILL while it
waits at its k-th point, before the syscall). Everything before the point is
the recording's schedule (same seed, same history up to it), so the kill lands
where it was asked; after it the workload goes on: the other workers contend,
the killed worker's slot comes back as a fresh process, leases expire, the
final phase reads everything back, and the checkers judge the history.

Power loss (undo what no fsync covered) is not done here: the scheduler has no
power-loss point yet (kill only; docs/explore.md says so).
"""

from __future__ import annotations

from chaos.deterministic.scheduler import FaultRule

#: the mutating command kinds of the claims workload (their recovery paths run inside them: an
#: acquire that takes an expired claim over, a publish that replays a stored outcome)
KINDS = ("acquire", "renew", "release", "publish")
#: a call that reached one of these changed (or began to change) the store
CHANGES = frozenset({"write", "pwrite", "writev", "ftruncate", "rename", "link", "unlink", "creat", "mkdir"})
SYNCS = frozenset({"fsync", "fdatasync"})
#: points that are not a syscall of the call (a thread's first contact, a virtual sleep)
NOT_POINTS = ("start", "sleep")


class WorkerCalls:
    """The op a thread's worker serves, for the worker's own threads and its children's (a black-box
    program runs as the worker's child, ``w1.0/f2``: its points are the call's). A worker is seen
    at a point of its own before it starts its first child (the scheduler names processes by path)."""

    def __init__(self):
        self.workers: dict = {}

    def served(self, thread):
        proc = thread.proc
        root = proc.name.split("/", 1)[0]
        if "/" not in proc.name:
            self.workers[root] = proc
            return proc.call
        worker = self.workers.get(root)
        return worker.call if worker is not None else None


class CallRecorder(FaultRule):
    """Never fires; notes each op's scheduling points (serial -> kind, process, points)."""

    def __init__(self):
        super().__init__("record")
        self.log: dict[int, dict] = {}
        self.calls = WorkerCalls()

    def matches(self, thread, call: str, seq: int, vt: int = 0) -> bool:
        served = self.calls.served(thread)
        if served is not None and call not in NOT_POINTS:
            entry = self.log.setdefault(served[0], {"serial": served[0], "f": served[1],
                                                    "process": thread.proc.name, "points": []})
            entry["points"].append(f"{call} {thread.path}".strip())
        return False


class CallPointKill(FaultRule):
    """Kill op ``serial`` (of kind ``kind``) at its ``point``-th scheduling point (1-based); with
    ``action="EIO"`` that point's call fails with EIO instead (an fsync point: a failing disk)."""

    def __init__(self, serial: int, kind: str, point: int, action: str = "kill"):
        super().__init__(action)
        self.serial, self.kind, self.point = serial, kind, point
        self.calls = WorkerCalls()

    def matches(self, thread, call: str, seq: int, vt: int = 0) -> bool:
        served = self.calls.served(thread)
        if self.evidence is not None or served != (self.serial, self.kind) or call in NOT_POINTS:
            return False
        self.seen += 1
        return self.seen == self.point


def targets(calls: list[dict], kinds=KINDS) -> dict[str, dict]:
    """Per kind, the recorded call to explore: the first one that changed the store."""
    out = {}
    for entry in sorted(calls, key=lambda e: e["serial"]):
        if entry["f"] in kinds and entry["f"] not in out and any(p.split(" ")[0] in CHANGES for p in entry["points"]):
            out[entry["f"]] = entry
    return out


def pick_points(n: int, limit: int | None) -> list[int]:
    """Points 1..n, or ``limit`` of them spread evenly (first and last included)."""
    if not limit or n <= limit:
        return list(range(1, n + 1))
    if limit == 1:
        return [1]
    return sorted({1 + round(i * (n - 1) / (limit - 1)) for i in range(limit)})


def explored_points(points: list[str], limit: int | None, changes_only: bool, action: str = "kill") -> list[int]:
    """The 1-based points to fault at: all (or ``limit`` spread evenly), or only those before a change
    to a file (a black-box program's call is a process of its own: thousands of start-up points that
    change nothing, where a kill is the same as one before its first change); an EIO only at fsyncs."""
    if not changes_only and action == "kill":
        return pick_points(len(points), limit)
    kinds = CHANGES | SYNCS if action == "kill" else SYNCS
    at = [i + 1 for i, p in enumerate(points) if p.split(" ")[0] in kinds]
    return [at[i - 1] for i in pick_points(len(at), limit)]


def rules_for(task: dict):
    """(the run's fault rules, the recorder or None) of a crash-point task's plain data."""
    crash = task.get("crash")
    if crash:
        action = crash.get("action", "kill")
        return {"kill" if action == "kill" else "fsync": [
            CallPointKill(int(crash["serial"]), crash["kind"], int(crash["point"]), action)]}, None
    recorder = CallRecorder()
    return {"record": [recorder]}, recorder


def explore_crash_point(task: dict) -> dict:
    """One crash-point run (``task["crash"] = {serial, kind, point}``) or the recording run (no
    ``crash``): plain data in and out, like ``seeds.explore_one``."""
    from chaos.deterministic import run as det_run
    from chaos.explore.seeds import explore_one

    rules, recorder = rules_for(task)
    out = explore_one(task, run_fn=lambda cfg: det_run.run(cfg, report=False, exact_rules=rules))
    if recorder is not None:
        out["calls"] = list(recorder.log.values())
    else:
        out["crash"] = dict(task["crash"])
        out["killed_at"] = next((r.evidence for rs in rules.values() for r in rs if r.evidence), None)
    return out


def plan(config: dict, seed: int, max_points: int | None = None, kinds=KINDS, actions=("kill",), log=print):
    """Record the schedule of ``seed``, then the crash-point tasks (plain data, any order): per kind, per
    action ("kill", or "EIO": fail each of its fsyncs instead), the explored call at each chosen point."""
    base = dict(config, seed=seed, depth=int(config.get("depth", 3)), points=config.get("points"),
                name=f"{config['name']}-crash")
    recording = explore_crash_point(dict(base, keep=True))
    chosen = targets(recording.get("calls", []), kinds)
    log(f"recording: seed {seed}, {len(recording.get('calls', []))} calls, {recording['points']} scheduling points; "
        f"explored: " + ", ".join(f"{k} call #{e['serial']} ({len(e['points'])} points)" for k, e in chosen.items()))
    tasks = []
    for action in actions:
        for kind in kinds:
            entry = chosen.get(kind)
            for k in explored_points(entry["points"], max_points, config.get("backend") == "external",
                                     action) if entry else []:
                # a name of its own: tasks run at once on a cluster, and each finds its run dir by name
                tasks.append(dict(base, nemesis=["kill" if action == "kill" else "fsync"],
                                  name=f"{base['name']}-{kind}{'' if action == 'kill' else '-eio'}-p{k}",
                                  crash={"serial": entry["serial"], "kind": kind, "point": k, "action": action}))
    return recording, chosen, tasks


def explore(config: dict, seed: int, max_points: int | None = None, kinds=KINDS, log=print,
            actions=("kill",), run_tasks=None) -> dict:
    """Record, then fault each kind's explored call at each of its points, once per action; the
    table's rows (kind x action, points in order). ``run_tasks(tasks)`` yields ``(task, result)`` as
    each completes, in any order (a cluster fan-out); by default one after another here."""
    recording, chosen, tasks = plan(config, seed, max_points, kinds, actions, log)
    rows = {(kind, action): {"kind": kind if action == "kill" else f"{kind}/eio", "action": action,
                             "serial": chosen[kind]["serial"] if kind in chosen else None,
                             "points": chosen[kind]["points"] if kind in chosen else [], "runs": []}
            for action in actions for kind in kinds}
    for task, res in (run_tasks or _one_by_one)(tasks):
        crash = task["crash"]
        row = rows[(crash["kind"], crash["action"])]
        res.setdefault("crash", dict(crash))
        row["runs"].append(res)
        log(f"  {row['kind']} #{crash['serial']} point {crash['point']}/{len(row['points'])} "
            f"({row['points'][crash['point'] - 1]}): {res['verdict']}"
            + (f" {', '.join(res['anomalies'])}" if res["anomalies"] else "")
            + "".join(f"; found {name}, known" for name in res.get("known") or [])
            + ("" if res.get("killed_at") else "  (the fault did not land)"))
    for row in rows.values():
        row["runs"].sort(key=lambda r: r["crash"]["point"])
    return {"seed": seed, "actions": list(actions), "recording": recording, "rows": list(rows.values())}


def _one_by_one(tasks: list[dict]):
    for task in tasks:
        yield task, explore_crash_point(task)


def table(result: dict) -> list[str]:
    """command kind x points reached x findings; first the recording (no kill): what it found was
    there without a crash (its verdict is at best unknown: it asked for a kill and made none)."""
    lines = [f"{'kind':<11} {'call':>5} {'points':>6} {'killed':>6}  verdicts / findings"]
    rec = result.get("recording")
    if rec:
        lines.append(f"{'no kill':<11} {'-':>5} {'-':>6} {'-':>6}  {rec['verdict']}"
                     + (f"; {', '.join(rec['anomalies'])}" if rec["anomalies"] else ""))
    for row in result["rows"]:
        runs = row["runs"]
        killed = sum(1 for r in runs if r.get("killed_at"))
        verdicts: dict = {}
        for r in runs:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        findings: dict = {}
        for r in runs:
            for name in r["anomalies"] + [f"found {k}, known" for k in r.get("known") or []]:
                findings.setdefault(name, []).append(r["crash"]["point"])
        text = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())) or "no call of this kind changed the store"
        for name, points in sorted(findings.items()):
            text += f"; {name} at points {','.join(map(str, points))}"
        lines.append(f"{row['kind']:<11} {str(row['serial'] or '-'):>5} {len(row['points']):>6} {killed:>6}  {text}")
    return lines
