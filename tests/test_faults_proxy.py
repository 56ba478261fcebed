"""The TCP fault proxy in front of a real PostgreSQL: a dropped response
makes the client time out although the row really committed; reset gives a
connection error; a healed proxy forwards again."""

from __future__ import annotations

import psycopg
import pytest

from backends.postgres.deadline import Watchdog
from chaos.faults.pgwire import SSL_REQUEST, FrontendScanner
from chaos.faults.proxy import FaultProxy
from chaos.nemesis.partition import COMMIT_STATEMENT
from pg_fixtures import needs_pg

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


@pytest.mark.parametrize("scanner", [FrontendScanner, None], ids=["scanner", "bytes-only"])
def test_blackhole_after_commit_engages_after_psycopg_prepared_its_commit(pg, scanner):
    """psycopg prepares a statement it ran 5 times and then sends only a Bind by
    name: a byte match on COMMIT stops seeing it; the protocol scanner does not."""
    with FaultProxy("127.0.0.1", pg.port, scanner=scanner) as proxy:
        conn = psycopg.connect(f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres",
                               autocommit=True, connect_timeout=5)
        try:
            for _ in range(8):   # past the prepare threshold
                conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                conn.execute("SELECT 1")
                conn.execute("COMMIT")
            proxy.blackhole_after = COMMIT_STATEMENT
            conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            conn.execute("SELECT 1")
            assert not proxy.blackhole                      # COMMITTED in the BEGIN is not a COMMIT
            watchdog = Watchdog()
            watchdog.arm(conn, 1.0)
            try:
                if scanner is None:
                    conn.execute("COMMIT")                  # its reply comes: the cut never engaged
                    assert not proxy.blackhole
                else:
                    with pytest.raises(psycopg.OperationalError):
                        conn.execute("COMMIT")              # the COMMIT went out, its reply is held
                    assert proxy.blackhole and proxy.blackholed_at is not None
            finally:
                watchdog.disarm()
                watchdog.close()
        finally:
            proxy.heal()
            conn.close()


def test_blackhole_after_commit_engages_right_after_the_commit_also_when_psycopg_prepares_it(pg):
    """psycopg sends the Parse of a COMMIT it prepares (its 5th or 6th on a
    connection) on its own, waits for the answer, then the Bind: the cut must
    wait for the Bind. Armed before each of the first 8 COMMITs, the cut holds
    the COMMIT's reply and never the COMMIT: the row is visible at once."""
    direct = psycopg.connect(pg.dsn(), autocommit=True)
    direct.execute("CREATE TABLE IF NOT EXISTS proxy_prep (k int)")
    direct.execute("TRUNCATE proxy_prep")
    try:
        with FaultProxy("127.0.0.1", pg.port, scanner=FrontendScanner) as proxy:
            conn = psycopg.connect(f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres",
                                   autocommit=True, connect_timeout=5)
            try:
                for k in range(8):
                    proxy.blackhole_after = COMMIT_STATEMENT
                    conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                    conn.execute("INSERT INTO proxy_prep VALUES (%s)", (k,))
                    assert not proxy.blackhole, k
                    watchdog = Watchdog()
                    watchdog.arm(conn, 0.5)
                    try:
                        with pytest.raises(psycopg.OperationalError):
                            conn.execute("COMMIT")            # its reply is held ...
                    finally:
                        watchdog.disarm()
                        watchdog.close()
                    assert proxy.blackhole, k
                    seen = [r[0] for r in direct.execute("SELECT k FROM proxy_prep ORDER BY k")]
                    assert seen == list(range(k + 1)), (k, seen)   # ... the COMMIT itself went through
                    proxy.heal()
                    conn.close()
                    conn = psycopg.connect(f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres",
                                           autocommit=True, connect_timeout=5)
                    for _ in range(k + 1):   # the next round's connection has run as many COMMITs
                        conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                        conn.execute("COMMIT")
            finally:
                proxy.heal()
                conn.close()
    finally:
        direct.execute("DROP TABLE proxy_prep")
        direct.close()


def test_frontend_scanner_follows_messages_split_across_chunks():
    def msg(kind: bytes, body: bytes) -> bytes:
        return kind + (4 + len(body)).to_bytes(4, "big") + body
    ssl = (8).to_bytes(4, "big") + SSL_REQUEST.to_bytes(4, "big")
    startup = (17).to_bytes(4, "big") + (196608).to_bytes(4, "big") + b"user\0pg\0\0"
    stream = (ssl + startup + msg(b"Q", b"BEGIN\0") + msg(b"P", b"_pg3_0\0COMMIT\0\0\0")
              + msg(b"B", b"\0_pg3_0\0\0\0\0\0\0\0") + msg(b"P", b"\0SELECT 1\0\0\0")
              + msg(b"C", b"S_pg3_0\0") + msg(b"B", b"\0_pg3_0\0\0\0\0\0\0\0"))
    for cut in range(1, len(stream)):                        # every split point
        s = FrontendScanner()
        assert s.feed(stream[:cut]) + s.feed(stream[cut:]) == [b"BEGIN", b"COMMIT", b"SELECT 1"]
    lost = FrontendScanner()
    assert lost.feed((2).to_bytes(4, "big") + b"\0" * 8) is None and lost.feed(b"Q") is None
