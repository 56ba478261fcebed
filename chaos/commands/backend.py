"""``chaos backend NAME ...``: the contract CLI convention, for every backend.

    chaos backend NAME provision --ledger DIR [--namespace NS ...] --json
    chaos backend NAME claim {capabilities,read,acquire,renew,release,verify} --ledger DIR [--input -] --json
    chaos backend NAME publish-claimed --ledger DIR --input - --json
    chaos backend NAME claim-verify --ledger DIR --json
    chaos backend NAME legacy {transition-v1,create-v1} --ledger DIR --input - --json
    chaos backend NAME admin {seed,export,arm-floor-fault,enable-bypass} --ledger DIR [--input -]

The request is read from standard input as raw bytes (strict parsing applies
in the engine; input is bounded at 11,534,336 bytes + 1 before parsing, so a
larger request is refused as ``invalid-request`` without reading it all).
Exactly ONE compact JSON object + LF is printed; the exit code is the
contract's. One exception: a claim change whose commit outcome is unknown (its
COMMIT fsync failed) has no true contract reply (``backends.engine``, "Store
failures": no claim code means "unknown", and ``clock-floor-persistence-failed``
says "unchanged"), so the CLI prints nothing, names the cause in one stderr
line and exits ``NO_REPLY_EXIT`` (the harness records a ``reply-protocol``
finding; ``profiles/chaos-sqlite-blackbox.yaml`` acknowledges it). ``claim verify`` is the publication read; ``claim-verify`` is the
Git-journal reconciliation. ``admin`` is privileged test scaffolding (seed a
manifest ``durable`` object, export it, arm the floor fault, enable the bypass
writer); it is never part of a backend's write paths.

Storage per backend: ``gitjournal`` -> the ledger directory itself;
``sqlite`` -> ``DIR/claims.db``; ``python`` -> ``DIR/claims.db`` behind the
class ``--factory MOD:FN`` opens over it (the planted bugs of
``chaos.testing.mutants`` as black-box programs); ``reference`` -> ``DIR/reference.json``
(the in-memory engine, persisted between invocations under an flock);
``postgres`` -> ``--dsn`` and ``--schema``. Time: the process's system clock
(libfaketime moves it), or ``CHAOS_CLOCK_FILE`` for a shared file clock.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys

from backends.api import CommitOutcomeUnknown, FileClock, Hooks, Reply, StoreUnavailable, SystemClock
from backends.contract import REQUEST_MAX_BYTES, compact_json
from backends import safeload
from chaos.errors import SetupFailed, UsageError
from chaos.store import writable_dir

CLAIM_OPS = {"capabilities": "capabilities", "read": "read", "acquire": "acquire", "renew": "renew",
             "release": "release", "verify": "publication-read"}
LEGACY_OPS = {"transition-v1": "legacy-transition", "create-v1": "legacy-create"}
ADMIN = ("seed", "export", "arm-floor-fault", "enable-bypass")
ACTIONS = ("provision", "claim", "publish-claimed", "claim-verify", "legacy", "admin")

EXIT_CODES = """exit codes:
  0-6  the contract's exit code of the reply printed on stdout (work-claim-contract.md)
  254  bad arguments or a ledger that cannot be used: one line on stderr
  255  the suite itself crashed: a traceback on stderr (please report it)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from chaos import sut

    parser.add_argument("name", choices=sut.names(cli=True), help="backend")
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("sub", nargs="?", default=None, help="claim / legacy / admin operation")
    parser.add_argument("--ledger", default=None, help="ledger directory (gitjournal, sqlite, reference)")
    parser.add_argument("--dsn", default=None, help="postgres: libpq DSN")
    parser.add_argument("--schema", default=None, help="postgres: store schema")
    parser.add_argument("--input", default=None, help="'-' reads the request from standard input")
    parser.add_argument("--json", action="store_true", help="print the JSON envelope (always on)")
    parser.add_argument("--namespace", action="append", default=None, help="provision: namespace (repeatable)")
    parser.add_argument("--write-paths", default=None, help="provision: write-path inventory as JSON (scaffolding)")
    parser.add_argument("--lock-wait-ms", type=int, default=None, help="gitjournal: bounded wait for a busy lock")
    parser.add_argument("--factory", default=None,
                        help='python: "module:function" of a backend class over the ledger\'s claims.db')


# --------------------------------------------------------------------------- input / output


def read_input(args, limit: int = REQUEST_MAX_BYTES) -> bytes:
    """At most ``limit + 1`` bytes of the request (the engine refuses more)."""
    if args.input is None:
        return b"{}"
    stream = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")
    with contextlib.ExitStack() as stack:
        if stream is not sys.stdin.buffer:
            stack.callback(stream.close)
        chunks, total = [], 0
        while total <= limit:
            chunk = stream.read(min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks)


def emit(reply: Reply) -> int:
    sys.stdout.buffer.write(compact_json(reply.envelope) + b"\n")
    sys.stdout.buffer.flush()
    return reply.exit


BARRIER_ENV = "CHAOS_BARRIER_DIR"
NO_REPLY_EXIT = 1   # not a contract exit: a claim commit whose outcome is unknown (the module docstring)


class EnvBarrierHooks(Hooks):
    """Opt-in test barrier for black-box harnesses: when ``$CHAOS_BARRIER_DIR``
    holds ``<operation_id>.arm``, the publish parks after validation and before
    its commit boundary (holding nothing): it writes its pid to
    ``<operation_id>.parked`` and waits for ``<operation_id>.release``."""

    def before_commit(self, request: dict) -> None:
        import time

        where = os.environ.get(BARRIER_ENV)
        op = request.get("operation_id") if isinstance(request, dict) else None
        if not where or not isinstance(op, str) or not os.path.exists(os.path.join(where, f"{op}.arm")):
            return
        with open(os.path.join(where, f"{op}.parked"), "w") as f:
            f.write(str(os.getpid()))
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(where, f"{op}.release")):
            if time.monotonic() > deadline:
                raise TimeoutError("barrier never released")
            time.sleep(0.005)


def clock():
    path = os.environ.get("CHAOS_CLOCK_FILE")
    return FileClock(path) if path else SystemClock()


# --------------------------------------------------------------------------- per-backend storage


def _ledger(args) -> str:
    if not args.ledger:
        raise UsageError(f"chaos backend {args.name}: --ledger DIR is required")
    return os.path.abspath(args.ledger)


def spec_for(args) -> dict:
    from chaos import sut

    return sut.get(args.name).cli_spec(_where(args), args)


def _where(args) -> str:
    """The ledger directory of a backend that stores in one (else ``--ledger`` as given)."""
    from chaos import sut

    return _ledger(args) if sut.get(args.name).cli_ledger else (args.ledger or "")


@contextlib.contextmanager
def opened(args):
    """The backend of ``args`` for one invocation (reference: loaded from and
    saved back to its JSON file under an exclusive flock)."""
    from backends.registry import open_backend

    spec = spec_for(args)
    if args.name != "reference":
        from chaos.sut.python import open_factory

        # user code (python): a factory that raises or is no backend is one line, exit 254
        opener = open_factory if args.name == "python" else open_backend
        backend = opener(spec, clock(), EnvBarrierHooks())
        try:
            yield backend
        finally:
            backend.close()
        return
    path = spec["path"]
    if not os.path.exists(path):
        raise UsageError(f"chaos backend reference: {path} not provisioned (run provision first)")
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        saved = safeload.json_file(path, safeload.RESULTS, "reference store")
        engine = open_backend({**saved["config"], "backend": "reference", "durable": saved["durable"]},
                              clock(), EnvBarrierHooks())
        backend = SavedBeforeReply(engine, lambda: _save_reference(path, saved, engine))
        yield backend
        if not backend.called:   # admin seed / export: saved here (a call saved, or refused to, itself)
            _save_reference(path, saved, engine)
    finally:
        os.close(fd)


def _save_reference(path: str, saved: dict, engine) -> None:
    """Write the reference's durable state beside its file, fsync, rename
    over it: a failure leaves the file as it was (and no partial copy)."""
    saved["durable"] = engine.store.export_durable()
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(saved, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class SavedBeforeReply:
    """The reference engine of one CLI call, its state saved before ``call``
    returns the reply. Saved after the reply was printed, a failing save (the
    fsync nemesis's EIO) crashed the process with exit 255 once it had
    acknowledged a change the file never got; now that call's reply is
    ``claim-store-unavailable``, true because the file is unchanged."""

    def __init__(self, engine, save):
        self.engine, self.save, self.called = engine, save, False

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def call(self, op: str, request: bytes | dict) -> Reply:
        self.called = True
        reply = self.engine.call(op, request)
        try:
            self.save()
        except OSError as e:
            from backends.contract import Code, surface_error

            oid = reply.envelope.get("operation_id")
            print(f"chaos backend reference: {op}: the store could not be saved ({e})", file=sys.stderr)
            return surface_error(op, Code.CLAIM_STORE_UNAVAILABLE, {"reason": "io-failed"},
                                 operation_id=oid if isinstance(oid, str) else _operation_id_of(request))
        return reply


def _operation_id_of(request: bytes | dict) -> str | None:
    """The request's canonical operation_id, which a publication's store-unavailable reply echoes even
    where the engine's own reply (a refused noncanonical request) carried none."""
    from backends.contract.values import is_operation_id
    from backends.engine import request_operation_id

    oid = request_operation_id(request)
    return oid if is_operation_id(oid) else None


def provision(args) -> dict:
    """Provision the endpoint; returns ``{backend, ledger, namespaces}``."""
    from backends.gitjournal.ledger import new_namespace

    from chaos import sut

    namespaces = args.namespace or [new_namespace()]
    paths = None
    if args.write_paths:
        try:
            paths = safeload.json_text(args.write_paths, where="--write-paths")
        except safeload.LoadError as e:
            raise UsageError(str(e)) from None
    if sut.get(args.name).cli_ledger:
        writable_dir(_ledger(args), "--ledger")
    sut.get(args.name).cli_provision(_where(args), namespaces, paths, args)
    return {"backend": args.name, "ledger": args.ledger, "namespaces": namespaces}


def admin(args) -> int:
    """Privileged scaffolding (see the module docstring)."""
    if args.sub not in ADMIN:
        raise UsageError(f"chaos backend admin: one of {', '.join(ADMIN)}")
    if args.sub == "arm-floor-fault":
        return _floor_fault(args)
    if args.sub == "enable-bypass":
        return _bypass(args)
    if args.name == "gitjournal":
        return _gitjournal_admin(args)
    with opened(args) as backend:
        if args.sub == "seed":
            backend.store.seed(_seed_input(args))
            out = {"seeded": True}
        else:
            out = backend.store.export_durable()
    sys.stdout.buffer.write(compact_json(out) + b"\n")
    return 0


def _seed_input(args) -> dict:
    """The ``admin seed`` input: a manifest's ``durable`` object (one line on stderr if it is not one)."""
    try:
        doc = safeload.json_text(read_input(args, safeload.RESULTS.max_bytes), safeload.RESULTS, "admin seed input")
    except safeload.LoadError as e:
        raise UsageError(str(e)) from None
    if not isinstance(doc, dict):
        raise UsageError("admin seed input: expected a JSON object (a manifest's durable state)")
    return doc


def _gitjournal_admin(args) -> int:
    """Seed / export a Git ledger's journal. With ``--namespace`` on an
    UNPROVISIONED ledger, the journal of that namespace is used without
    writing the namespace file (the advisory configuration of the vectors)."""
    from backends.gitjournal.ledger import Ledger, open_ledger
    from backends.gitjournal.store import GitJournalStore

    found = open_ledger(_ledger(args))
    if not found.in_git:
        raise UsageError(f"chaos backend gitjournal admin: {args.ledger} is not inside a git work tree")
    ns = found.namespace or (args.namespace or [None])[0]
    if ns is None:
        raise UsageError("chaos backend gitjournal admin: unprovisioned ledger; give --namespace")
    store = GitJournalStore(Ledger(found.path, found.top, found.common, ns))
    if args.sub == "seed":
        store.seed(_seed_input(args))
        out = {"seeded": True}
    elif args.sub == "export":
        out = store.export_durable()
    else:
        raise UsageError(f"chaos backend gitjournal: no admin {args.sub!r} (faults are fsync faults)")
    sys.stdout.buffer.write(compact_json(out) + b"\n")
    return 0


def _floor_fault(args) -> int:
    if args.name not in ("sqlite", "python"):
        raise UsageError(f"chaos backend {args.name}: no admin floor fault (use an fsync fault)")
    from backends.sqlite import admin as sa

    sa.install_floor_failure_trigger(spec_for(args)["path"])
    print(json.dumps({"armed": "clock_floor_persist"}))
    return 0


def _bypass(args) -> int:
    if args.name not in ("sqlite", "python"):
        raise UsageError(f"chaos backend {args.name}: no bypass writer can be enabled")
    from backends.contract import decode_canonical_base64
    from backends.sqlite import admin as sa
    from backends.sqlite.store import SqliteStore

    path = spec_for(args)["path"]
    sa.enable_bypass_writer(path)
    store = SqliteStore(path)
    try:
        ledgers = store.export_durable()["ledgers"]
    finally:
        store.close()
    for led in ledgers:  # exercise the uncoordinated path with the same bytes
        sa.direct_write(path, led["ledger_namespace"], led["item_id"], decode_canonical_base64(led["source_base64"]))
    print(json.dumps({"bypass": True}))
    return 0


# --------------------------------------------------------------------------- run


def operation(args) -> str:
    if args.action == "claim":
        if args.sub not in CLAIM_OPS:
            raise UsageError(f"chaos backend claim: one of {', '.join(CLAIM_OPS)}")
        return CLAIM_OPS[args.sub]
    if args.action == "legacy":
        if args.sub not in LEGACY_OPS:
            raise UsageError(f"chaos backend legacy: one of {', '.join(LEGACY_OPS)}")
        return LEGACY_OPS[args.sub]
    if args.sub is not None:
        raise UsageError(f"chaos backend {args.action}: unexpected argument {args.sub!r}")
    return {"publish-claimed": "publish", "claim-verify": "verify"}[args.action]


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except StoreUnavailable as e:   # a --dsn that is not a connection string or names no server: bad input
        raise SetupFailed(f"chaos backend {args.name}: the store cannot be reached ({e})") from None


def _run(args: argparse.Namespace) -> int:
    if args.input not in (None, "-") and not os.path.isfile(args.input):
        raise UsageError(f"--input: no such file {args.input!r}")
    if args.action == "provision":
        print(json.dumps(provision(args), separators=(",", ":")))
        return 0
    if args.action == "admin":
        return admin(args)
    op = operation(args)
    from chaos import sut

    if op == "verify" and not sut.get(args.name).abilities()["claim-verify"].ok:
        raise UsageError(f"chaos backend {args.name}: claim-verify is a merge-coordinated (gitjournal) operation")
    with opened(args) as backend:
        if op == "publish" and args.name == "gitjournal" and not backend.provisioned:
            return emit(backend.refuse_publish())  # categorical: before reading any input
        raw = b"" if op == "verify" else read_input(args)
        try:
            reply = backend.call(op, raw)
        except CommitOutcomeUnknown as e:   # no contract reply would be true (the module docstring)
            print(f"chaos backend {args.name}: {op}: claim commit outcome unknown, no true contract reply: {e}",
                  file=sys.stderr)
            return NO_REPLY_EXIT
        return emit(reply)
