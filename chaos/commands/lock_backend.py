"""``chaos lock-backend NAME ...``: the issue-lock CLI convention over our own stores.

    chaos lock-backend {sqlite,gitfile} OP --store DIR --input -     OP: whoami, bootstrap, lock, heartbeat,
                                                                     renew, commit, create-pr, inspect, recover
    chaos lock-backend {sqlite,gitfile} admin {seed,export} --store DIR [--input -]

The request is read from standard input as raw bytes (strict parsing happens in
the engine). Exactly ONE compact JSON object + LF is printed; the exit code is
the protocol's (0 success, 2 invalid request, 3 refused, 6 store failure).
``admin`` is privileged test scaffolding (seed a ``durable`` object, export
it), never a write path. Storage: ``sqlite`` -> ``DIR/locks.db``; ``gitfile`` ->
``DIR`` itself (lock files beside real git repositories). Time: the process's
system clock (libfaketime moves it), or ``CHAOS_CLOCK_FILE``.
"""

from __future__ import annotations

import argparse
import os
import sys

from chaos.errors import UsageError

STORES = ("sqlite", "gitfile")
ADMIN = ("seed", "export")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from backends.issuelock.contract.codes import OPERATIONS

    parser.add_argument("name", choices=STORES, help="issue-lock store")
    parser.add_argument("action", choices=(*OPERATIONS, "admin"))
    parser.add_argument("sub", nargs="?", default=None, help="admin: seed or export")
    parser.add_argument("--store", required=True, help="store directory")
    parser.add_argument("--input", default=None, help="'-' reads the request from standard input")


def spec_for(name: str, store: str) -> dict:
    store = os.path.abspath(store)
    if name == "sqlite":
        return {"protocol": "issue-lock", "backend": "sqlite", "path": os.path.join(store, "locks.db")}
    return {"protocol": "issue-lock", "backend": "gitfile", "root": store}


def run(args: argparse.Namespace) -> int:
    from backends.contract import compact_json
    from backends.issuelock.contract.schemas import REQUEST_MAX_BYTES
    from backends.registry import open_backend
    from chaos.commands.backend import clock

    raw = sys.stdin.buffer.read(REQUEST_MAX_BYTES + 1) if args.input == "-" else b"{}"
    if args.action == "admin":
        if args.sub not in ADMIN:
            raise UsageError(f"chaos lock-backend admin: one of {', '.join(ADMIN)}")
        os.makedirs(args.store, exist_ok=True)
    elif not os.path.isdir(args.store):
        raise UsageError(f"chaos lock-backend: --store {args.store}: no such directory (seed it first)")
    backend = open_backend(spec_for(args.name, args.store), clock())
    try:
        if args.action == "admin":
            from backends.contract import loads_strict

            if args.sub == "seed":
                try:
                    backend.store.seed(loads_strict(raw))
                except ValueError as e:
                    raise UsageError(f"chaos lock-backend admin seed: {e}") from None
                out = {"ok": True}
            else:
                out = backend.store.export_durable()
            sys.stdout.buffer.write(compact_json(out) + b"\n")
            return 0
        reply = backend.call(args.action, raw)
        sys.stdout.buffer.write(compact_json(reply.envelope) + b"\n")
        sys.stdout.buffer.flush()
        return reply.exit
    finally:
        backend.close()
