"""A Node program's threads hand each other the turn without a round trip to the scheduler
(chaos/deterministic/handoffs.py, sched.c "Hand-offs"), and its schedule still repeats."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from chaos.deterministic.rules import FaultRule
from chaos.deterministic.scheduler import Scheduler
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


class _Counting(Scheduler):
    """Counts the stops that came as a chain's (``h <thread> <stop>|``) ahead of another message."""
    chained = 0

    def _take(self, t, line):
        rest = line
        while rest.startswith("h "):
            self.chained += 1
            rest = rest.partition("|")[2]
        super()._take(t, line)


def _run(store, script, faults=()) -> tuple[list[str], dict]:
    with _Counting(5, prefixes=[str(store)], stuck_s=60, faults=list(faults)) as s:
        s.spawn("a", ["node", str(script), str(store)], env=dict(os.environ, **THREADED_ENV))
        s.run_all()
        assert s.by_name["a"].popen.returncode == 0
        return list(s.trace), dict(s.summary(), chained=s.chained)


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
    assert summary["chained"] == summary["handoffs"], summary  # each came ahead of the message ending its chain
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


def test_a_chain_of_hand_offs_is_taken_in_its_order_each_stop_as_its_threads():
    """A chain's stops come ahead of the message that ends it, on that thread's connection: each is taken
    as its own thread's, in the chain's order, then the message; a thread that ended the chain by exiting
    sends the chain alone."""
    from chaos.deterministic.handoffs import HandOffs
    from chaos.deterministic.processes import Proc, Thread

    class Chain(HandOffs):
        def __init__(self):
            self.taken = []

        def _message(self, t, line):
            self.taken.append((t.name, line))

    proc = Proc("p", 10, None, -1)
    proc.threads = [Thread(f"p/t{i}", 10, 10 + i, None, proc, 1.0, state="waiting", call="cond") for i in range(3)]
    chain = Chain()
    chain._take(proc.threads[2], "h 0 W 4 100 0.0.- -1 epoll@5 >1@150|h 1 W 9 150 0.0.3 -1 cond:3 >2@200|"
                                 "P 12 write 5 200 0.0.- /s/f|x")
    assert chain.taken == [("p/t0", "W 4 100 0.0.- -1 epoll@5 >1@150"), ("p/t1", "W 9 150 0.0.3 -1 cond:3 >2@200"),
                           ("p/t2", "P 12 write 5 200 0.0.- /s/f|x")]
    chain.taken.clear()
    chain._take(proc.threads[1], "h 2 W 13 250 0.0.- -1 cond:7 >1@300")
    assert chain.taken == [("p/t2", "W 13 250 0.0.- -1 cond:7 >1@300")]
