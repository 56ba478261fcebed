"""Any program speaking the contract CLI (``backends.external``), driven per
its profile (``--profile``, default ``profiles/chaos-sqlite.yaml``): one CLI
process per operation, started by the worker host, so the host's preloads
(libfaketime, the fsync shim) reach the program. What it can do is what its
profile declares: privileged ``admin`` commands (seed, export, fault
triggers), an opt-in barrier directory, fault mechanisms."""

from __future__ import annotations

import os
import subprocess
import sys

from chaos.errors import SetupFailed, UsageError
from chaos.sut.abilities import can, cannot
from chaos.sut.base import SimpleSession, Sut, Target

def resolve_command(command: str) -> str:
    """``chaos ...`` is this suite's CLI; a leading ``python``/``python3`` is this
    interpreter (the venv that has the suite's dependencies)."""
    import shlex

    from chaos.conform.adapters.external import resolve_command as conform_resolve

    words = shlex.split(command)
    if words[:1] in (["python"], ["python3"]):
        return shlex.join([sys.executable, *words[1:]])
    return conform_resolve(command)


class ExternalTarget(Target):
    name = "external"

    def setup(self, namespaces, durable: dict) -> None:
        from backends.contract import compact_json
        from backends.external import ExternalBackend, load_profile
        from chaos.conform.adapters.external import DEFAULT_PROFILE

        if not self.cfg.backend_command:
            raise UsageError("chaos run --backend external needs --command '...'")
        profile_path = os.path.abspath(self.cfg.profile or os.path.normpath(DEFAULT_PROFILE))
        try:
            profile = load_profile(profile_path)
        except ValueError as e:
            raise UsageError(str(e)) from None
        for need in ("seed", "export"):
            if need not in profile.admin:
                raise UsageError(f"profile {profile.name} has no privileged '{need}' command; chaos run needs it")
        command = resolve_command(self.cfg.backend_command)
        root = self.run.file("ledgers")
        os.makedirs(root, exist_ok=True)
        if profile.git:
            subprocess.run(["git", "init", "-q", root], check=True, capture_output=True)
        groups = [[ns] for ns in namespaces] if profile.one_namespace_per_ledger else [list(namespaces)]
        ledgers: dict[str, str] = {}
        for i, group in enumerate(groups):
            path = os.path.join(root, f"ledger-{i + 1}")
            os.makedirs(path, exist_ok=True)
            for ns in group:
                ledgers[ns] = path
        self.spec = {"backend": "external", "command": command, "profile": profile_path, "ledgers": ledgers}
        self.groups = groups
        self.backend = ExternalBackend(self.spec)
        raw = compact_json(durable)
        try:
            for group in groups:
                self.backend.provision(ledgers[group[0]], group)
                self.backend.admin("seed", ledgers[group[0]], raw, namespace=group[0])
            self.capabilities = self.backend.call("capabilities", {}).envelope
        except Exception as e:
            raise SetupFailed(f"external backend setup failed: {type(e).__name__}: {e}") from None

    def export(self) -> dict:
        from backends.gitjournal.projection import merge

        return merge([self.backend.admin("export", self.spec["ledgers"][g[0]], namespace=g[0]) for g in self.groups])


def default_profile() -> str:
    from chaos.conform.adapters.external import DEFAULT_PROFILE

    return os.path.normpath(DEFAULT_PROFILE)


_profiles: dict = {}


def profile_of(opts: dict):
    """The loaded profile of ``opts`` (cached per path); ``UsageError`` when bad."""
    from backends.external import load_profile

    path = os.path.abspath(opts.get("profile") or default_profile())
    if path not in _profiles:
        try:
            _profiles[path] = load_profile(path)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return _profiles[path]


class ExternalSut(Sut):
    name = "external"
    order = 40
    summary = "any program speaking the contract CLI, its differences declared in a profile"
    takes = ("command", "profile")
    requires = ("command",)

    def usage_hint(self, key: str) -> str:
        return "'...' (the contract CLI command line)"

    def check(self, opts: dict) -> None:
        super().check(opts)
        if opts.get("protocol") != "issue-lock":
            profile_of(opts)  # a broken profile is a config error up front, not a failure of every case

    protocols = ("work-claim", "issue-lock")

    def issue_lock_target(self, cfg, run, note_pid=None, note_dir=None):
        from chaos.issuelock.targets import ExternalLockTarget

        return ExternalLockTarget(cfg, run, note_pid, note_dir)

    def declare(self, opts: dict) -> dict:
        if opts.get("protocol") == "issue-lock":
            from chaos.issuelock.targets import lock_abilities

            return lock_abilities(self.name, opts)
        xp = profile_of(opts)
        admin = xp.admin
        who = f"profile {xp.name}"
        floor = xp.faults.get("clock_floor_persist") or {}
        pou = xp.faults.get("publication-outcome-unknown") or {}
        return {
            "seed": can(f"{who}: privileged 'admin seed' command", "admin") if "seed" in admin
            else cannot(f"{who} has no privileged seed command"),
            "export": can(f"{who}: privileged 'admin export' command", "admin") if "export" in admin
            else cannot(f"{who} has no privileged export command"),
            "barrier": can(f"{who}: the program's opt-in barrier directory ${xp.barrier_env}", "env-dir")
            if xp.barrier_env else cannot(f"{who} declares no barrier: a black-box call cannot be parked inside itself"),
            "clock-hook": cannot("the program's clock is its process clock: libfaketime (absolute time) moves it"),
            "floor-fault": _fault(who, floor, "clock_floor_persist"),
            "outcome-unknown-fault": _fault(who, pou, "publication-outcome-unknown"),
            "restart": can("worker hosts: drop state (each op is a fresh CLI process anyway)", "workers"),
            "kill": can("worker hosts and their running CLI child: SIGKILL the tree", "workers"),
            "pause": can("worker hosts and their running CLI child: SIGSTOP/SIGCONT", "workers"),
            "freeze-call": can("the per-call CLI process serving the call: SIGSTOP mid-call", "cli"),
            "kill-call": can("the per-call CLI process serving the call: SIGKILL mid-call", "cli"),
            "clock": can("worker + CLI wall clocks (inherited preload): libfaketime", "workers"),
            "fsync": can("CLI fsyncs (inherited preload): EIO shim", "workers"),
            "lost-reply": can("workers: exit(137) after the CLI answered exit 0, before the reply", "exit-after-commit"),
            "power-loss": can("the ledger directory the CLI writes: un-fsynced changes undone (inherited preload)",
                              "powerloss-shim"),
            "advisory-setup": can(f"{who}: advisory_setup {xp.advisory_setup}", xp.advisory_setup)
            if xp.advisory_setup else cannot(f"{who} declares no way to set up an advisory (bypass) endpoint"),
            "write-paths": can(f"{who}: provision --write-paths") if xp.provision_write_paths
            else cannot(f"{who} cannot provision a custom write-path inventory"),
            "legacy-writes": can(f"{who}: legacy commands mapped")
            if xp.argv.get("legacy-transition") and xp.argv.get("legacy-create")
            else cannot(f"{who} maps no legacy write commands"),
            "claim-verify": can(f"{who}: claim-verify command") if xp.argv.get("verify") and xp.git
            else cannot(f"{who} declares no git-backed claim-verify"),
            "commit": cannot("chaos run does not commit this program's items"),
        }

    def target(self, cfg, run, note_pid, note_dir) -> Target:
        return ExternalTarget(cfg, run, note_pid, note_dir)

    def conform_session(self, options: dict):
        from chaos.conform.adapters.external import make_adapter

        return SimpleSession(make_adapter, options)


def _fault(who: str, spec: dict, name: str) -> tuple:
    if "admin" in spec:
        return can(f"{who}: admin trigger {spec['admin']!r}", "admin")
    if "fsync_match" in spec:
        return can(f"{who}: fsync EIO shim on paths matching {spec['fsync_match']!r}", "fsync")
    return cannot(f"{who} declares no mechanism for fault {name}")


SUT = ExternalSut()
