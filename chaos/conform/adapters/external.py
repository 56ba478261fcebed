"""Conformance adapter for ANY program speaking the contract CLI convention
(``backends.external``), driven as a black box: one process per call.

    chaos conform --backend external --command 'python -m chaos.cli backend sqlite' [--profile FILE]

Mechanisms (vectors.md §11), all real, all per the profile (never per program):

* CLK: the program's clock is its process wall clock, moved with libfaketime
  in absolute-time mode (``chaos.faults.faketime.ClockFault.set_absolute``)
  before every action: no clock hook is needed in the program;
* SEED / export: the profile's privileged ``admin seed`` / ``admin export``
  commands (scaffolding); without them a seeded case is not applicable;
* BAR: a black-box call cannot be parked inside itself, so a preflight is
  *deferred*: the real ``publish-claimed`` runs at the commit (the latest
  moment the model allows). An advisory endpoint's publish runs at the
  preflight (it must refuse before any commit). The one case where the
  barrier is essential (``paused-writer-commit-boundary``) is reported
  ``profile-substituted`` with that note: its commit-boundary race is not
  exercised by this mechanism;
* RST: every call is a process that already ended; deferred calls are dropped;
* CRL / PRL: the call really commits; its exit-0 reply is discarded;
* CFP / POU: the profile's mechanism (an admin trigger, or the fsync EIO shim
  ``chaos.faults.failsync`` matched on a path; POU armed for the commit call only);
* CFG: ``advisory_setup`` (enable the bypass writer, or leave a Git ledger
  unprovisioned) and ``provision --write-paths``; otherwise not applicable;
* NS2 on a one-namespace-per-ledger profile: one ledger per namespace.

Processes: every call is killed with its process group when it ends
(``backends.external.process``); a child that left the group (``setsid``, a
daemon) is re-parented to this process, made a subreaper here as ``chaos run``
is, and ``close()`` kills every process under it that the case started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from backends.api import ReplyLost
from backends.contract.records import Reply
from backends.contract import compact_json
from backends.external import ExternalBackend, Indeterminate, ProfileMismatch, load_profile
from backends.external.profile import capability_mismatches
from chaos.conform.adapters.base import AdapterError, Parked, Profile
from chaos.conform.adapters.gitjournal import adjust_for_profile, not_applicable_for_profile
from chaos.faults import procs
from chaos.errors import UsageError
from chaos.sut.base import resolve_command

DEFAULT_PROFILE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "profiles", "chaos-sqlite.yaml")


def _has_fault(case, name: str) -> bool:
    return case.initial["faults"].get(name) is True or any(a.get("target") == name for a in case.actions)


class ExternalAdapter:
    def __init__(self, options: dict | None = None):
        options = dict(options or {})
        if not options.get("command"):
            raise UsageError("chaos conform --backend external needs --command '...'")
        self.command = resolve_command(options["command"])
        self.xprofile = load_profile(options.get("profile") or os.path.normpath(DEFAULT_PROFILE))
        xp = self.xprofile
        self.black_box = xp.black_box
        self.profile = Profile(backend_name=xp.backend_name or "",
                               exports_requests=xp.export.requests and not self.black_box,
                               refuses_before_reading=xp.refuses_before_reading)
        self.replayed = 0
        self.unbound = False
        self.dir = tempfile.mkdtemp(prefix="chaos-conform-external-")
        self.backend: ExternalBackend | None = None
        self.clock = None
        self.fsync = None
        self.ledgers: dict[str, str] = {}
        self.lose: set[str] = set()
        self.pou_armed = False
        self.fired: set[str] = set()
        self.advisory = False
        self.barrier_dir = ""
        self.leftovers = procs.Leftovers()   # a daemonized child of a call stays in our tree (close() ends it)

    # ------------------------------------------------------------------ applicability

    def not_applicable(self, case) -> str | None:
        from chaos.conform.adapters import blackbox

        xp = self.xprofile
        if xp.profile == "merge-coordinated":
            reason = not_applicable_for_profile(case)
            if reason:
                return reason
        if self.black_box:
            if xp.provision_mints_namespace and not xp.namespace_file:
                return (f"profile {xp.name}: the program mints its own namespace and declares no namespace_file, "
                        "so the vectors' fixed namespaces cannot be bound")
            if xp.items.path is None and case.initial["durable"]["ledgers"]:
                return (f"profile {xp.name} declares no item files (items.path: null): seeded ledger items have no "
                        "public path")
            return blackbox.replay_reason(case)
        # seed, export, fault mechanisms, advisory set-up, write paths, legacy
        # commands: the backend's abilities (chaos.sut.external), asked first
        return None

    def adjust_expected(self, case, expected: dict) -> list[str]:
        notes = adjust_for_profile(case, expected) if self.xprofile.profile == "merge-coordinated" else []
        if self.black_box:
            if expected["final"]["durable"]["clock_floors"]:
                notes.append("black box: clock floors are not observable through public reads and are not "
                             "compared (the transcript's observed_at values still pin them)")
            expected["final"]["durable"].pop("clock_floors", None)
            d = case.initial["durable"]
            if d["claims"] or d["clock_floors"]:
                notes.append("black box: claims and floors seeded by public replay (acquire/release at pinned "
                             "clocks), not by a privileged seed")
        if not self.xprofile.barrier_env and any(a["operation"] == "ledger-publication.preflight" for a in case.actions) and any(
                a["operation"] == "work-claim.acquire" for a in case.actions):
            notes.append("barrier emulated by deferring the black-box publish to its commit: "
                         "the commit-boundary race itself is not exercised")
        return notes

    # ------------------------------------------------------------------ setup

    def setup(self, case, clock_ms: int) -> None:
        from chaos.faults.faketime import ClockFault

        xp = self.xprofile
        self._case = case
        self.clock = ClockFault(os.path.join(self.dir, "faketime"))
        self.clock.set_absolute(clock_ms)
        b = case.initial["backend"]
        namespaces = list(b["ledger_binding"]["namespaces"])
        paths = dict(b["write_paths"])
        self.advisory = paths.get("alternate") == "bypass"
        root = os.path.join(self.dir, "repo")
        os.makedirs(root)
        if xp.git:
            subprocess.run(["git", "init", "-q", root], check=True)
        groups = [[ns] for ns in namespaces] if xp.one_namespace_per_ledger else [namespaces]
        for i, group in enumerate(groups):
            for ns in group:
                self.ledgers[ns] = os.path.join(root, f"ledger-{i + 1}")
            os.makedirs(os.path.join(root, f"ledger-{i + 1}"), exist_ok=True)
        self.backend = ExternalBackend({"command": self.command, "ledgers": self.ledgers, "write_root": self.dir})
        self.backend.profile = xp
        self.backend.env = self._env(case)
        if self.xprofile.barrier_env:
            self.barrier_dir = os.path.join(self.dir, "barrier")
            os.makedirs(self.barrier_dir)
            self.backend.env[self.xprofile.barrier_env] = self.barrier_dir
        durable = compact_json(case.initial["durable"])
        if self.black_box:
            self._black_box_setup(case, groups, root)
        for ns_group in groups:
            ledger = self.ledgers[ns_group[0]]
            if self.black_box:
                break
            if not (self.advisory and xp.advisory_setup == "unprovisioned"):
                wp = None
                if xp.provision_write_paths:
                    wp = {**paths, "alternate": "none"} if self.advisory else paths
                self.backend.provision(ledger, ns_group, wp)
            if "seed" in xp.admin:
                self.backend.admin("seed", ledger, durable, namespace=ns_group[0])
            if self.advisory and xp.advisory_setup == "bypass-admin":
                self.backend.admin("enable-bypass", ledger)
        if not self.profile.backend_name:
            caps = self.backend.call("capabilities", {})
            self.profile.backend_name = caps.envelope.get("result", {}).get("backend", {}).get("name", "")
        for name, armed in case.initial["faults"].items():
            if armed:
                self.arm_fault(name)

    def _black_box_setup(self, case, groups: list[list[str]], root: str) -> None:
        """Namespaces through the documented namespace file + provision, items as
        committed files, claims and floors by public replay (``blackbox``)."""
        from backends.external import git
        from chaos.conform.adapters import blackbox

        xp = self.xprofile
        provisioned = not (self.advisory and xp.advisory_setup == "unprovisioned")
        for group in groups:
            ledger = self.ledgers[group[0]]
            if provisioned and xp.namespace_file:
                path = os.path.join(ledger, xp.namespace_file)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(group[0] + "\n")
        if xp.items.path is not None:
            blackbox.write_items(case, self.ledgers, xp.items.path, committed=True)
        if xp.git:
            git.commit_paths(root, ["."], "claim-chaos: bind the case's namespaces and seed its items")
        if xp.items.path is not None:
            blackbox.write_items(case, self.ledgers, xp.items.path, committed=False)  # uncommitted working bytes
        unbind = self.advisory and xp.advisory_setup == "unprovisioned" and bool(case.initial["durable"]["claims"]) \
            and bool(xp.namespace_file)
        self.unbound = self.advisory and xp.advisory_setup == "unprovisioned"
        if unbind:  # claims of an advisory endpoint: bound while replayed, then the namespace file goes
            provisioned = True
            for group in groups:
                path = os.path.join(self.ledgers[group[0]], xp.namespace_file)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(group[0] + "\n")
            if xp.git:
                git.commit_paths(root, ["."], "claim-chaos: bind the namespace for the replay")
        if provisioned:
            wp = case.initial["backend"]["write_paths"] if xp.provision_write_paths else None
            for group in groups:
                out = self.backend.provision(self.ledgers[group[0]], [] if xp.provision_mints_namespace else group,
                                             None if xp.provision_mints_namespace else wp)
                from backends.contract.jsonstrict import pointer_get

                got = pointer_get(out, xp.provision_namespace_pointer, None) if xp.provision_mints_namespace else group[0]
                if got != group[0]:
                    raise AdapterError(f"provision bound {got!r}, not the namespace file's {group[0]!r}")
        for at, op, req in blackbox.replay_plan(case):
            self.clock.set_absolute(at)
            reply = self._call(op, req)
            self.replayed += 1
            if op == "acquire" and reply.exit != 0:
                raise AdapterError(f"seed replay: acquire at {at} answered exit {reply.exit}: {str(reply.envelope)[:300]}")
        if unbind:
            for group in groups:
                os.unlink(os.path.join(self.ledgers[group[0]], xp.namespace_file))
            if xp.git:
                git.commit_removal(root, [os.path.relpath(os.path.join(self.ledgers[g[0]], xp.namespace_file), root)
                                          for g in groups], "claim-chaos: unprovision (advisory endpoint)")

    def _env(self, case) -> dict:
        fault = None
        for name in ("clock_floor_persist", "publication-outcome-unknown"):
            if _has_fault(case, name) and "fsync_match" in self.xprofile.faults.get(name, {}):
                fault = self.xprofile.faults[name]["fsync_match"]
        if fault is None:
            return self.clock.env()
        from chaos.faults.failsync import FsyncFault

        first = next(iter(self.ledgers.values()))
        self.fsync = FsyncFault(os.path.join(self.dir, "failsync.ctl"), match=fault.replace("{ledger}", first))
        return {**self.clock.env(ld_preload=self.fsync.library), "FAILSYNC_FILE": self.fsync.ctl_path,
                "FAILSYNC_MATCH": self.fsync.match}

    # ------------------------------------------------------------------ actions

    def set_clock(self, ms: int) -> None:
        self.clock.set_absolute(ms)

    def _call(self, op: str, request: dict) -> Reply:
        try:
            reply = self.backend.call(op, request)
        except Indeterminate as e:
            raise AdapterError(f"indeterminate: {e}") from None
        except ProfileMismatch as e:   # the profile is wrong, not the program: the whole run stops, one line
            raise UsageError(str(e)) from None
        if op == "capabilities":   # mode is not compared: a case's advisory endpoint reports "advisory"
            wrong = capability_mismatches(self.xprofile, reply.envelope, mode=False)
            if wrong:
                raise UsageError("; ".join(wrong.values()))
        return reply

    def call(self, op: str, request: dict) -> Reply:
        cls = "claim" if op in ("acquire", "renew", "release") else ("publish" if op == "publish" else None)
        if op == "publish" and self.pou_armed:
            reply = self._with_pou(lambda: self._call(op, request))
        else:
            reply = self._call(op, request)
        if cls in self.lose and reply.exit == 0:
            self.lose.discard(cls)
            raise ReplyLost(f"{op}: exit-0 reply discarded after the real commit")
        return reply

    def _with_pou(self, commit) -> Reply:
        self.fsync.arm()
        try:
            reply = commit()
        finally:
            self.fsync.disarm()
        if reply.exit == 6 and reply.envelope.get("error", {}).get("code") == "publication-outcome-unknown":
            self.pou_armed = False
            self.fired.add("publication-outcome-unknown")
        return reply

    def start_publish(self, request: dict) -> Reply | Parked:
        if self.xprofile.barrier_env:
            return self._start_parked(request)
        if self.advisory:
            return self.call("publish", request)  # must refuse before any commit
        return Parked(request)

    def finish_publish(self, parked: Parked) -> Reply:
        if isinstance(parked, _ProcessParked):
            if self.pou_armed:
                return self._with_pou(lambda: parked.release())
            return self._lost_or(parked.release(), "publish")
        return self.call("publish", parked.request)

    def _start_parked(self, request: dict) -> Reply | Parked:
        """The real barrier: the program parks at its pre-commit hook."""
        parked = _ProcessParked(request, self.barrier_dir, lambda: self._call("publish", request))
        return parked.wait() or parked

    def _lost_or(self, reply: Reply, cls: str) -> Reply:
        if cls in self.lose and reply.exit == 0:
            self.lose.discard(cls)
            raise ReplyLost("exit-0 reply discarded after the real commit")
        return reply

    def arm_fault(self, name: str) -> None:
        spec = self.xprofile.faults.get(name, {})
        if name == "clock_floor_persist":
            if "admin" in spec:
                for ledger in dict.fromkeys(self.ledgers.values()):
                    self.backend.admin(spec["admin"], ledger)
            else:
                self.fsync.arm()  # sticky
        elif name == "publication-outcome-unknown":
            self.pou_armed = True
        elif name in ("claim-response-loss", "publication-response-loss"):
            self.lose.add("claim" if name == "claim-response-loss" else "publish")
        else:
            raise ValueError(f"unknown fault {name!r}")

    def take_fired(self, name: str) -> bool:
        if name in self.fired:
            self.fired.discard(name)
            return True
        return False

    def restart(self) -> None:
        """SIGKILL every parked program (it never commits); deferred
        publishes are dropped by the runner."""
        for parked in list(_ProcessParked.live):
            parked.kill()

    def export(self) -> dict:
        from backends.gitjournal.projection import merge

        if self.fsync is not None:
            self.fsync.disarm()
        if self.black_box:
            from chaos.conform.adapters import blackbox

            bound = []
            if self.unbound:  # an advisory endpoint's claims are read with its namespace file back in place
                for ns, ledger in self.ledgers.items():
                    path = os.path.join(ledger, self.xprofile.namespace_file)
                    with open(path, "w") as f:
                        f.write(ns + "\n")
                    bound.append(path)
            try:
                return blackbox.observed_export(self._case, self._call, self.ledgers, self.xprofile.items.path)
            finally:
                for path in bound:
                    os.unlink(path)
        by_ledger = {}
        for ns, ledger in self.ledgers.items():
            by_ledger.setdefault(ledger, ns)
        return merge([self.backend.admin("export", ledger, namespace=ns) for ledger, ns in by_ledger.items()])

    def close(self) -> None:
        try:
            if self.fsync is not None:
                self.fsync.cleanup()
        finally:
            self.leftovers.kill()   # what the case's calls left running (a setsid'd child ignoring SIGTERM)
            shutil.rmtree(self.dir, ignore_errors=True)


class _ProcessParked(Parked):
    """One black-box publish running in a thread, parked at the program's
    opt-in barrier (``<dir>/<op>.arm`` -> ``.parked`` with its pid -> ``.release``)."""

    live: set = set()

    def __init__(self, request: dict, directory: str, run):
        super().__init__(request)
        self.base = os.path.join(directory, request["operation_id"])
        open(self.base + ".arm", "w").close()
        self.box: dict = {}
        self.thread = threading.Thread(target=self._body, args=(run,), daemon=True)
        self.thread.start()

    def _body(self, run) -> None:
        try:
            self.box["reply"] = run()
        except BaseException as e:  # handed to the runner's thread
            self.box["error"] = e

    def wait(self, timeout: float = 60.0) -> Reply | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.base + ".parked") and os.path.getsize(self.base + ".parked"):
                _ProcessParked.live.add(self)
                return None
            if not self.thread.is_alive():
                os.unlink(self.base + ".arm")
                return self._result()
            time.sleep(0.005)
        raise AdapterError("publish neither returned nor reached the barrier")

    def _result(self) -> Reply:
        if "error" in self.box:
            raise self.box["error"]
        return self.box["reply"]

    def release(self) -> Reply:
        _ProcessParked.live.discard(self)
        open(self.base + ".release", "w").close()
        self.thread.join(60)
        return self._result()

    def kill(self) -> None:
        _ProcessParked.live.discard(self)
        with open(self.base + ".parked") as f:
            pid = int(f.read())
        try:
            os.kill(pid, signal.SIGKILL)  # the program we started (parked, holding nothing)
        except ProcessLookupError:
            pass
        self.thread.join(10)


def make_adapter(options: dict | None = None) -> ExternalAdapter:
    return ExternalAdapter(options)
