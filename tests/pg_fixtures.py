"""Shared fixtures of the PostgreSQL and fault-mechanism tests.

tests/conftest.py registers the fixtures (a test module only names them):
ONE real server per test session (``pg_server``), restarted on demand when a
test crashed it (``pg``). Everything skips cleanly without PostgreSQL binaries.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from backends.api import FixedClock, Hooks
from backends.contract.digests import revision
from chaos.faults.pgserver import PgServer, find_bindir

NS1 = "wbns_" + "1" * 32
NS2 = "wbns_" + "2" * 32
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
T0 = 1_894_352_400_000  # 2030-01-11T09:00:00.000Z
_VECTORS = Path("/work/shared/vectors/work-claims")
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

needs_pg = pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries")

PG_TMPDIR_ENV = "CLAIM_CHAOS_PG_TMPDIR"


@contextlib.contextmanager
def private_pg_tmpdir():
    """A fresh directory for the ``ccpg*`` dirs of the servers started while it
    is set (``$CLAIM_CHAOS_PG_TMPDIR``), so a test looks only at its own
    servers, never at a global ``/tmp`` listing another suite shares."""
    d = tempfile.mkdtemp(prefix="cctest-pg-", dir="/tmp")
    os.chmod(d, 0o755)  # the server user must traverse it
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def processes_marked(directory: str) -> list[int]:
    """Live processes whose environment names ``directory`` as
    ``$CLAIM_CHAOS_PG_TMPDIR``: the servers (and their children) started under it."""
    return processes_with_env(PG_TMPDIR_ENV, directory)


def processes_with_env(key: str, value: str) -> list[int]:
    """Live (non-zombie) processes whose environment holds ``key=value``
    (a test marks what it starts this way and looks only at that)."""
    needle = b"\0" + f"{key}={value}".encode() + b"\0"
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = b"\0" + f.read() + b"\0"
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != "Z":
            found.append(pid)
    return found


def _sources() -> tuple[bytes, bytes]:
    manifest = json.loads((_VECTORS / "publication-response-loss" / "manifest.json").read_text())
    before, after = (base64.b64decode(f["source_base64"]) for f in manifest["source_files"])
    return before, after


BEFORE, AFTER = _sources()


def item_id(n: int) -> str:
    """A valid, distinct ``wb_`` id per integer (keeps ITEM's prefix)."""
    tail = ""
    for _ in range(3):
        n, r = divmod(n, len(_ALPHABET))
        tail = _ALPHABET[r] + tail
    return ITEM[:-3] + tail


def item_bytes(item: str, which: bytes) -> bytes:
    """The vectors' before.md / after.md rewritten for another item id."""
    return which.replace(ITEM.encode(), item.encode())


def seeded(items) -> dict:
    return {"clock_floors": [], "claims": [], "publication_outcomes": [],
            "ledgers": [{"ledger_namespace": ns, "item_id": it, "revision": revision(item_bytes(it, BEFORE)),
                         "source_base64": base64.b64encode(item_bytes(it, BEFORE)).decode()} for ns, it in items]}


def acquire_req(ns: str, item: str, owner: str, last_epoch: int = 0, lease_ms: int = 60_000) -> dict:
    return {"ledger_namespace": ns, "item_id": item, "owner_id": owner, "lease_duration_ms": lease_ms,
            "expected": {"last_epoch": str(last_epoch), "active": None}}


def release_req(claim: dict, ns: str, item: str) -> dict:
    return {"ledger_namespace": ns, "item_id": item, "owner_id": claim["owner_id"], "epoch": claim["epoch"],
            "expected_expires_at": claim["expires_at"]}


def publish_req(op_id: str, ns: str, item: str, claim: dict) -> dict:
    current, candidate = item_bytes(item, BEFORE), item_bytes(item, AFTER)
    return {"operation_id": op_id, "ledger_namespace": ns, "item_id": item,
            "expected_revision": revision(current),
            "candidate_source_base64": base64.b64encode(candidate).decode(),
            "candidate_sha256": revision(candidate),
            "claim_fence": {"ledger_namespace": ns, "item_id": item, "owner_id": claim["owner_id"],
                            "epoch": claim["epoch"]}}


def open_pg(dsn: str, schema: str | None = None, clock=None, hooks: Hooks | None = None, **spec):
    from backends.postgres import open_backend
    full = {"backend": "postgres", "dsn": dsn, "namespaces": [NS1, NS2], **spec}
    if schema:
        full["schema"] = schema
    return open_backend(full, clock or FixedClock(T0), hooks or Hooks())


@pytest.fixture(scope="session")
def pg_server():
    if find_bindir() is None:
        pytest.skip("no PostgreSQL server binaries")
    server = PgServer()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg(pg_server):
    """The session server, running and un-paused (a previous test may have crashed it)."""
    pg_server.resume()
    if not pg_server.running():
        pg_server.extra_env = {}
        pg_server.start()
    return pg_server


@pytest.fixture
def backend(pg):
    """A fresh strict-fenced backend in its own schema, dropped afterwards."""
    b = open_pg(pg.dsn())
    yield b
    b.close()
    try:
        b.store.drop_created()
    except Exception:
        pass
