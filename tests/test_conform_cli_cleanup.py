"""`chaos conform --backend postgres` starts and stops its own server: after the
command exits, no postgres process and no temp dir it made remain (issue 3)."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from chaos.faults.pgserver import find_bindir

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries")]


def _live_postgres_pids() -> set[int]:
    pids = set()
    for p in psutil.process_iter(["name", "status"]):
        if p.info["name"] == "postgres" and p.info["status"] != psutil.STATUS_ZOMBIE:
            pids.add(p.pid)
    return pids


def test_conform_postgres_leaves_no_server_and_no_temp_dir():
    before_pids = _live_postgres_pids()
    before_dirs = set(glob.glob("/tmp/ccpg*")) | set(glob.glob("/tmp/chaos-conform-postgres-*"))
    proc = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "conform", "--backend", "postgres",
         "--case", "renew-release-restart-aba", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] == 1 and report["failed"] == 0
    deadline = time.monotonic() + 5  # killed children are reaped by PID 1 about 1.5 s later
    while _live_postgres_pids() - before_pids and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _live_postgres_pids() - before_pids == set()
    after_dirs = set(glob.glob("/tmp/ccpg*")) | set(glob.glob("/tmp/chaos-conform-postgres-*"))
    assert after_dirs - before_dirs == set()
