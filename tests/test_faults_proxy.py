"""The TCP fault proxy in front of a real PostgreSQL: a dropped response
makes the client time out although the row really committed; reset gives a
connection error; a healed proxy forwards again."""

from __future__ import annotations

import psycopg
import pytest

from backends.postgres.deadline import Watchdog
from chaos.faults.proxy import FaultProxy
from pg_fixtures import needs_pg, pg, pg_server  # noqa: F401

pytestmark = [needs_pg, pytest.mark.postgres]


def test_drop_responses_times_out_but_commits(pg):
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS proxy_t")
        c.execute("CREATE TABLE proxy_t (x int)")
    watchdog = Watchdog()
    with FaultProxy("127.0.0.1", pg.port) as proxy:
        conn = psycopg.connect(f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres",
                               autocommit=True, connect_timeout=5)
        assert conn.execute("SELECT 1").fetchone() == (1,)
        proxy.drop_responses = True
        watchdog.arm(conn, 1.0)  # the client's deadline: the reply never arrives
        with pytest.raises(psycopg.OperationalError):
            conn.execute("INSERT INTO proxy_t VALUES (1)")
        assert watchdog.disarm() is True
        conn.close()
        proxy.heal()
        with psycopg.connect(f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres",
                             autocommit=True, connect_timeout=5) as c2:
            proxy.reset_all()
            with pytest.raises(psycopg.OperationalError):
                c2.execute("SELECT pg_sleep(0.2)")
    watchdog.close()
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        assert c.execute("SELECT x FROM proxy_t").fetchall() == [(1,)]  # it did commit
        c.execute("DROP TABLE proxy_t")


def test_closing_with_open_connections_logs_nothing(caplog):
    """A successful --dsn run printed an asyncio CancelledError traceback: closing
    the proxy while connections are open must end them quietly (issue 13)."""
    import socket
    import threading

    echo = socket.socket()
    echo.bind(("127.0.0.1", 0))
    echo.listen(8)
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = echo.accept()
            except OSError:
                return
            accepted.append(conn)
    threading.Thread(target=serve, daemon=True).start()
    caplog.set_level("DEBUG", logger="asyncio")
    for _ in range(20):
        proxy = FaultProxy("127.0.0.1", echo.getsockname()[1])
        clients = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(4)]
        for c in clients:
            c.sendall(b"x")
        proxy.close()
        for c in clients:
            c.close()
    echo.close()
    for c in accepted:
        c.close()
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text[-2000:]
