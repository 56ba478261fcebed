"""Exact-time calls (``call`` with ``clock_ms``): the backend decides that one
call at exactly the pinned instant - an in-process backend through the host's
clock, a black-box program through libfaketime absolute time for its one
invocation - and every other call keeps the worker's own clock (skewed by the
clock nemesis or not)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from backends.contract.values import parse_instant
from backends.external import ExternalBackend
from chaos.faults.faketime import ClockFault
from chaos.host import HostClient
from chaos.host.server import PIN_DIR_ENV

NS = "wbns_" + "c" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
TUP = {"ledger_namespace": NS, "item_id": ITEM}
ROOT = os.path.join(os.path.dirname(__file__), "..")
PROFILE = os.path.join(ROOT, "profiles", "chaos-sqlite.yaml")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def observed(reply) -> int:
    env = reply.envelope
    rb = (env.get("result") or {}).get("read_back") or (env.get("error") or {}).get("details")
    return parse_instant(rb["observed_at"])


def sqlite_host(tmp_path, env=None):
    from backends.sqlite import admin

    path = str(tmp_path / "claims.db")
    admin.provision(path, [NS])
    return HostClient({"backend": "sqlite", "path": path}, env=env or {}, log_path=str(tmp_path / "host.log"))


def external_host(tmp_path, env=None):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    command = f"{sys.executable} -m chaos.cli backend sqlite"
    ExternalBackend({"command": command, "ledger": str(ledger), "profile": PROFILE}).provision(str(ledger), [NS])
    spec = {"backend": "external", "command": command, "ledger": str(ledger), "profile": PROFILE}
    return HostClient(spec, env=env or {}, log_path=str(tmp_path / "host.log"))


def exercise(host, skew_ms: int = 0):
    """Acquire in the worker's own time, then pinned calls at exact instants."""
    acq = host.call("acquire", dict(TUP, owner_id="prober", lease_duration_ms=600_000,
                                    expected={"last_epoch": "0", "active": None}), timeout=60)
    assert acq.exit == 0, acq.envelope
    claim = acq.envelope["result"]["claim"]
    issued = parse_instant(claim["issued_at"])
    assert abs(issued - (now_ms() + skew_ms)) < 30_000              # decided by the worker's own clock
    later = issued + 123_457                                         # a read persists nothing: any instant
    r, _ = host.call_with_wall("read", TUP, timeout=60, clock_ms=later)
    assert r.exit == 0 and observed(r) == later
    assert abs(observed(host.call("read", TUP, timeout=60)) - (now_ms() + skew_ms)) < 30_000  # the pin is gone
    expires = parse_instant(claim["expires_at"])
    takeover = dict(TUP, owner_id="rival", lease_duration_ms=1_000,
                    expected={"last_epoch": claim["epoch"], "active": claim})
    r, _ = host.call_with_wall("acquire", takeover, timeout=60, clock_ms=expires - 1)  # one ms before: held
    assert (r.exit, r.envelope["error"]["code"], observed(r)) == (4, "claim-held", expires - 1)
    renew = dict(TUP, owner_id="prober", epoch=claim["epoch"], expected_expires_at=claim["expires_at"],
                 lease_duration_ms=1_000)
    r, _ = host.call_with_wall("renew", renew, timeout=60, clock_ms=expires)   # exactly expires_at: expired
    assert (r.exit, r.envelope["error"]["code"], observed(r)) == (4, "claim-expired", expires)
    r, _ = host.call_with_wall("acquire", takeover, timeout=60, clock_ms=expires - 1)
    assert r.exit == 0 and observed(r) == expires   # the floor persisted at E: never decided before it again
    return claim


@pytest.mark.parametrize("kind", ["in-process", "black-box"])
@pytest.mark.parametrize("skew_s", [0, -3600])
def test_a_pinned_call_is_decided_at_exactly_its_instant(tmp_path, kind, skew_s):
    pins = tmp_path / "pins"
    pins.mkdir()
    env = {PIN_DIR_ENV: str(pins)}
    clock = None
    if skew_s:  # the clock nemesis: libfaketime already preloaded, the worker's clock an hour back
        clock = ClockFault(str(tmp_path / "clock"))
        env.update(clock.env())
        clock.set_offset(skew_s)
    host = (sqlite_host if kind == "in-process" else external_host)(tmp_path, env)
    try:
        exercise(host, skew_s * 1000)
    finally:
        host.kill()
    if kind == "black-box":  # the one-call timestamp file lived in the run's dir
        assert [p.name for p in pins.iterdir()] and all(p.name.startswith("pin-") for p in pins.iterdir())
    else:
        assert not list(pins.iterdir())


def test_a_bad_pin_is_refused_and_the_host_lives_on(tmp_path):
    host = sqlite_host(tmp_path)
    try:
        msg = host._send("call", op="read", request=TUP, clock_ms="soon").result(30)
        assert "clock_ms must be an integer" in msg["error"]
        assert host.call("read", TUP, timeout=30).exit == 0
    finally:
        host.kill()
