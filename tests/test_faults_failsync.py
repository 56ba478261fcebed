"""The fsync shim on real targets: a SQLite commit in a child process fails
with ``disk I/O error``, and PostgreSQL PANICs, then recovers after disarm +
restart with every acknowledged row."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from chaos.faults.failsync import FsyncFault, build, cache_dir
from chaos.faults.pgserver import PgServer
from pg_fixtures import needs_pg

CHILD = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=DELETE"); conn.execute("PRAGMA synchronous=FULL")
conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
conn.execute("BEGIN IMMEDIATE"); conn.execute("INSERT INTO t VALUES (1)"); conn.execute("COMMIT")
print("ready", flush=True); sys.stdin.readline()          # the parent arms the fault now
conn.execute("BEGIN IMMEDIATE"); conn.execute("INSERT INTO t VALUES (2)")
try:
    conn.execute("COMMIT"); print("committed")
except sqlite3.OperationalError as e:
    print(f"error {e} {e.sqlite_errorcode}")
"""


def test_build_is_cached_and_world_readable():
    path = build()
    assert path == build() and path.startswith(str(cache_dir()))
    assert os.stat(path).st_mode & 0o004


def test_sqlite_commit_fails_with_disk_io_error(tmp_path):
    fault = FsyncFault(str(tmp_path / "ctl"))
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "db.sqlite")], env={**os.environ, **fault.env()},
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        fault.arm()
        out, _ = p.communicate("go\n", timeout=30)
    finally:
        fault.cleanup()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert out.strip() == "error disk I/O error 1034"  # SQLITE_IOERR_FSYNC
    assert not fault.armed


@pytest.mark.slow
@needs_pg
@pytest.mark.postgres
def test_postgres_panics_then_recovers_after_disarm_and_restart():
    with PgServer() as pg:
        fault = FsyncFault(os.path.join(pg.dir, "failsync.ctl"))  # pg.dir is traversable by postgres
        pg.extra_env = fault.env()
        pg.restart(crash=False)
        assert pg.preload_loaded("failsync")
        with psycopg.connect(pg.dsn(), autocommit=True) as c:
            c.execute("CREATE TABLE t (x int)")
            for i in range(10):
                c.execute("INSERT INTO t VALUES (%s)", (i,))
        fault.arm()
        with pytest.raises(psycopg.OperationalError):  # IoError (PANIC) or the lost connection
            with psycopg.connect(pg.dsn(), autocommit=True) as c:
                c.execute("INSERT INTO t VALUES (99)")
        pg.proc.wait(60)  # the startup process PANICs again: the postmaster exits
        assert pg.proc.returncode != 0
        fault.disarm()
        pg.start()
        with psycopg.connect(pg.dsn(), autocommit=True) as c:
            rows = {r[0] for r in c.execute("SELECT x FROM t")}
        assert set(range(10)) <= rows  # acknowledged rows survive; 99 is indeterminate
        fault.cleanup()
