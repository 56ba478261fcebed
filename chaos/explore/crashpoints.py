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

With ``second``, each first crash's run is recorded too, and its recovery (the
next call that changes the crashed call's item: a retry, a takeover) is killed
at each of its own points as well, on the first crash's schedule.

The same call can instead fail with EIO at each of its fsyncs (``EIO``), or
lose power at each of its changes (``power-loss``: every process killed there,
then what no fsync covered undone by the store's power-loss journal; a cut
where nothing was uncovered is a kill, and the run says the cut did not take
effect).
"""

from __future__ import annotations

from chaos.deterministic.rules import FaultRule

#: the mutating command kinds of the claims workload (their recovery paths run inside them: an
#: acquire that takes an expired claim over, a publish that replays a stored outcome)
KINDS = ("acquire", "renew", "release", "publish")
#: a call that reached one of these changed (or began to change) the store
CHANGES = frozenset({"write", "pwrite", "writev", "ftruncate", "rename", "link", "unlink", "creat", "mkdir"})
SYNCS = frozenset({"fsync", "fdatasync"})
#: points that are not a syscall of the call (a thread's first contact, a virtual sleep)
NOT_POINTS = ("start", "sleep")
#: per action: the nemesis a run asks for (so its coverage counts the fault), the table's suffix
NEMESIS = {"kill": "kill", "EIO": "fsync", "power-loss": "power-loss"}
SUFFIX = {"kill": "", "EIO": "eio", "power-loss": "power"}


class WorkerCalls:
    """The op a thread's worker serves, for the worker's own threads and its children's (a black-box
    program runs as the worker's child, ``w1.0/f2``: its points are the call's). A worker is seen
    at a point of its own before it starts its first child (the scheduler names processes by path)."""

    def __init__(self):
        self.workers: dict = {}

    def worker(self, thread):
        proc = thread.proc
        root = proc.name.split("/", 1)[0]
        if "/" not in proc.name:
            self.workers[root] = proc
            return proc
        return self.workers.get(root)

    def served(self, thread):
        worker = self.worker(thread)
        return worker.call if worker is not None else None


class CallRecorder(FaultRule):
    """Never fires; notes each op's scheduling points (serial -> kind, process, points)."""

    def __init__(self):
        super().__init__("record")
        self.log: dict[int, dict] = {}
        self.calls = WorkerCalls()

    def matches(self, thread, call: str, seq: int, vt: int = 0) -> bool:
        worker = self.calls.worker(thread)
        served = worker.call if worker is not None else None
        if served is not None and call not in NOT_POINTS:
            entry = self.log.setdefault(served[0], {"serial": served[0], "f": served[1], "process": thread.proc.name,
                                                    "item": list(worker.item) if worker.item else None,
                                                    "points": []})
            entry["points"].append(f"{call} {thread.path}".strip())
        return False


class CallPointKill(FaultRule):
    """Kill op ``serial`` (of kind ``kind``) at its ``point``-th scheduling point (1-based); with
    ``action="EIO"`` that point's call fails with EIO instead (an fsync point: a failing disk); with
    ``"power-loss"`` the power is cut there (``then``: the journal's undo)."""

    def __init__(self, serial: int, kind: str, point: int, action: str = "kill", then=None):
        super().__init__(action, then=then)
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
    kinds = SYNCS if action == "EIO" else CHANGES | SYNCS
    at = [i + 1 for i, p in enumerate(points) if p.split(" ")[0] in kinds]
    return [at[i - 1] for i in pick_points(len(at), limit)]


class AfterSetUp:
    """Fault rules made once the run's power-loss journal exists (``det_run.run`` calls it with the
    journal); ``values()`` are the rules made, as a dict's, for the run's evidence afterwards."""

    def __init__(self, make):
        self.make, self.rules = make, {}

    def __call__(self, power) -> dict:
        self.rules = self.make(power)
        return self.rules

    def values(self):
        return self.rules.values()


def rules_for(task: dict):
    """(the run's fault rules, the recorder or None) of a crash-point task's plain data."""
    crash = task.get("crash")
    recorder = CallRecorder() if not crash or crash.get("record") else None
    extra = {"record": [recorder]} if recorder else {}
    if not crash:
        return extra, recorder
    action = crash.get("action", "kill")
    second = crash.get("then")   # a second kill, inside the first crash's recovery

    def make(power) -> dict:
        undo = (lambda: power.power_off("drop", 0)) if action == "power-loss" else None
        rules = dict(extra)   # the recorder first: it sees the point a kill then fires at
        rules.setdefault(NEMESIS[action], []).append(
            CallPointKill(int(crash["serial"]), crash["kind"], int(crash["point"]), action, then=undo))
        if second:
            rules.setdefault("kill", []).append(CallPointKill(int(second["serial"]), second["kind"], int(second["point"])))
        return rules
    # a power cut's undo is the run's journal of the store, made once the store is set up
    return (AfterSetUp(make) if action == "power-loss" else make(None)), recorder


def explore_crash_point(task: dict) -> dict:
    """One crash-point run (``task["crash"] = {serial, kind, point}``) or the recording run (no
    ``crash``): plain data in and out, like ``seeds.explore_one``."""
    from chaos.deterministic import run as det_run
    from chaos.explore.seeds import explore_one

    rules, recorder = rules_for(task)
    out = explore_one(task, run_fn=lambda cfg: det_run.run(cfg, report=False, exact_rules=rules, progress=False))
    if recorder is not None:
        out["calls"] = list(recorder.log.values())
    if task.get("crash"):
        out["crash"] = dict(task["crash"])
        fired = [r for rs in rules.values() for r in rs if isinstance(r, CallPointKill)]
        out["killed_at"] = fired[0].evidence if fired else None
        if task["crash"].get("then"):
            out["killed_again_at"] = fired[-1].evidence if len(fired) > 1 else None
    return out


def recovery_of(result: dict, kinds=KINDS) -> dict | None:
    """The first crash's recovery in a recorded crash run: the first call handed out after the
    crashed one, of a mutating kind, on the same item, that changed the store (a takeover, the
    holder's retry, a publish that replays or redoes the outcome)."""
    crash, calls = result.get("crash") or {}, result.get("calls") or []
    item = next((c["item"] for c in calls if c["serial"] == crash.get("serial")), None)
    for entry in sorted(calls, key=lambda e: e["serial"]):
        if entry["serial"] > crash.get("serial", 0) and entry["f"] in kinds and entry.get("item") == item \
                and any(p.split(" ")[0] in CHANGES for p in entry["points"]):
            return entry
    return None


def plan(config: dict, seed: int, max_points: int | None = None, kinds=KINDS, actions=("kill",), log=print,
         second: bool = False):
    """Record the schedule of ``seed``, then the crash-point tasks (plain data, any order): per kind, per
    action ("kill"; "EIO": fail each of its fsyncs instead; "power-loss": cut the power at each of its
    changes), the explored call at each chosen point."""
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
                tasks.append(dict(base, nemesis=[NEMESIS[action]],
                                  name=f"{base['name']}-{kind}{'-' + SUFFIX[action] if SUFFIX[action] else ''}-p{k}",
                                  crash={"serial": entry["serial"], "kind": kind, "point": k, "action": action,
                                         **({"record": True} if second else {})}))
    return recording, chosen, tasks


def second_tasks(config: dict, first: list[tuple[dict, dict]], max_points: int | None, kinds=KINDS) -> list[dict]:
    """Per first crash (task, recorded result): kill its recovery (``recovery_of``) at each chosen point
    too; the schedule up to the second kill is the first crash's run."""
    tasks = []
    for task, res in first:
        rec = recovery_of(res, kinds)
        if rec is None:
            continue
        crash = {k: v for k, v in task["crash"].items() if k != "record"}
        for m in explored_points(rec["points"], max_points, config.get("backend") == "external"):
            then = {"serial": rec["serial"], "kind": rec["f"], "point": m, "points": len(rec["points"]),
                    "at": rec["points"][m - 1]}
            tasks.append(dict(task, name=f"{task['name']}-r{m}", crash=dict(crash, then=then),
                              nemesis=sorted(set(task["nemesis"]) | {"kill"})))
    return tasks


def explore(config: dict, seed: int, max_points: int | None = None, kinds=KINDS, log=print,
            actions=("kill",), run_tasks=None, second: bool = False) -> dict:
    """Record, then fault each kind's explored call at each of its points, once per action; the
    table's rows (kind x action, points in order). ``run_tasks(tasks)`` yields ``(task, result)`` as
    each completes, in any order (a cluster fan-out); by default one after another here. ``second``:
    then, for every first crash, kill its recovery at each of its points too (rows ``kind>recovery``)."""
    recording, chosen, tasks = plan(config, seed, max_points, kinds, actions, log, second)
    rows = {(kind, action): {"kind": f"{kind}/{SUFFIX[action]}" if SUFFIX[action] else kind, "action": action,
                             "serial": chosen[kind]["serial"] if kind in chosen else None,
                             "points": chosen[kind]["points"] if kind in chosen else [], "runs": []}
            for action in actions for kind in kinds}
    firsts = []
    for task, res in (run_tasks or _one_by_one)(tasks):
        firsts.append((task, res))
        crash = task["crash"]
        row = rows[(crash["kind"], crash["action"])]
        res.setdefault("crash", dict(crash))
        row["runs"].append(res)
        log(f"  {row['kind']} #{crash['serial']} point {crash['point']}/{len(row['points'])} "
            f"({row['points'][crash['point'] - 1]}): {_outcome(res)}"
            + ("" if res.get("killed_at") else "  (the fault did not land)"))
    if second:
        for task, res in (run_tasks or _one_by_one)(second_tasks(config, firsts, max_points, kinds)):
            crash, then = task["crash"], task["crash"]["then"]
            label = f"{crash['kind']}{'/' + SUFFIX[crash['action']] if SUFFIX[crash['action']] else ''}>recovery"
            row = rows.setdefault((label, "second"), {"kind": label, "action": crash["action"], "serial": crash["serial"],
                                                      "points": chosen[crash["kind"]]["points"], "runs": []})
            res.setdefault("crash", dict(crash))
            row["runs"].append(res)
            log(f"  {label} #{crash['serial']} point {crash['point']}, then its recovery {then['kind']} "
                f"#{then['serial']} point {then['point']}/{then['points']} ({then['at']}): {_outcome(res)}"
                + ("" if res.get("killed_again_at") else "  (the second kill did not land)"))
    for row in rows.values():
        row["runs"].sort(key=lambda r: (r["crash"]["point"], (r["crash"].get("then") or {}).get("point", 0)))
    return {"seed": seed, "actions": list(actions), "recording": recording, "rows": list(rows.values())}


def _outcome(res: dict) -> str:
    """A crash run's verdict, its anomalies and the known findings it met, for the progress line."""
    return (res["verdict"] + (f" {', '.join(res['anomalies'])}" if res["anomalies"] else "")
            + "".join(f"; found {name}, known" for name in res.get("known") or []))


def _one_by_one(tasks: list[dict]):
    for task in tasks:
        yield task, explore_crash_point(task)


def table(result: dict) -> list[str]:
    """command kind x points reached x findings; first the recording (no kill): what it found was
    there without a crash (its verdict is at best unknown: it asked for a kill and made none)."""
    w = max([11] + [len(row["kind"]) for row in result["rows"]])
    lines = [f"{'kind':<{w}} {'call':>5} {'points':>6} {'killed':>6}  verdicts / findings"]
    rec = result.get("recording")
    if rec:
        lines.append(f"{'no kill':<{w}} {'-':>5} {'-':>6} {'-':>6}  {rec['verdict']}"
                     + (f"; {', '.join(rec['anomalies'])}" if rec["anomalies"] else ""))
    for row in result["rows"]:
        runs = row["runs"]
        killed = sum(1 for r in runs if r.get("killed_again_at" if r["crash"].get("then") else "killed_at"))
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
        lines.append(f"{row['kind']:<{w}} {str(row['serial'] or '-'):>5} {len(row['points']):>6} {killed:>6}  {text}")
    return lines
