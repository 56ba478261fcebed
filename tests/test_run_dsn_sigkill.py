"""A SIGKILL of ``chaos run --backend postgres --dsn ...`` at a random moment
leaves nothing behind: no schema in the user's database, no process, no run
``tmp/`` dir (preload control files, sockets). The watchdog that survives the
kill drops the schema the run named before creating it, and only that one.

The test starts its own real server (the "user's" database) and marks the
run's processes with an environment variable, so it looks only at what it
started. The kill moments are drawn from a seed printed on failure.
"""

from __future__ import annotations

import glob
import os
import random
import subprocess
import sys
import time
import uuid

import psycopg
import pytest
from pg_fixtures import PG_TMPDIR_ENV, needs_pg, private_pg_tmpdir, processes_with_env

from backends.postgres.store import PostgresStore
from chaos.faults.pgserver import PgServer

pytestmark = [needs_pg, pytest.mark.postgres, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "CHAOS_TEST_RUN_MARK"
#: kill windows (seconds after start): start-up and schema creation, workload, final phase, anywhere
WINDOWS = [(0.3, 1.5), (1.5, 3.0), (3.0, 7.0), (0.3, 9.0)]


def _schemas(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as c:
        return [r[0] for r in c.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'claimchaos%'")]


def _leftovers(dsn: str, marker: str, store: str, keep: str) -> dict:
    return {"processes": processes_with_env(MARK, marker), "schemas": [s for s in _schemas(dsn) if s != keep],
            "tmp dirs": glob.glob(os.path.join(store, "*", "*", "tmp"))}


def test_sigkill_of_a_dsn_run_at_random_moments_leaves_nothing(tmp_path, monkeypatch):
    seed = int(os.environ.get("CHAOS_TEST_SEED") or random.randrange(1 << 30))
    rnd = random.Random(seed)
    with private_pg_tmpdir() as pg_tmp:
        monkeypatch.setenv(PG_TMPDIR_ENV, pg_tmp)
        with PgServer() as pg:
            with psycopg.connect(pg.dsn(), autocommit=True) as c:
                c.execute("CREATE SCHEMA users_own_data")   # never touched by the run or its watchdog
            other = PostgresStore(pg.dsn())                 # another run's store: marked, but not this run's
            other.close()
            for n, (lo, hi) in enumerate(WINDOWS):
                delay = rnd.uniform(lo, hi)
                marker, store = uuid.uuid4().hex, str(tmp_path / f"store{n}")
                proc = subprocess.Popen(
                    [sys.executable, "-m", "chaos.cli", "run", "--backend", "postgres", "--dsn", pg.dsn(),
                     "--workers", "3", "--time-limit", "4", "--store", store],
                    cwd=ROOT, env={**os.environ, MARK: marker}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(delay)
                proc.kill()
                proc.wait()
                proc.stderr.close()
                deadline = time.monotonic() + 60  # bounded: the watchdog needs a moment on a loaded machine
                left = _leftovers(pg.dsn(), marker, store, other.schema)
                while any(left.values()) and time.monotonic() < deadline:
                    time.sleep(0.1)
                    left = _leftovers(pg.dsn(), marker, store, other.schema)
                assert not any(left.values()), f"seed {seed}, kill {n} after {delay:.2f}s left {left}"
            with psycopg.connect(pg.dsn(), autocommit=True) as c:
                assert c.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'users_own_data'").fetchone()
            assert other.schema in _schemas(pg.dsn())
