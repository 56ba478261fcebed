"""One backend = one ``Sut`` object: its abilities, its run target, its
conformance adapter and its usage rules (see ``chaos.sut``).

A ``Target`` is the system under test of one ``chaos run``::

    target = sut.target(cfg, run, note_pid, note_dir)
    target.setup(namespaces, durable)   # provision + seed (or black-box set-up)
    target.spec                          # what every worker host opens
    target.capabilities                  # the capabilities envelope (or None)
    target.export()                      # final durable state
    target.close()                       # idempotent; also runs on errors

``note_pid(pid)`` records a process for the run's watchdog (it kills it with
its descendants if ``chaos run`` itself dies, even by SIGKILL); ``note_dir``
records a directory outside the run dir to remove then (a server's /tmp dir).
"""

from __future__ import annotations

import sys
from typing import Callable

from chaos.errors import UsageError
from chaos.sut.abilities import Abilities, cannot

#: the backend-specific options of run / conform / doctor, and their flags
OPTIONS = {"dsn": "--dsn", "command": "--command", "profile": "--profile", "factory": "--factory",
           "nodes": "--nodes"}   # nodes: "docker" (containers, chaos.nodes.docker); local is the default


def open_spec(spec: dict):
    from backends.registry import open_backend

    return open_backend(spec)


def check_command(command) -> list[str]:
    """The words of ``--command`` (``shlex``); ``UsageError`` (one line) when it cannot be split."""
    import shlex

    from chaos.errors import UsageError

    if not command:
        return []
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise UsageError(f"--command {command!r}: cannot be split into words ({e})") from None
    if not words:
        raise UsageError(f"--command {command!r}: names no program")
    return words


def resolve_command(command: str) -> str:
    """An outside program's ``--command``, as the suite runs it: ``chaos ...``
    is this suite's CLI; a leading ``python``/``python3`` is this interpreter
    (the venv that has the suite's dependencies)."""
    import shlex

    words = check_command(command)
    if words[:1] == ["chaos"]:
        return shlex.join([sys.executable, "-m", "chaos.cli", *words[1:]])
    if words[:1] in (["python"], ["python3"]):
        return shlex.join([sys.executable, *words[1:]])
    return command


def redact_dsn(dsn: str | None) -> str | None:
    """A DSN safe to record: any password is replaced by ``***`` (the run
    directory, the recorded command and results.json never hold a secret)."""
    if not dsn:
        return dsn
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "<unparseable DSN>"
    if "password" not in parts:
        return dsn
    parts["password"] = "***"
    return make_conninfo("", **parts)


class Target:
    name = ""

    def __init__(self, cfg, run, note_pid: Callable[[int], None], note_dir: Callable[[str], None]):
        self.cfg = cfg
        self.run = run
        self.note_pid = note_pid
        self.note_dir = note_dir
        self.spec: dict = {}
        self.capabilities: dict | None = None
        self.server = None      # PgServer when we run one
        self.proxy = None       # FaultProxy in front of the server (lost-reply)
        self.server_fsync = None  # FsyncFault preloaded into the server
        self.setup_notes: list[str] = []   # what the run's notes say about its set-up (e.g. writes not confined)

    def setup(self, namespaces, durable: dict) -> None:
        backend = open_spec(self.spec)
        try:
            backend.store.seed(durable)
            self.capabilities = backend.call("capabilities", {}).envelope
        finally:
            backend.close()

    def export(self) -> dict:
        backend = open_spec(self.spec)
        try:
            return backend.store.export_durable()
        finally:
            backend.close()

    def close(self) -> None:
        return None

    def describe(self) -> dict:
        """What ``results.json`` records about the system under test."""
        spec = {k: v for k, v in self.spec.items() if k != "namespaces"}
        if "dsn" in spec:
            spec["dsn"] = redact_dsn(spec["dsn"])
        return {"backend": self.name, "spec": spec}


class Sut:
    """A backend as the harness sees it. Subclasses set the class attributes
    and override what they have; every consumer asks this object."""

    name = ""
    order = 100                 # position in listings (doctor, help)
    summary = ""
    runs = True                 # ``chaos run --backend NAME``
    conforms = True             # ``chaos conform --backend NAME``
    cli = False                 # ``chaos backend NAME`` (the contract CLI over this store)
    cli_ledger = True           # ``chaos backend NAME`` stores in the ``--ledger`` directory
    takes: tuple[str, ...] = () # which of ``OPTIONS`` it accepts
    requires: tuple[str, ...] = ()  # which of them it needs
    protocols: tuple[str, ...] = ("work-claim",)  # the contracts it serves (``chaos run --workload``)

    # ------------------------------------------------------------------ abilities

    def abilities(self, opts: dict | None = None) -> Abilities:
        from chaos.deterministic import why_not

        opts = dict(opts or {})
        rows = self.declare(opts)
        if "deterministic" not in rows or opts.get("nodes") == "docker":
            rows = dict(rows, deterministic=cannot(why_not(self.name, opts)))
        return Abilities(self.name, rows)

    def declare(self, opts: dict) -> dict:
        """ability -> ``can(how, via)`` / ``cannot(why)`` (``chaos.sut.abilities``)."""
        return {}

    def api_version(self, opts: dict | None = None) -> int:
        """The work-claim ``api_version`` it speaks (conformance runs the vectors of that version)."""
        from backends.contract.capabilities import API_VERSION

        return API_VERSION

    # ------------------------------------------------------------------ usage

    def check(self, opts: dict) -> None:
        """Refuse options this backend does not take or lacks (``UsageError``, one line)."""
        for key, flag in OPTIONS.items():
            if opts.get(key) and key not in self.takes:
                owners = ", ".join(_owners(key)) or "no backend"
                raise UsageError(f"{flag} is for --backend {owners}, not {self.name}")
        for key in self.requires:
            if not opts.get(key):
                raise UsageError(f"--backend {self.name} needs {OPTIONS[key]} {self.usage_hint(key)}")

    def usage_hint(self, key: str) -> str:
        return "..."

    # ------------------------------------------------------------------ chaos run / conform

    def target(self, cfg, run, note_pid, note_dir) -> Target:
        raise UsageError(f"backend {self.name!r} cannot be run by chaos run")

    def conform_session(self, options: dict):
        raise UsageError(f"backend {self.name!r} has no conformance adapter")

    def issue_lock_target(self, cfg, run, note_pid=None, note_dir=None):
        """The issue-lock store this backend serves (``chaos.issuelock.targets``)."""
        raise UsageError(f"backend {self.name!r} does not serve the issue-lock protocol")

    # ------------------------------------------------------------------ chaos backend NAME

    def cli_spec(self, ledger: str, args) -> dict:
        """The backend spec ``chaos backend NAME`` opens for one invocation."""
        raise UsageError(f"chaos backend {self.name}: no contract CLI")

    def cli_provision(self, ledger: str, namespaces: list[str], write_paths: dict | None, args) -> None:
        raise UsageError(f"chaos backend {self.name}: cannot provision")


#: every backend's ``Sut``, in listing order, once ``chaos.sut`` has listed them (it hands them
#: over: the list imports every backend module, each of which imports this one)
LISTED: list[Sut] = []


def _owners(key: str) -> list[str]:
    return [s.name for s in LISTED if key in s.takes]


class SimpleSession:
    """A conformance session for adapters that share nothing between cases."""

    def __init__(self, make_adapter: Callable, options: dict):
        self._make = make_adapter
        self._options = options

    def new_adapter(self):
        return self._make(self._options)

    def close(self) -> None:
        return None
