"""The TCP fault proxy in front of a real PostgreSQL: a dropped response
makes the client time out although the row really committed."""

from __future__ import annotations

import psycopg
import pytest

from chaos.faults.proxy import FaultProxy
from pg_fixtures import needs_pg, pg, pg_server  # noqa: F401

pytestmark = [needs_pg, pytest.mark.postgres]


def test_drop_responses_times_out_but_commits(pg):
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS proxy_t (x int)")
        c.execute("TRUNCATE proxy_t")
    with FaultProxy("127.0.0.1", pg.port) as proxy:
        dsn = f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres"
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5)
        conn.execute("SET statement_timeout = 0")
        proxy.drop_responses = True
        with pytest.raises(psycopg.OperationalError):
            # client-side timeout: the reply never arrives (a server-side
            # statement_timeout would not fire: the INSERT itself finished)
            conn.execute("SET idle_session_timeout = 0; INSERT INTO proxy_t VALUES (1)")  # noqa
            conn.pgconn.socket  # pragma: no cover
        conn.close()
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        assert c.execute("SELECT x FROM proxy_t").fetchall() == [(1,)]
        c.execute("DROP TABLE proxy_t")
