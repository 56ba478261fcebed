"""The host's own clocks: ``wall_ms`` on every call reply and the ``now`` command,
with and without libfaketime moving the worker's wall clock."""

from __future__ import annotations

import time

import pytest

from chaos.faults.faketime import ClockFault
from chaos.host import HostClient
from test_sqlite_support import ITEM, NS1, new_db

READ = {"ledger_namespace": NS1, "item_id": ITEM}


def ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def skewable(tmp_path):
    clock = ClockFault(str(tmp_path / "clock"))
    client = HostClient({"backend": "sqlite", "path": new_db(str(tmp_path))}, env=clock.env(),
                        log_path=str(tmp_path / "host.log"))
    yield client, clock
    client.kill()


def test_call_reply_carries_the_workers_wall_clock_and_now_answers(skewable):
    host, _ = skewable
    before = ms()
    reply, wall = host.call_with_wall("read", READ, timeout=10)
    after = ms()
    assert reply.exit == 0 and before <= wall <= after
    assert host.last_wall_ms == wall
    assert host.call("read", READ, timeout=10).exit == 0 and host.last_wall_ms >= wall  # call() is unchanged
    now = host.now()
    assert set(now) == {"wall_ms", "monotonic_ns"} and abs(now["wall_ms"] - ms()) < 2000
    assert host.now()["monotonic_ns"] > now["monotonic_ns"]


@pytest.mark.parametrize("offset_s", [-3600, 600])
def test_faketime_moves_the_workers_wall_clock_but_not_its_monotonic_clock(skewable, offset_s):
    host, clock = skewable
    first = host.now()
    clock.set_offset(offset_s)
    _, wall = host.call_with_wall("read", READ, timeout=10)
    assert abs((wall - ms()) - offset_s * 1000) < 5000
    skewed = host.now()
    assert abs((skewed["wall_ms"] - ms()) - offset_s * 1000) < 5000
    assert skewed["monotonic_ns"] > first["monotonic_ns"]  # never faked
    clock.reset()
    assert abs(host.now()["wall_ms"] - ms()) < 5000
