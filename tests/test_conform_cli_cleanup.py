"""`chaos conform --backend postgres` starts and stops its own server: when the
command returns, no process of its server and no temp dir it made remain
(issues 3 and 13). The servers are told apart from any other suite's on the
machine by their own ``$CLAIM_CHAOS_PG_TMPDIR``; nothing global is compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pg_fixtures import PG_TMPDIR_ENV, private_pg_tmpdir, processes_marked

from chaos.faults.pgserver import find_bindir

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries")]


def test_conform_postgres_leaves_no_server_and_no_temp_dir():
    with private_pg_tmpdir() as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "chaos.cli", "conform", "--backend", "postgres",
             "--case", "renew-release-restart-aba", "--json"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
            env={**os.environ, PG_TMPDIR_ENV: tmp, "TMPDIR": tmp})  # its server and its other temp dirs
        alive_at_return = processes_marked(tmp)   # at once: no grace period
        left = os.listdir(tmp)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] == 1 and report["failed"] == 0
    assert alive_at_return == []
    assert left == []
