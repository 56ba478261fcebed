"""Every process an external program starts is contained and killed with it
(issue 13: a program that forked background children left 40 orphans): a
background child of a call, a child that moved to its own session, and the
children of a CLI call whose worker the kill nemesis ends. The run's
processes carry a marker in their environment, so the test looks only at
what it started."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest
from pg_fixtures import processes_with_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "CHAOS_TEST_CONTAIN_MARK"

# the contract CLI of our own SQLite backend, behind a wrapper that leaves children behind on
# every call: one in the call's process group holding its pipes, and one in a session of its
# own (setsid: out of the call's process group, its stdio closed like a daemon's)
WRAPPER = """#!/bin/sh
sleep 600 &
setsid sleep 600 < /dev/null > /dev/null 2>&1 &
exec {python} -m chaos.cli backend sqlite "$@"
"""


def _wait_none(marker: str, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout   # bounded: reaping takes a moment on a loaded machine
    left = processes_with_env(MARK, marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_with_env(MARK, marker)
    return left


@pytest.mark.parametrize("nemesis, mode", [("none", "--timed"), ("kill", "--timed"), ("kill", "--deterministic")])
def test_children_of_an_external_program_do_not_outlive_the_run(tmp_path, nemesis, mode):
    wrapper = tmp_path / "leaky-cli"
    wrapper.write_text(WRAPPER.format(python=sys.executable))
    wrapper.chmod(0o755)
    marker = uuid.uuid4().hex
    proc = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--backend", "external", "--command", str(wrapper),
                           "--nemesis", nemesis, "--workers", "2", "--time-limit", "3", "--seed", "4", mode,
                           "--store", str(tmp_path / "store")],
                          cwd=ROOT, env={**os.environ, MARK: marker}, capture_output=True, text=True, timeout=600)
    left = _wait_none(marker)
    for pid in left:  # ours (marked): do not leave them to the machine even when the test fails
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    assert proc.returncode in (0, 1, 2), proc.stderr[-2000:]
    assert left == [], f"{len(left)} processes of the external program outlived the run"
