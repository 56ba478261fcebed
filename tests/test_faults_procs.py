"""Process faults on real process trees: kill + reap, pause/resume, the freezer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from chaos.faults import procs
from proc_status import wait_running

TREE = [sys.executable, "-c",
        "import subprocess,sys,time; [subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']) for _ in range(2)];"
        " print('up', flush=True); time.sleep(60)"]


@pytest.fixture
def tree():
    p = subprocess.Popen(TREE, stdout=subprocess.PIPE, start_new_session=True)
    procs.register(p.pid)
    assert p.stdout.readline().strip() == b"up"
    yield p
    procs.ProcessTree(p.pid, popen=p).kill()
    p.stdout.close()
    procs.unregister(p.pid)


def _gone_or_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_kill_takes_the_whole_tree_and_reaps(tree):
    pids = procs.ProcessTree(tree.pid).pids()
    assert len(pids) == 3
    killed = procs.ProcessTree(tree.pid, popen=tree).kill()
    assert sorted(killed) == sorted(pids)
    assert tree.returncode == -9
    assert all(_gone_or_zombie(p) for p in pids)
    assert tree.pid in procs._registry and tree.pid not in procs.registered()


def test_pause_and_resume_every_member(tree):
    t = procs.ProcessTree(tree.pid)
    paused = t.pause()
    assert all(psutil.Process(p).status() == psutil.STATUS_STOPPED for p in paused)
    t.resume()
    time.sleep(0.05)
    assert all(psutil.Process(p).status() != psutil.STATUS_STOPPED for p in paused)


@pytest.mark.parametrize("inner_first", [False, True])
def test_a_resume_leaves_what_another_pause_still_holds(tree, inner_first):
    """Two faults pause one process (a worker's pause and a freeze of its call): the first to heal
    leaves it stopped while the other still holds it, and the last one continues it. The old resume
    continued every process of its tree, whoever had stopped it."""
    outer = procs.ProcessTree(tree.pid)
    root, child, other = outer.pids()
    inner = procs.ProcessTree(child)
    first, last = (inner, outer) if inner_first else (outer, inner)
    first.pause()
    last.pause()
    continued = first.resume()
    assert child not in continued
    assert sorted(continued) == ([] if inner_first else sorted([root, other]))
    assert psutil.Process(child).status() == psutil.STATUS_STOPPED
    assert sorted(last.resume()) == (sorted([root, child, other]) if inner_first else [child])
    assert all(wait_running(p) for p in (root, child, other))


# a root that forks sleeping children as fast as it can (up to 300), so some are forked between pause's
# look at the tree and the root's SIGSTOP
FORKING = [sys.executable, "-c",
           "import os,sys,time\nprint('up', flush=True)\nfor _ in range(300):\n    if os.fork() == 0:\n"
           "        time.sleep(60); os._exit(0)\ntime.sleep(60)"]


def test_pause_stops_the_children_forked_while_it_looked():
    """A child its parent forked after pause looked at the tree and before the parent stopped ran on
    through the pause (a worker's CLI child, say; fails on the old code 3 runs of 3): pause looks
    again until the tree has no member it has not stopped."""
    for _ in range(3):
        p = subprocess.Popen(FORKING, stdout=subprocess.PIPE, start_new_session=True)
        procs.register(p.pid)
        try:
            assert p.stdout.readline().strip() == b"up"
            t = procs.ProcessTree(p.pid)
            paused = t.pause()
            members = t.snapshot()
            running = [m.pid for m in members if m.status() != psutil.STATUS_STOPPED]
            assert running == [] and {m.pid for m in members} <= set(paused)
        finally:
            procs.ProcessTree(p.pid, popen=p).kill()
            p.stdout.close()
            procs.unregister(p.pid)


def _group_alive(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that are not zombies."""
    alive = []
    for q in psutil.process_iter():
        try:
            if os.getpgid(q.pid) == pgid and q.status() != psutil.STATUS_ZOMBIE:
                alive.append(q.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return alive


def test_kill_leaves_no_child_forked_while_it_looked():
    """A child forked after kill's look at the tree and before its parent died was orphaned out of the
    tree and lived on (seen once in some 45 roots forking 300 children, so this fails on the old code
    only now and then): kill stops the tree as pause does first, looking until nothing new is there."""
    for _ in range(10):
        p = subprocess.Popen(FORKING, stdout=subprocess.PIPE, start_new_session=True)
        procs.register(p.pid)
        try:
            assert p.stdout.readline().strip() == b"up"
            procs.ProcessTree(p.pid, popen=p).kill()
            assert _group_alive(p.pid) == []
        finally:
            for pid in _group_alive(p.pid):   # the group this test started, and only it
                os.kill(pid, signal.SIGKILL)
            p.stdout.close()
            procs.unregister(p.pid)


@pytest.mark.skipif(not procs.freezer_available(), reason="cgroup v1 freezer needs root")
def test_freezer_freezes_thaws_and_removes(tree):
    f = procs.Freezer(f"claimchaos-test-{tree.pid}")
    try:
        f.add(procs.ProcessTree(tree.pid).pids())
        assert sorted(f.pids()) == sorted(procs.ProcessTree(tree.pid).pids())
        f.freeze()
        assert f.state() == "FROZEN"
        cpu = [psutil.Process(p).cpu_times() for p in f.pids()]
        f.thaw()
        assert f.state() == "THAWED" and len(cpu) == 3
    finally:
        f.remove()
    assert not f.path.exists()


def test_subreaper_reaps_orphans_at_once():
    # run in a child so the pytest process does not become a subreaper
    code = (
        "import subprocess,sys,time,psutil\n"
        "from chaos.faults import procs\n"
        "assert procs.set_child_subreaper()\n"
        "p = subprocess.Popen([sys.executable,'-c','import subprocess,sys,time; subprocess.Popen([sys.executable,\"-c\",\"import time; time.sleep(60)\"]); time.sleep(60)'], start_new_session=True)\n"
        "time.sleep(0.5)\n"
        "pids = procs.ProcessTree(p.pid, popen=p).kill()\n"
        "assert len(pids) == 2, pids\n"
        "assert not any(psutil.pid_exists(x) for x in pids), pids\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "ok", out.stderr
