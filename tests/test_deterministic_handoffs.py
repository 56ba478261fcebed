"""A Node program's threads hand each other the turn without a round trip to the scheduler
(chaos/deterministic/handoffs.py, sched.c "Hand-offs"), and its schedule still repeats."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from chaos.deterministic.scheduler import FaultRule, Scheduler
from chaos.deterministic.shim import THREADED_ENV

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node not here")

# fs/promises: every call goes to libuv's pool thread and back to the event loop (a cond, an epoll)
FILES = """
const fs = require('fs/promises');
(async () => {
  for (let i = 0; i < 6; i++) {
    await fs.writeFile(process.argv[2] + '/f' + i, 'x' + i);
    await fs.readFile(process.argv[2] + '/f' + i);
    await fs.stat(process.argv[2] + '/f' + i);
  }
  console.log('done');
})();
"""


def _run(store, script, faults=()) -> tuple[list[str], dict]:
    with Scheduler(5, prefixes=[str(store)], stuck_s=60, faults=list(faults)) as s:
        s.spawn("a", ["node", str(script), str(store)], env=dict(os.environ, **THREADED_ENV))
        s.run_all()
        assert s.by_name["a"].popen.returncode == 0
        return list(s.trace), s.summary()


def test_a_node_programs_threads_hand_each_other_the_turn_and_the_schedule_repeats(tmp_path):
    """Most of its pool thread's and event loop's waits end by a hand-off; three runs (one with two CPU
    burners beside it) give one trace, hand-offs included, and no concurrency the scheduler did not see."""
    script = tmp_path / "files.js"
    script.write_text(FILES)
    runs = []
    for n in range(3):
        store = tmp_path / f"s{n}"
        store.mkdir()
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 if n == 1 else 0)]
        try:
            runs.append(_run(store, script))
        finally:
            for b in burners:
                b.kill()
                b.wait()
    trace, summary = runs[0]
    assert summary["handoffs"] >= 30, summary                  # 18 file calls, each there and back
    assert summary["points"] >= summary["handoffs"] + summary["flight_points"]
    assert not summary["notes"], summary["notes"]
    assert [r[0] for r in runs] == [trace] * 3
    assert {r[1]["handoffs"] for r in runs} == {summary["handoffs"]}


def test_no_hand_off_while_a_fault_may_aim_at_any_point_of_the_process(tmp_path):
    """A rule on any call of the process (a racer's freeze, a clock step) counts every point: while one is
    armed its grants allow no hand-off, so no point of it goes by unseen."""
    script = tmp_path / "files.js"
    script.write_text(FILES)
    store = tmp_path / "s"
    store.mkdir()
    never = FaultRule("freeze", None, process="a", nth=10**9)
    trace, summary = _run(store, script, faults=[never])
    assert summary["handoffs"] == 0 and never.seen > 30, (summary, never.seen)


def test_a_thread_frozen_by_a_fault_is_not_taken_for_one_a_hand_off_has_not_reached():
    """A freeze marks its thread ``held`` (its next grant is not faulted again); that is not a hand-off's
    deferral: with no other thread of its process running, what it sends is taken at once."""
    from chaos.deterministic.handoffs import HandOffs
    from chaos.deterministic.scheduler import Proc, Thread

    class Alone(HandOffs):
        running = None

    frozen = Thread("p/t0", 10, 10, None, Proc("p", 10, None, -1), 1.0, state="sleeping", call="epoll", held=True)
    assert not Alone()._before_its_turn(frozen)
    frozen.deferred = True
    assert Alone()._before_its_turn(frozen)


def test_a_stop_no_hand_off_reached_is_said_a_close_is_not():
    """Once no thread of its process runs, what waited for a chain of hand-offs is taken as it came; a stop
    among it came from a thread that ran beside the chain, unserialized: a note (the run ``unknown``). A
    close is not: a killed process's threads close where they wait."""
    from chaos.deterministic.handoffs import HandOffs
    from chaos.deterministic.scheduler import Proc, Thread

    class Chain(HandOffs):
        running = None

        def __init__(self):
            self.notes, self.taken = [], []

        def _message(self, t, line):
            self.taken.append((t.name, line))

        def _close_of(self, t):
            self.taken.append((t.name, "closed"))

    proc = Proc("p", 10, None, -1)
    stray = Thread("p/t1", 10, 11, None, proc, 1.0, state="waiting", call="cond", seq=4,
                   buf=b"S 7 write\n", deferred=True)
    killed = Thread("p/t2", 10, 12, None, proc, 1.0, state="waiting", call="epoll", deferred=True, closed=True)
    proc.threads = [stray, killed]
    chain = Chain()
    chain._drain(proc)
    assert chain.taken == [("p/t1", "S 7 write"), ("p/t2", "closed")]
    assert chain.notes == ["p/t1 stopped at a point though no hand-off of p's reached it (it waited at cond #4)"]
    assert not stray.deferred and not killed.deferred
