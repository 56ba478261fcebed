"""Any program speaking the contract CLI (``backends.external``), driven per
its profile (``--profile``, default ``profiles/chaos-sqlite.yaml``): one CLI
process per operation, started by the worker host, so the host's preloads
(libfaketime, the fsync shim) reach the program. What it can do is what its
profile declares: privileged ``admin`` commands (seed, export, fault
triggers), an opt-in barrier directory, fault mechanisms."""

from __future__ import annotations

import os
import subprocess
from contextlib import nullcontext

from backends.external import confine
from backends.external.profile import capability_mismatches
from chaos.errors import SetupFailed, UsageError
from chaos.sut.abilities import can, cannot
from chaos.sut.base import SimpleSession, Sut, Target, check_command, resolve_command


class ExternalTarget(Target):
    """Privileged mode (the profile has ``admin seed``/``export``): provision,
    seed and export through those commands. Black-box mode (no ``admin seed``):
    only what the program's users have. Provision through its command (adopting
    the namespace it mints, ``provision_mints_namespace``), write the seeded
    items as files where its docs say they live (``items.path``), commit them
    with the namespace file when the ledger is Git-backed, and read the state
    back through public reads at the end (the runner's final phase), with the
    item files and Git history as the export (``observed: ["ledgers"]``)."""

    name = "external"

    def setup(self, namespaces, durable: dict) -> None:
        from backends.contract import compact_json
        from backends.external import ExternalBackend

        profile_path = os.path.abspath(self.cfg.profile or default_profile())
        profile = profile_of({"profile": profile_path})
        self.profile = profile
        self.black_box = profile.black_box
        if not self.black_box and "export" not in profile.admin:
            raise UsageError(f"profile {profile.name} has 'admin seed' but no 'admin export'")
        command = resolve_command(self.cfg.backend_command)
        if getattr(self.cfg, "deterministic", False):   # its calls start in the run dir, not here
            command = paths_made_absolute(command)
        confined, how = confine.status()
        if not confined:   # said up front, not a refusal: the run goes on unconfined
            self.setup_notes.append(f"writes not confined: {how}")
        root = self.run.file("ledgers")
        os.makedirs(root, exist_ok=True)
        if profile.git:
            subprocess.run(["git", "init", "-q", root], check=True, capture_output=True)
        groups = [[ns] for ns in namespaces] if profile.one_namespace_per_ledger else [list(namespaces)]
        paths = [os.path.join(root, f"ledger-{i + 1}") for i in range(len(groups))]
        for path in paths:
            os.makedirs(path, exist_ok=True)
        self.spec = {"backend": "external", "command": command, "profile": profile_path,
                     "ledgers": {ns: paths[i] for i, g in enumerate(groups) for ns in g},
                     "commit_lock": self.run.file("tmp", "git-commit.lock"), "write_root": self.run.path,
                     # deterministic: the ledgers by a path of one length wherever the store is (``ExternalBackend.cwd``)
                     **({"cwd": self.run.path} if getattr(self.cfg, "deterministic", False) else {})}
        self.backend = ExternalBackend(self.spec)
        try:
            adopted = self._provision(groups, paths)
            if adopted != list(namespaces):
                self.spec["ledgers"] = {ns: paths[i] for i, ns in enumerate(adopted)}
                self.backend = ExternalBackend(self.spec)
                groups = [[ns] for ns in adopted]
            self.namespaces = adopted
            self.groups = groups
            self.publishes = True
            if self.black_box and profile.items.path is None:
                self.publishes = False   # items are not files: no public path to seed them, nothing to publish
                self.item_ids = {}
            elif self.black_box:
                self._write_items(durable, dict(zip(namespaces, adopted)), root)
            else:
                raw = compact_json(durable)
                for group in groups:
                    self.backend.admin("seed", self.spec["ledgers"][group[0]], raw, namespace=group[0])
            self.capabilities = self.backend.call("capabilities", {}).envelope
            wrong = capability_mismatches(profile, self.capabilities)
            if wrong:   # the profile is the user's input: its error, before any verdict about the program
                raise UsageError("; ".join(wrong.values()))
        except UsageError:
            raise
        except Exception as e:
            raise SetupFailed(f"external backend setup failed: {type(e).__name__}: {e}") from None

    @property
    def known_deviations(self) -> list[dict]:
        return list(self.profile.known_deviations)

    @property
    def commits(self) -> bool:
        """A cooperating agent commits each acknowledged publication (Git-backed, ``items.commit``)."""
        return bool(self.profile.git and self.profile.items.commit)

    def _provision(self, groups: list[list[str]], paths: list[str]) -> list[str]:
        """Provision every ledger; the namespaces it is bound to, in plan order."""
        from backends.contract.jsonstrict import pointer_get

        from chaos.deterministic.shim import own_stream

        out = []
        for n, (group, path) in enumerate(zip(groups, paths)):
            if not self.profile.provision_mints_namespace:
                self.backend.provision(path, group)
                out += group
                continue
            # deterministic set-up: each provision its own seeded stream (the first keeps the set-up's)
            with own_stream(f"provision-{n + 1}") if n else nullcontext():
                reply = self.backend.provision(path, [])
            minted = pointer_get(reply, self.profile.provision_namespace_pointer, None)
            if not isinstance(minted, str):
                raise SetupFailed(f"provision reply has no namespace at {self.profile.provision_namespace_pointer}: "
                                  f"{str(reply)[:300]}")
            if minted in out:   # two ledgers of one namespace: the run could not tell them apart
                raise SetupFailed(f"provision of {path} minted namespace {minted}, which an earlier ledger has")
            out.append(minted)
        return out

    def _write_items(self, durable: dict, rename: dict, root: str) -> None:
        """Black-box seeding: item files only (claims, floors and outcomes can
        only come from the program's own decisions), committed when Git-backed."""
        import base64

        from backends.external import git

        for key in ("claims", "clock_floors", "publication_outcomes"):
            if durable.get(key):
                raise SetupFailed(f"black-box set-up cannot seed {key} (profile {self.profile.name} has no admin seed)")
        self.item_ids: dict[str, list[str]] = {}
        for led in durable.get("ledgers") or []:
            ns = rename.get(led["ledger_namespace"], led["ledger_namespace"])
            self.item_ids.setdefault(ns, []).append(led["item_id"])
            ledger = self.spec["ledgers"][ns]
            path = os.path.join(ledger, self.profile.items.path.replace("{item_id}", led["item_id"]))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(base64.b64decode(led["source_base64"]))
        if self.profile.git:
            git.commit_paths(root, ["."], "claim-chaos: provision ledgers and seed items")

    def export(self) -> dict:
        from backends.gitjournal.projection import merge

        if self.black_box:
            return self._observed_export()
        return merge([self.backend.admin("export", self.spec["ledgers"][g[0]], namespace=g[0]) for g in self.groups])

    def _observed_export(self) -> dict:
        """What black-box mode can observe of the final state: every item file's
        bytes (as the program's docs place them) and, Git-backed, the revision
        of each item at every commit that touched it. Claims and outcomes are
        read back by the final phase through public reads (in the history);
        floors are not observable."""
        from backends.contract.values import encode_base64
        from backends.external import git

        ledgers, history = [], []
        for ns, ledger in self.spec["ledgers"].items():
            for item in self.item_ids.get(ns, []):
                path = os.path.join(ledger, self.profile.items.path.replace("{item_id}", item))
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except FileNotFoundError:
                    continue
                ledgers.append({"ledger_namespace": ns, "item_id": item, "revision": git.revision(data),
                                "source_base64": encode_base64(data)})
                if self.profile.git:
                    repo = git.top_level(ledger)
                    history += [{"ledger_namespace": ns, "item_id": item, **c}
                                for c in git.item_history(repo, self.backend.item_relpath(ledger, item, repo))]
        out = {"ledgers": ledgers, "observed": ["ledgers"]}
        if self.profile.git:
            out["git"] = {"head": git.head(self.run.file("ledgers")), "items": history}
        return out

def probe_program(command: str, profile, commands: bool = False) -> dict[str, str]:
    """Ask the program itself, on a scratch ledger of its own (removed after):
    provision it, then compare its capabilities with the profile
    (``capability_mismatches``); with ``commands``, also call every other
    mapped contract command with an empty request: a program that has it
    answers with a contract envelope (an ``invalid-request`` refusal is an
    answer), one that does not has no contract reply. Profile member -> the
    one line saying how the program contradicts it. Without ``commands`` (the
    conformance run's check) a program that cannot even provision or answer
    capabilities is not judged here: the cases say what it could not do."""
    import shutil
    import tempfile

    from backends.external import ExternalBackend, Indeterminate
    from backends.gitjournal.ledger import new_namespace

    from chaos.faults.procs import Leftovers

    leftovers = Leftovers()
    scratch = tempfile.mkdtemp(prefix="chaos-probe-external-")
    try:
        root = os.path.join(scratch, "ledgers")
        ledger = os.path.join(root, "ledger-1")
        os.makedirs(ledger)
        if profile.git:
            subprocess.run(["git", "init", "-q", root], check=True, capture_output=True)
        backend = ExternalBackend({"command": resolve_command(command), "ledger": ledger, "write_root": scratch})
        backend.profile = profile
        who = f"profile {profile.name}"
        try:
            backend.provision(ledger, [] if profile.provision_mints_namespace else [new_namespace()])
        except (Indeterminate, RuntimeError, ValueError) as e:
            if not commands:
                return {}
            return {"argv.provision": f"{who}: member argv.provision: the program did not provision a scratch "
                                      f"ledger ({e})"}
        try:
            wrong = capability_mismatches(profile, backend.call("capabilities", {}).envelope)
        except (Indeterminate, ValueError) as e:
            if not commands:
                return {}
            return {"argv.capabilities": f"{who}: member argv.capabilities: the program gave no contract reply ({e})"}
        for op, template in profile.argv.items() if commands else ():
            if template is None or op in ("provision", "capabilities") or (op == "verify" and not profile.git):
                continue   # the convention maps claim-verify everywhere; only a Git-backed profile uses it
            try:
                backend.invoke(backend.argv(template, ledger), b"" if op == "verify" else b"{}", op)
            except Indeterminate as e:
                wrong[f"argv.{op}"] = (f"{who}: member argv.{op}: the program does not answer it as a contract "
                                       f"command ({str(e)[:300]})")
        return wrong
    finally:
        leftovers.kill()
        shutil.rmtree(scratch, ignore_errors=True)


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
        check_command(opts.get("command"))
        if opts.get("protocol") != "issue-lock":
            profile_of(opts)  # a broken profile is a config error up front, not a failure of every case
        else:
            from backends.issuelock.external import LockProfileError, load_lock_profile
            from chaos.issuelock.targets import DEFAULT_PROFILE

            try:
                load_lock_profile(opts.get("profile") or DEFAULT_PROFILE)
            except LockProfileError as e:
                raise UsageError(str(e)) from None

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
        replay = xp.black_box and (bool(xp.namespace_file) or not xp.provision_mints_namespace)
        return {
            "seed": can(f"{who}: privileged 'admin seed' command", "admin") if "seed" in admin
            else can(f"{who}: black box: namespace file + item files (+ git commit), claims and floors by public "
                     "replay at pinned clocks", "replay") if replay
            else cannot(f"{who} has no privileged seed command and no namespace_file to bind a case's namespaces"),
            "export": can(f"{who}: privileged 'admin export' command", "admin") if "export" in admin
            else can(f"{who}: black box: public reads (read, publication-read) and the item files; floors are not "
                     "observable", "public-reads") if xp.black_box
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
            "deterministic": _deterministic(opts),
            "advisory-setup": can(f"{who}: advisory_setup {xp.advisory_setup}", xp.advisory_setup)
            if xp.advisory_setup else cannot(f"{who} declares no way to set up an advisory (bypass) endpoint"),
            "write-paths": can(f"{who}: provision --write-paths") if xp.provision_write_paths
            else cannot(f"{who} cannot provision a custom write-path inventory"),
            "legacy-writes": can(f"{who}: legacy commands mapped")
            if xp.argv.get("legacy-transition") and xp.argv.get("legacy-create")
            else cannot(f"{who} maps no legacy write commands"),
            "claim-verify": can(f"{who}: claim-verify command") if xp.argv.get("verify") and xp.git
            else cannot(f"{who} declares no git-backed claim-verify"),
            "commit": can(f"{who}: a cooperating agent commits each acknowledged publication (items.commit)", "git")
            if xp.git and xp.items.commit else cannot(f"{who} declares no Git-backed item commits (items.commit)"),
            "claim-adopt": can(f"{who}: claim-adopt command") if xp.argv.get("claim-adopt")
            else cannot(f"{who} maps no claim-adopt command"),
        }

    def api_version(self, opts: dict | None = None) -> int:
        return profile_of(dict(opts or {})).api_version

    def target(self, cfg, run, note_pid, note_dir) -> Target:
        return ExternalTarget(cfg, run, note_pid, note_dir)

    def conform_session(self, options: dict):
        from chaos.conform.adapters.external import make_adapter

        wrong = probe_program(options["command"], profile_of(options))
        if wrong:   # a profile the program contradicts: its error, before any case is judged
            raise UsageError("; ".join(wrong.values()))
        return SimpleSession(make_adapter, options)

    #: the ability a mapped command gives (a program without the command does not have it)
    ABILITY_OF_MEMBER = {"argv.verify": "claim-verify", "argv.legacy-transition": "legacy-writes",
                         "argv.legacy-create": "legacy-writes", "argv.claim-adopt": "claim-adopt"}

    def probe(self, opts: dict) -> dict[str, str]:
        """``chaos doctor --backend external --command ...``: the profile against
        the program itself (``probe_program``): member -> the line that says how."""
        if not opts.get("command") or opts.get("protocol") == "issue-lock":
            return {}
        return probe_program(opts["command"], profile_of(opts), commands=True)


def _fault(who: str, spec: dict, name: str) -> tuple:
    if "admin" in spec:
        return can(f"{who}: admin trigger {spec['admin']!r}", "admin")
    if "fsync_match" in spec:
        return can(f"{who}: fsync EIO shim on paths matching {spec['fsync_match']!r}", "fsync")
    return cannot(f"{who} declares no mechanism for fault {name}")


def _deterministic(opts: dict) -> tuple:
    """The scheduler hosts any program the shim can control, as decided from the program file
    (``chaos.deterministic.programs``); another is refused with the reason."""
    from chaos.deterministic import programs

    ok, what = programs.control_command(opts.get("command"))
    if not ok:
        return cannot(f"the scheduling shim cannot control this program: {what}")
    return can("each call's process runs under the scheduling shim as the worker's child of its own name, hosted "
               "in the worker's one thread (its pipes and exit a scheduler wait, never a wall-clock timeout), every "
               "thread of it controlled and ASLR off (a Node program's pids virtual): the ledger's files are the "
               "points, clocks, sleeps and randomness virtual; set-up programs on the virtual epoch; "
               f"{what}", "sched-shim")


SUT = ExternalSut()


def paths_made_absolute(command: str) -> str:
    """``command`` as run from another directory (a deterministic run's program starts in its run
    dir): each word that names an existing file or directory by a relative path with a slash in it
    (``../sut/bin/prog.js``, ``./prog``) made absolute from here; every other word as it was."""
    import shlex

    return shlex.join(os.path.abspath(w) if "/" in w and not os.path.isabs(w) and os.path.exists(w) else w
                      for w in shlex.split(command))
