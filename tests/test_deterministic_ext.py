"""The deterministic mode over programs that start programs (chaos.deterministic): a controlled
process that runs ``git`` gets each child as a scheduled process of its own name, its waits for
the child (poll of its pipes, waitpid) never block, and the same seed gives the same trace; the
gitjournal backend (git per call) gives the same history in three runs. Real git, real processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chaos import sut
from chaos.deterministic.rules import FaultRule
from chaos.deterministic.scheduler import Scheduler

# writes a file, then runs git twice per round: one reading the repo, one writing an object from stdin
GIT_CLIENT = """
import os, subprocess, sys
repo, who = sys.argv[1], sys.argv[2]
for i in range(2):
    with open(os.path.join(repo, f"{who}-{i}"), "w") as f:
        f.write("x")
    st = subprocess.run(["git", "-C", repo, "status", "--porcelain"], capture_output=True, timeout=30)
    obj = subprocess.run(["git", "-C", repo, "hash-object", "-w", "--stdin"], input=who.encode() * 3,
                         capture_output=True)
    with open(os.path.join(repo, f"{who}-out"), "a") as f:
        f.write(f"{i} {st.returncode} {st.stdout.count(b'??')} {obj.stdout.decode().strip()}\\n")
"""


def _git_run(tmp_path: Path, seed: int, faults=None) -> tuple[list[str], dict, dict]:
    store = Path(tempfile.mkdtemp(dir=tmp_path, prefix="store-"))
    repo = store / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    client = tmp_path / "git_client.py"
    client.write_text(GIT_CLIENT)
    with Scheduler(seed, prefixes=[str(store)], depth=3, expected_points=400, faults=faults, stuck_s=60) as s:
        for who in ("a", "b"):
            s.spawn(who, [sys.executable, str(client), str(repo), who])
        s.run_all()
        codes = {p.name: (p.popen.returncode if p.popen else None) for p in s.procs.values()}
        trace, summary = list(s.trace), s.summary()
    outs = {who: (repo / f"{who}-out").read_text() if (repo / f"{who}-out").exists() else None for who in ("a", "b")}
    return trace, summary, dict(codes=codes, outs=outs)


def test_git_children_are_scheduled_processes_and_replay(tmp_path):
    runs = [_git_run(tmp_path, seed=4) for _ in range(3)]
    trace, summary, seen = runs[0]
    assert seen["codes"]["a"] == seen["codes"]["b"] == 0
    # every git the client ran said what it did under a name of its own: a/f1 .. a/f4, b/f1 .. b/f4
    names = {line.split(" ")[1].rsplit("/", 1)[0] for line in trace}
    assert {f"{w}/f{n}" for w in "ab" for n in range(1, 5)} <= names, sorted(names)
    assert any(re.search(r" (a|b)/f\d/t0 creat \d+ \d+ repo/\.git/objects/", line) for line in trace)
    # the parents' waits for their children were stops, not blocking calls
    assert any(" poll " in line or " waitpid " in line for line in trace)
    assert all(r[2]["outs"]["a"] and r[2]["outs"]["b"] for r in runs)
    # the same seed: the same order of every point (git's temp object names, from /dev/urandom, included)
    assert runs[1][0] == trace and runs[2][0] == trace
    assert {r[1]["trace_sha256"] for r in runs} == {summary["trace_sha256"]}
    assert not summary["notes"]


def test_a_kill_at_a_git_childs_point_kills_its_worker_tree(tmp_path):
    """A kill that lands on a child's point ends the whole tree the harness started (the root)."""
    rule = FaultRule("kill", frozenset({"creat"}), process="a/f", nth=1)
    trace, summary, seen = _git_run(tmp_path, seed=4, faults=[rule])
    point = summary["faults"][0]
    assert point["process"].startswith("a/f") and point["call"] == "creat", point
    assert seen["codes"]["a"] == -9 and seen["codes"]["b"] == 0
    assert not any(line.split(" ")[1].startswith("a") for line in trace[trace.index(next(
        line for line in trace if "FAULT kill" in line)) + 1:])


# starts a child in a session of its own (as a per-call program is run), which writes store files forever
PARENT_OF_A_LOOPER = """
import subprocess, sys
store = sys.argv[1]
code = "import os, sys\\nopen(sys.argv[1] + '/pid', 'w').write(str(os.getpid()))\\nwhile True:\\n    open(sys.argv[1] + '/x', 'w').write('x')"
subprocess.Popen([sys.executable, "-c", code, store], start_new_session=True).wait()
"""


def test_a_killed_workers_children_are_reaped_before_anything_else_runs(tmp_path):
    """A program asking whether a dead lock holder lives (``kill(pid, 0)``, as Wowbagger does) must get
    one answer in every run: the killed tree's children are reaped when the kill returns, not when
    init gets round to their zombies (that was real time, and Wowbagger's history differed with it)."""
    store = tmp_path / "store"
    store.mkdir()
    script = tmp_path / "parent.py"
    script.write_text(PARENT_OF_A_LOOPER)
    with Scheduler(1, prefixes=[str(store)], depth=2, expected_points=100, stuck_s=60) as s:
        s.spawn("a", [sys.executable, str(script), str(store)])
        s.run_until(5_000_000)
        pid = int((store / "pid").read_text())
        assert "a/f1" in s.by_name and not s.by_name["a/f1"].gone
        s.kill(s.by_name["a"])
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)    # not a zombie: reaped


#: the deterministic mode's default nemesis before pause, clock and lost-reply joined it: these short runs are
#: about replay and control, not about every fault landing in a second of virtual time
KILL_FSYNC = ("--nemesis", "kill,fsync")


def _run(store: Path, *args: str, cwd: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    args = args if "--nemesis" in args or "--config" in args else (*args, *KILL_FSYNC)
    return subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd, env={**os.environ, **(env or {})})


def _three_runs(store: Path, *args: str, one_path_length: bool = False) -> list[dict]:
    """Three runs of one command at once, each in a store of its own, its path of another length unless
    ``one_path_length``, each started from another directory with another variable in its environment
    (a run's processes start from one stable environment: docs/deterministic.md), at once (a history
    that depended on real time would differ sooner under the load they make, and the suite waits for one
    run, not three): each ends with a verdict (not a crash), all write one history and one results.json
    (the store's path, in the reproduce command, aside); their results, in order."""
    stores = [store / (f"r{i}" if one_path_length else "abc"[i] * (1 + 9 * i)) for i in range(3)]
    cwds = [None, str(store), "/"]
    envs = [{}, {"UNRELATED_TO_THE_RUN": "x" * 60}, {"TERM_PROGRAM": "y" * 7}]
    with ThreadPoolExecutor(3) as pool:
        done = list(pool.map(lambda i: _run(stores[i], *args, cwd=cwds[i], env=envs[i]), range(3)))
    for res in done:
        assert res.returncode in (0, 2), res.stderr[-2000:]
    paths = [next(s.glob("*/2*/results.json")) for s in stores]
    runs = [json.loads(p.read_text()) for p in paths]
    assert len({r["history_sha256"] for r in runs}) == 1
    assert len({p.read_text().replace(str(s), "STORE") for p, s in zip(paths, stores)}) == 1
    # and no process read the machine's clock through a file (its determinism would rest on luck)
    assert "clock_files" not in runs[0]["deterministic"], runs[0]["deterministic"]["clock_files"]
    return runs


def _pinned_calls_decided_at_their_instant(store: Path) -> int:
    """Every call the run pinned at an instant (an op's ``clock_ms``: a lease-boundary probe, a takeover
    at ``expires_at``) and that was decided says it decided at that instant, or later (a clock floor
    above it); how many said exactly it. A black box's program reads its wall clock from the shim, so
    the pin must reach it (``$CHAOS_SCHED_WALL_MS``): when it did not, such a call was decided at the
    virtual time instead, before its instant, and every probe missed its boundary."""
    from workloads.coverage import attempts

    history = [json.loads(line) for line in next(store.rglob("history.jsonl")).read_text().splitlines()]
    exact = 0
    for a in attempts(history):
        observed = a.observed_ms()
        if a.clock_ms is None or observed is None:
            continue
        assert observed >= a.clock_ms, (a.f, a.intent, observed, a.clock_ms)
        exact += observed == a.clock_ms
    return exact


def test_gitjournal_three_runs_of_one_seed_give_one_history(tmp_path):
    assert sut.get("gitjournal").abilities({})["deterministic"].ok
    args = ("--deterministic", "--backend", "gitjournal", "--seed", "4", "--workers", "2", "--time-limit", "2")
    # (one run in about six differed before a wait right after starting a child became a stop: a vfork
    # parent could read subprocess's exec-error pipe before or after the kernel closed the child's end)
    first = _three_runs(tmp_path, *args)[0]
    assert first["stats"]["ops"] > 20 and first["deterministic"]["points"] > 300
    assert first["verdict"] == "valid", first["notes"]
    assert all(v["took_effect"] >= 1 for v in first["fault_coverage"].values())
    # a kill and an EIO at named points, the lock's temp file named by its process, not its pid
    hit = [f for f in first["deterministic"]["faults"] if not f.get("missed")]
    assert {f["action"] for f in hit} == {"kill", "EIO"}
    assert not any(re.search(r"\.\d{3,}\.", f["path"]) for f in hit), hit


BLACKBOX = ("--backend", "external", "--command", "chaos backend sqlite",
            "--profile", str(Path(__file__).resolve().parents[1] / "profiles" / "chaos-sqlite-blackbox.yaml"))


def test_the_suites_cli_as_a_black_box_three_runs_of_one_seed_give_one_history(tmp_path):
    """One CLI process per call, each the worker's child of its own name under the shim; the worker
    waits for its reply through the scheduler (a poll over its pipes and its pidfd)."""
    assert sut.get("external").abilities({"command": "chaos backend sqlite"})["deterministic"].ok
    assert not sut.get("external").abilities({"command": "ruby prog.rb"})["deterministic"].ok
    first = _three_runs(tmp_path, "--deterministic", *BLACKBOX, "--seed", "5", "--workers", "2", "--time-limit", "1")[0]
    assert first["verdict"] != "invalid", first["notes"]
    assert first["stats"]["ok"] > 10
    # the faults landed inside the per-call CLI processes, named after their worker and call
    hit = [f for f in first["deterministic"]["faults"] if not f.get("missed")]
    assert {f["action"] for f in hit} == {"kill", "EIO"}
    assert all(re.fullmatch(r"w\d+\.\d+/f\d+", f["process"]) for f in hit), hit
    assert all(f["path"].startswith("ledgers/ledger-1/claims.db") for f in hit), hit


def test_a_black_box_call_pinned_at_an_instant_is_decided_at_that_instant(tmp_path):
    """The racers' lease-boundary probes and takeovers at ``expires_at`` pin their call's clock; a black
    box reads its own (the shim's), so the hosting worker hands the pin to its program."""
    res = _run(tmp_path, "--deterministic", *BLACKBOX, "--seed", "1", "--workers", "4", "--time-limit", "1")
    assert res.returncode in (0, 2), res.stderr[-2000:]
    assert _pinned_calls_decided_at_their_instant(tmp_path) > 5


WOWBAGGER = Path(__file__).resolve().parents[1] / ".." / "shared" / "sut" / "wowbagger-0.1.0-alpha.7" / "bin" / "wowbagger.js"


def _provisioned_ledger(tmp_path: Path) -> Path:
    """A Wowbagger ledger in a fresh git repo under ``tmp_path/repo``, provisioned outside the scheduler."""
    ledger = tmp_path / "repo" / "l1"
    ledger.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ledger.parent)], check=True)
    res = subprocess.run(["node", str(WOWBAGGER), "provision", "--ledger", str(ledger), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return ledger


@pytest.mark.skipif(not WOWBAGGER.exists() or shutil.which("node") is None, reason="Wowbagger or node not here")
def test_node_with_every_thread_controlled_repeats_its_schedule(tmp_path):
    """The real Wowbagger program (Node) with CHAOS_SCHED_THREADS=1: its threads (main, libuv's pool,
    V8's helpers) and its git child are all scheduled, their condition waits, joins and epoll are
    scheduler waits, and three runs give one trace. (Its randomness does not repeat yet: the
    backend stays refused; docs/deterministic.md.)"""
    from chaos.deterministic.shim import THREADED_ENV

    ledger = _provisioned_ledger(tmp_path)
    traces = []
    for _ in range(3):
        with Scheduler(1, prefixes=[str(tmp_path / "repo")], stuck_s=60) as s:
            s.spawn("n", ["node", str(WOWBAGGER), "claim", "capabilities", "--ledger", str(ledger), "--json"],
                    env=THREADED_ENV)
            s.run_all()
            traces.append(list(s.trace))
            assert s.procs and all(p.popen.returncode == 0 for p in s.procs.values() if p.popen)
            assert not s.summary()["notes"]
    names = {line.split(" ")[1] for line in traces[0]}
    assert {"n/t0", "n/t1", "n/f1/t0"} <= names and len(names) >= 5, sorted(names)
    assert any(" cond " in line for line in traces[0]) and any(" epoll " in line for line in traces[0])
    assert traces[1] == traces[0] and traces[2] == traces[0]


@pytest.mark.skipif(not WOWBAGGER.exists() or shutil.which("node") is None, reason="Wowbagger or node not here")
def test_idle_threads_are_not_granted_until_what_they_wait_for_can_have_changed(tmp_path):
    """Two Node processes at once: their idle threads (V8's workers on a condition, the inspector's
    semaphore, a loop in epoll) are granted again only once their object was signalled, posted or
    unlocked in their own process, or one of their fds is ready (the scheduler polls duplicates of
    them), not after every slice anywhere: 935 grants of which 650 repeated a wait that could not
    have ended, before; 178 and 14 now. Both still exit 0 and say nothing ran unscheduled."""
    from chaos.deterministic.shim import THREADED_ENV

    ledger = _provisioned_ledger(tmp_path)
    with Scheduler(1, prefixes=[str(tmp_path / "repo")], stuck_s=60) as s:
        for name in ("a", "b"):
            s.spawn(name, ["node", str(WOWBAGGER), "claim", "capabilities", "--ledger", str(ledger), "--json"],
                    env=THREADED_ENV)
        s.run_all()
        trace = list(s.trace)
        assert all(p.popen.returncode == 0 for p in s.procs.values() if p.popen)
        assert not s.summary()["notes"]
    grants = [tuple(line.split(" ")[1:4]) for line in trace]   # (thread, call, its wait's or point's index)
    repeated = len(grants) - len(set(grants))
    assert {g[0] for g in grants} >= {"a/t0", "b/t0", "a/t1", "b/t1"}
    assert repeated * 5 < len(grants), f"{repeated} of {len(grants)} grants repeated a wait"


@pytest.mark.skipif(not WOWBAGGER.exists() or shutil.which("node") is None, reason="Wowbagger or node not here")
def test_a_freeze_on_one_thread_of_a_node_program_holds_every_thread_of_it(tmp_path):
    """A freeze landing on a libuv pool thread's open holds the whole process, as a SIGSTOP would: none of
    its threads is granted until the hold ends (a thread-level hold let the others run on: one grant here,
    n/t1's epoll; in two Wowbagger soak runs the main thread spun 60 s without a point), then the program
    ends well."""
    from chaos.deterministic.shim import THREADED_ENV

    ledger = _provisioned_ledger(tmp_path)
    hold = 200_000_000
    rule = FaultRule("freeze", frozenset({"open"}), process="n/t", nth=1, hold_ns=hold)
    with Scheduler(1, prefixes=[str(tmp_path / "repo")], stuck_s=60, faults=[rule]) as s:
        s.spawn("n", ["node", str(WOWBAGGER), "claim", "capabilities", "--ledger", str(ledger), "--json"],
                env=THREADED_ENV)
        s.run_all()
        assert s.by_name["n"].popen.returncode == 0 and not s.summary()["notes"]
        trace = list(s.trace)
    ev = rule.evidence
    assert ev is not None and ev["thread"] != "n/t0" and ev["resume_vt_ns"] == ev["vt_ns"] + hold, ev
    during = [line for line in trace if ev["vt_ns"] < int(line.split(" ")[0]) < ev["resume_vt_ns"]
              and line.split(" ")[1].startswith("n/t")]
    assert not during, during
    assert any(line.split(" ")[1].startswith("n/t") and int(line.split(" ")[0]) >= ev["resume_vt_ns"]
               for line in trace)


# a main thread that polls (setImmediate) for a write on libuv's pool to end: its loop never waits
NODE_SPIN = """
const fs = require('fs');
let done = false, turns = 0;
fs.writeFile(process.argv[2], 'x', () => { done = true; });
function spin() { turns++; if (!done) setImmediate(spin); else fs.writeFileSync(process.argv[2] + '.turns', String(turns)); }
spin();
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node not here")
def test_an_event_loop_that_never_waits_gives_its_turn_up(tmp_path):
    """Node's main thread polls for its pool thread's write with setImmediate: every epoll of its loop has
    a timeout of 0, so it never stopped, the pool thread was never granted, and the scheduler reported it
    stuck (a default Wowbagger run, seed 7, ``unknown`` so: V8's tasks kept its loop busy). Now 64 such
    epolls in a row are a "spin" stop: the write ends, the program exits, two runs give one trace."""
    (tmp_path / "spin.js").write_text(NODE_SPIN)
    store = tmp_path / "store"
    traces = _two_spinning_runs(store, "n", ["node", str(tmp_path / "spin.js"), str(store / "f")],
                                lambda: int((store / "f.turns").read_text()) >= 64)
    assert any(line.split(" ")[1:3] == ["n/t0", "spin"] for line in traces[0])
    assert traces[1] == traces[0]


def _two_spinning_runs(store: Path, name: str, argv: list[str], after_each) -> list[list[str]]:
    """Two runs of ``argv`` (every thread controlled) whose store is ``store``: each ends with exit 0, no
    unserialized concurrency and ``after_each()`` true; their traces."""
    from chaos.deterministic.shim import THREADED_ENV

    store.mkdir()
    traces = []
    for _ in range(2):
        with Scheduler(1, prefixes=[str(store)], stuck_s=20) as s:
            s.spawn(name, argv, env=THREADED_ENV)
            s.run_all()
            assert s.by_name[name].popen.returncode == 0 and not s.summary()["notes"]
            traces.append(list(s.trace))
        assert after_each()
    return traces


C_SPIN = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>
static volatile int done;
static const char *path;
static void *work(void *arg) {
    (void)arg;
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd >= 0) { (void)write(fd, "x", 1); close(fd); }
    done = 1;
    return NULL;
}
int main(int argc, char **argv) {
    path = argv[2];
    pthread_t t;
    pthread_create(&t, NULL, work, NULL);
    long turns = 0;
    while (!done) {
        turns++;
        if (!strcmp(argv[1], "poll")) poll(NULL, 0, 0);
        else if (!strcmp(argv[1], "ppoll")) { struct timespec zero = {0, 0}; ppoll(NULL, 0, &zero, NULL); }
        else { struct timeval zero = {0, 0}; select(0, NULL, NULL, NULL, &zero); }
    }
    pthread_join(t, NULL);
    printf("%ld\n", turns);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not here")
@pytest.mark.parametrize("call", ["poll", "ppoll", "select"])
def test_a_loop_that_polls_without_waiting_gives_its_turn_up(tmp_path, call):
    """The "spin" stop for every call an event loop may poll with, not only epoll: a thread that polls
    with a timeout of 0 until another thread's write is done held the turn for ever (that thread runs only
    once this one stops; the scheduler reported it stuck). Now 64 such polls in a row are a stop."""
    (tmp_path / "spin.c").write_text(C_SPIN)
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(tmp_path / "spin"), str(tmp_path / "spin.c")], check=True)
    store = tmp_path / "store"
    traces = _two_spinning_runs(store, "c", [str(tmp_path / "spin"), call, str(store / "f")],
                                lambda: (store / "f").read_text() == "x")
    assert any(line.split(" ")[2] == "spin" for line in traces[0]), traces[0][:20]
    assert traces[1] == traces[0]


NODE_CLOSE_AND_STAT = """
const fs = require('fs');
const [store, outside] = process.argv.slice(2);
const a = fs.openSync(store + '/a', 'w');
fs.writeSync(a, 'x');
fs.closeSync(a);
const b = fs.openSync(outside, 'w');
fs.writeSync(b, 'y');
fs.closeSync(b);
const st = fs.statSync(store + '/a');
fs.writeFileSync(store + '/seen', `${a === b} ${st.mtimeMs === st.ctimeMs} ${st.mtimeMs}`);
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node not here")
def test_a_node_programs_closes_and_stats_through_syscall_are_the_shims(tmp_path):
    """libuv closes and stats through syscall(2), not close() and statx(): the shim saw no close of a
    Node program's store file, so the fd's number stayed that file's, and the next file to get the number
    (here one outside the store) had its write taken for a write of the store file; and its stats saw the
    kernel's times. Now a close is a point, the outside write is none, and a stat of a store path has the
    virtual times (atime = ctime = mtime) as through libc."""
    from chaos.deterministic.shim import THREADED_ENV

    (tmp_path / "prog.js").write_text(NODE_CLOSE_AND_STAT)
    store = tmp_path / "store"
    store.mkdir()
    with Scheduler(1, prefixes=[str(store)], stuck_s=60) as s:
        s.spawn("n", ["node", str(tmp_path / "prog.js"), str(store), str(tmp_path / "outside")], env=THREADED_ENV)
        s.run_all()
        assert s.by_name["n"].popen.returncode == 0 and not s.summary()["notes"]
        points = [line.split(" ")[2:] for line in s.trace if line.split(" ")[1].startswith("n/")]
    same_fd, same_times, mtime_ms = (store / "seen").read_text().split(" ")
    assert same_fd == "true"                          # the outside file got the store file's fd number
    assert [p[0] for p in points if p[-1] == "a"] == ["creat", "write", "close"], points
    assert same_times == "true"
    assert float(mtime_ms) >= 1767225600 * 1000       # the virtual epoch's (2026-01-01), not the machine's


@pytest.mark.skipif(not WOWBAGGER.exists() or shutil.which("node") is None, reason="Wowbagger or node not here")
def test_wowbaggers_minted_namespaces_are_distinct_and_do_not_depend_on_the_store_paths_length(tmp_path):
    """Node's randomness shifts with the length of its argv, where the ledger's path was: in this mode the
    calls run in the run dir and name their ledger relative to it, so a store elsewhere mints the same;
    each provision draws from a stream of its own, so two ledgers get two namespaces."""
    from chaos.deterministic.run import setup_programs_virtual
    from chaos.runner import RunConfig
    from chaos.store import RunDir

    minted = []
    for store in (tmp_path / "s", tmp_path / ("a-much-longer-store-name-" * 3)):
        cfg = RunConfig(backend="external", backend_command=f"node {WOWBAGGER}", deterministic=True,
                        profile=str(Path(__file__).resolve().parents[1] / "profiles" / "wowbagger-0.1.0-alpha.7.yaml"))
        target = sut.get("external").target(cfg, RunDir(str(store), "w"), lambda pid: None, lambda path: None)
        try:
            with setup_programs_virtual():
                target.setup(["wbns_" + "0" * 32, "wbns_" + "1" * 32], {})
            minted.append(target.namespaces)
            assert target.backend.argv(["x", "{ledger}"], next(iter(target.spec["ledgers"].values())))[-1] == "ledgers/ledger-1"
        finally:
            target.close()
    assert minted[0] == minted[1] and minted[0][0] != "wbns_" + "0" * 32, minted
    # each ledger its own namespace (one seeded stream for every provision minted one namespace for all)
    assert len(set(minted[0])) == 2, minted


@pytest.mark.slow
@pytest.mark.skipif(not WOWBAGGER.exists() or shutil.which("node") is None, reason="Wowbagger or node not here")
def test_wowbagger_three_runs_of_one_seed_give_one_history(tmp_path):
    """The real program, one node per call with every thread controlled, its set-up (provision mints
    the namespace) on the virtual epoch and seeded randomness: one history in three runs. Its kills
    leave a lock whose holder Wowbagger checks with ``kill(pid, 0)``: the killed node is reaped at the
    kill (before, init reaped it when it got round to it, and three runs gave three histories in CI).
    Slow: about 40,000 scheduling points per run, 10-60 s each on the shared machine."""
    args = ("--deterministic", "--backend", "external", "--command", f"node {WOWBAGGER}",
            "--profile", str(Path(__file__).resolve().parents[1] / "profiles" / "wowbagger-0.1.0-alpha.7.yaml"),
            "--seed", "1", "--workers", "2", "--time-limit", "1")
    assert sut.get("external").abilities({"command": f"node {WOWBAGGER}"})["deterministic"].ok
    # one path length: a Node program's heap holds its environment, where the run dir's path is (its
    # TMPDIR, the scheduler's socket and prefix), and V8's collections move with its size (docs/deterministic.md)
    runs = _three_runs(tmp_path, *args, one_path_length=True)
    assert runs[0]["stats"]["ok"] > 10 and runs[0]["verdict"] != "invalid", runs[0]["notes"]
    # each node's start (and each git's) flew beside the schedule (flights.py), in all three alike
    summary = runs[0]["deterministic"]
    assert summary["flights"] > runs[0]["stats"]["ops"] and summary["flight_points"] > 20 * summary["flights"] // 10


# a Node program a controlled process starts: it says hello on its stdout, then writes a store file
NODE_CHILD = """
const fs = require("fs");
console.log(`hello ${process.pid}`);
fs.writeFileSync(process.argv[2], "x");
"""
# runs it (the per-call way: its own session, its stdin filled before it starts) and keeps what it said
NODE_PARENT = """
import os, subprocess, sys
store, script = sys.argv[1], sys.argv[2]
env = dict(os.environ, **{k: v for k, v in (kv.split("=") for kv in sys.argv[3:])})
for i in range(2):
    out = subprocess.run(["node", script, os.path.join(store, f"x{i}")], env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, start_new_session=True).stdout
    with open(os.path.join(store, f"said{i}"), "wb") as f:
        f.write(out)
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node not here")
def test_a_node_programs_start_flies_and_joins_the_schedule_by_its_own_clock(tmp_path):
    """An exec'd Node program (``CHAOS_SCHED_VPIDS=1``) starts as a flight: its threads are granted beside
    the schedule, and what it did joins the trace as one block, at the virtual time its own grants reached,
    before the point it landed at (its first write to stdout: the parent could read it). Three runs give one
    trace, one of them with two CPU burners beside it (a join that depended on how fast the flight ran
    would move), and the parent heard the same virtual pid each time."""
    from chaos.deterministic.flights import FLIGHT_STEP_NS
    from chaos.deterministic.shim import THREADED_ENV

    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "child.js").write_text(NODE_CHILD)
    (tmp_path / "parent.py").write_text(NODE_PARENT)
    argv = [sys.executable, str(tmp_path / "parent.py"), str(store), str(tmp_path / "child.js"),
            *(f"{k}={v}" for k, v in THREADED_ENV.items())]
    runs = []
    for n in range(3):
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 if n == 1 else 0)]
        try:
            with Scheduler(3, prefixes=[str(store)], stuck_s=60) as s:
                s.spawn("p", argv)
                s.run_all()
                assert s.by_name["p"].popen.returncode == 0
                runs.append((list(s.trace), s.summary(), [(store / f"said{i}").read_text() for i in range(2)]))
        finally:
            for b in burners:
                b.kill()
                b.wait()
    trace, summary, said = runs[0]
    assert summary["flights"] >= 2 and summary["flight_points"] > 20, summary
    assert said[0].startswith("hello 4194") and said[0] != said[1], said   # virtual pids, one per child
    child = "p/f1/"
    mine = [i for i, line in enumerate(trace) if line.split(" ")[1].startswith(child)]
    out = next(i for i in mine if " out " in trace[i])
    flown = [i for i in mine if i < out]
    # its start is one block: nothing of the schedule between its grants, its clock 2 ms a grant
    assert len(flown) > 10 and flown == list(range(flown[0], out)), (flown, out)
    times = [int(trace[i].split(" ")[0]) for i in flown]
    assert all(b - a >= FLIGHT_STEP_NS for a, b in zip(times, times[1:]))
    assert int(trace[out].split(" ")[0]) > times[-1]    # the stop it landed at comes after, in the schedule
    assert runs[1][0] == trace and runs[2][0] == trace
    assert [r[2] for r in runs] == [said] * 3
    assert not summary["notes"]


@pytest.mark.skipif(shutil.which("node") is None, reason="node not here")
def test_a_flight_that_never_reaches_a_point_is_reported_stuck_not_waited_for(tmp_path):
    """A Node child that spins before its first point: the schedule, waiting for it to land, says which
    flight and where within ``stuck_s`` (wall time bounds that wait), instead of hanging."""
    from chaos.deterministic.processes import SchedulerStuck
    from chaos.deterministic.shim import THREADED_ENV

    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "child.js").write_text("while (true) {}\n")
    (tmp_path / "parent.py").write_text(NODE_PARENT)
    argv = [sys.executable, str(tmp_path / "parent.py"), str(store), str(tmp_path / "child.js"),
            *(f"{k}={v}" for k, v in THREADED_ENV.items())]
    with Scheduler(3, prefixes=[str(store)], stuck_s=5) as s:
        s.spawn("p", argv)
        with pytest.raises(SchedulerStuck, match=r"in flight, 5 s without a point: p/f1/t\d"):
            s.run_all()


def test_a_relative_program_path_is_made_absolute_for_a_program_run_from_its_run_dir(tmp_path, monkeypatch):
    # a deterministic run starts the program's calls in the run dir: `node ../sut/bin/prog.js` as typed
    # from here must name the same file there (it stopped at setup with MODULE_NOT_FOUND)
    from chaos.sut.external import paths_made_absolute

    (tmp_path / "sut" / "bin").mkdir(parents=True)
    (tmp_path / "sut" / "bin" / "prog.js").write_text("")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    prog = str(tmp_path / "sut" / "bin" / "prog.js")
    assert paths_made_absolute("node ../sut/bin/prog.js --mode x/y sqlite") == f"node {prog} --mode x/y sqlite"
    assert paths_made_absolute(f"node '{prog}'") == f"node {prog}"
