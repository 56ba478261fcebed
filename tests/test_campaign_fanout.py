"""chaos.campaign.fanout: items fanned out over a real Dask LocalCluster come back, each once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from chaos.campaign.fanout import ItemError, fan_out, parse_shard, shard_of
from chaos.errors import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def square_or_fail(x: int):
    if x == 3:
        os._exit(9)  # the worker process dies mid-item
    if x == 4:
        raise ValueError("four is refused")
    return x * x


def test_every_item_comes_back_once_a_dead_worker_and_a_raise_as_errors():
    results = dict(fan_out(square_or_fail, range(7), workers=2))
    assert sorted(results) == list(range(7))
    assert {k: v for k, v in results.items() if k not in (3, 4)} == {0: 0, 1: 1, 2: 4, 5: 25, 6: 36}
    assert isinstance(results[3], ItemError) and "worker running this item died" in str(results[3])
    assert results[4] == ItemError("ValueError: four is refused")


def test_shards_cover_the_items_once():
    items = list(range(11))
    parts = [shard_of(items, parse_shard(f"{i}/3")) for i in (1, 2, 3)]
    assert sorted(x for p in parts for x in p) == items and parts[0] == [0, 3, 6, 9]
    for bad in ("0/2", "3/2", "1/0", "a/b", "1-2", ""):
        with pytest.raises(UsageError):
            parse_shard(bad)


def test_bad_arguments_are_refused_before_any_cluster():
    with pytest.raises(UsageError):
        fan_out(abs, [1], scheduler="127.0.0.1:8786")  # no scheme
    with pytest.raises(UsageError):
        fan_out(abs, [1], workers=0)
    assert list(fan_out(abs, [], workers=1)) == []  # nothing to do starts nothing


DRIVER = """
import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.default_int_handler)   # as from a terminal, however pytest was started
from chaos.campaign.fanout import fan_out
from tests.test_campaign_fanout import sleep_long
print("started", flush=True)
for item, result in fan_out(sleep_long, range(4), workers=2):
    print(item, result, flush=True)
"""


def sleep_long(x: int):
    subprocess.run(["sleep", "300"], check=False)
    return x


def test_ctrl_c_closes_the_cluster_and_leaves_no_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tree = []
    try:
        driver = psutil.Process(proc.pid)
        deadline = time.monotonic() + 120
        sleepers = []
        while time.monotonic() < deadline and len(sleepers) < 2:  # both workers are mid-item
            sleepers = [p for p in driver.children(recursive=True) if _is_sleep(p)]
            time.sleep(0.2)
        assert len(sleepers) == 2, "the cluster never started two items"
        tree = driver.children(recursive=True)
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C to the driver alone: its workers hear nothing
        proc.wait(timeout=60)
        gone, alive = psutil.wait_procs(tree, timeout=30)
        assert not alive, [p.pid for p in alive]
    finally:
        for p in tree:  # a failed check must not leave the sleepers behind
            if p.is_running():
                p.kill()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def _is_sleep(p: psutil.Process) -> bool:
    try:
        return p.cmdline()[:2] == ["sleep", "300"]
    except psutil.Error:
        return False
