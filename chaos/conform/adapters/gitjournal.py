"""Conformance adapter for the Git-journal backend (merge-coordinated profile):
a real git repository in a temp dir, served by a ``chaos.host`` process
(see ``hosted.py``: real barrier, SIGKILL restart, exit-after-commit reply
loss, file clock).

Layout: one repository, one ledger directory per allowlisted namespace
(a Git ledger binds exactly one namespace, so NS2 cases run as two endpoints
behind ``backends.gitjournal.endpoints``), each provisioned with
``backends.gitjournal.provision`` (namespace file created O_EXCL + fsync and
committed), then seeded through the privileged ``store.seed`` before the host
starts.

Mechanisms (vectors.md §11):

* CFP: the fsync EIO shim matched on ``journal.jsonl`` and kept armed: the
  floor append fails, its bytes are truncated away, the backend answers
  ``clock-floor-persistence-failed`` and nothing changed;
* POU: the same shim matched on the item temp files, armed around the commit
  only: the floor and the ``publish-intent`` are durable, the item's temp file
  fsync fails, the item is untouched, the reply is exit 6 ``unknown``. The
  floor was persisted before the intent (contract §6), so the final floor is
  the commit's time: the documented profile deviation of §11.6/§11.12;
* CFG: a bypass configuration runs as an UNPROVISIONED git ledger (advisory,
  refuses ``publish-claimed`` before reading input); capability inventories
  the profile cannot have (bypass / missing path in the capability reply)
  are not applicable.
"""

from __future__ import annotations

import copy
import os
import subprocess

from backends.contract import MERGE_WRITE_PATHS, REQUIRED_WRITE_PATHS, capabilities_reply, format_instant, parse_instant
from backends.gitjournal import DEFAULT_NAME, provision
from backends.gitjournal.fsio import TMP_PREFIX
from backends.gitjournal.ledger import Ledger, open_ledger
from backends.gitjournal.store import GitJournalStore
from chaos.conform.adapters.base import Profile
from chaos.conform.adapters.hosted import HostedAdapter

LOCK_WAIT_MS = 3000
#: contract v2 §3 (the Git-journal profile example): who one recorded write blocks, and until when
MERGE_WRITE_SERIALIZATION = {"scope": "all-worktrees-of-one-repository",
                             "blocks_until": "peer-commit-visible-in-this-checkout"}


def _bypass(case) -> bool:
    return case.initial["backend"]["write_paths"].get("alternate") == "bypass"


def _has_fault(case, name: str) -> bool:
    return case.initial["faults"].get(name) is True or any(a.get("target") == name for a in case.actions)


def merge_capability_result(namespace: str) -> dict:
    """The capability result this profile really reports for one endpoint."""
    from backends.contract.records import BackendConfig

    cfg = BackendConfig(name=DEFAULT_NAME, namespaces=[namespace], coordination_scope="",
                        write_paths=dict(MERGE_WRITE_PATHS), profile="merge-coordinated")
    return capabilities_reply(cfg).envelope["result"]


def adjust_for_profile(case, expected: dict) -> list[str]:
    """The §11.12 substitutions for the merge-coordinated profile (shared with
    the external adapter when it drives a Git-journal CLI)."""
    notes: list[str] = []
    namespaces = case.initial["backend"]["ledger_binding"]["namespaces"]
    for i, (action, entry) in enumerate(zip(case.actions, expected["transcript"])):
        if action["operation"] == "work-claim.capabilities" and entry.get("exit") == 0:
            entry["stdout"]["result"] = merge_capability_result(namespaces[0])
            if case.api_version == 2:  # contract v2 §3: the Git-journal profile's own serialization
                entry["stdout"]["result"]["backend"]["write_serialization"] = dict(MERGE_WRITE_SERIALIZATION)
                entry["stdout"]["result"]["operations"]["work_claim"]["api_version"] = 2
            notes.append(f"transcript[{i}]: capabilities substituted by the merge-coordinated profile "
                         f"(binding = the first endpoint's one namespace)")
    if _bypass(case):
        notes.append("advisory configuration = an unprovisioned git ledger (refuses before reading input)")
    if _has_fault(case, "publication-outcome-unknown"):
        commit = next(a for a in case.actions if a["operation"] == "ledger-publication.commit")
        at = parse_instant(commit["physical_now"])
        ns = commit["request"]["ledger_namespace"]
        for f in expected["final"]["durable"]["clock_floors"]:
            if f["ledger_namespace"] == ns and parse_instant(f["observed_at"]) < at:
                notes.append(f"final floor of {ns}: {f['observed_at']} -> {format_instant(at)} "
                             "(floor persisted before the intent: merge-coordinated deviation, vectors.md 11.6)")
                f["observed_at"] = format_instant(at)
    return notes


def not_applicable_for_profile(case) -> str | None:
    paths = case.initial["backend"]["write_paths"]
    if _bypass(case):
        if any(a["operation"] == "work-claim.capabilities" for a in case.actions):
            return "a Git ledger cannot report a bypass write-path inventory (advisory = unprovisioned)"
        return None
    if dict(paths) not in (REQUIRED_WRITE_PATHS, MERGE_WRITE_PATHS):
        return f"the merge-coordinated profile always enumerates its four write paths (case has {sorted(paths)})"
    return None


class GitJournalAdapter(HostedAdapter):
    backend = "gitjournal"

    def __init__(self, options: dict | None = None):
        super().__init__(options)
        self.profile = Profile(backend_name=DEFAULT_NAME, exports_requests=True, commit_sequence=True,
                               refuses_before_reading=True)
        self.repo = str(self.dir / "repo")
        self.ledgers: list[Ledger] = []
        self.fsync = None

    def not_applicable(self, case) -> str | None:
        return not_applicable_for_profile(case)

    def adjust_expected(self, case, expected: dict) -> list[str]:
        return adjust_for_profile(case, expected)

    def prepare(self, case) -> None:
        subprocess.run(["git", "init", "-q", self.repo], check=True)
        namespaces = case.initial["backend"]["ledger_binding"]["namespaces"]
        for i, ns in enumerate(namespaces):
            path = os.path.join(self.repo, f"ledger-{i + 1}")
            if _bypass(case):
                os.makedirs(path)
                found = open_ledger(path)
                ledger = Ledger(found.path, found.top, found.common, ns)  # journal only: no namespace file
            else:
                ledger = provision(path, ns)
            GitJournalStore(ledger).seed(copy.deepcopy(case.initial["durable"]))
            self.ledgers.append(ledger)
        if _has_fault(case, "clock_floor_persist"):
            self.fsync = self._fsync_fault("journal.jsonl")
        elif _has_fault(case, "publication-outcome-unknown"):
            self.fsync = self._fsync_fault(f"/{TMP_PREFIX}")

    def _fsync_fault(self, match: str):
        from chaos.faults.failsync import FsyncFault

        return FsyncFault(str(self.dir / "failsync.ctl"), match=match)

    def spec(self) -> dict:
        return {"backend": "gitjournal", "ledgers": [led.path for led in self.ledgers],
                "clock_file": self.clock_file, "lock_wait_ms": LOCK_WAIT_MS}

    def host_env(self) -> dict:
        return self.fsync.env() if self.fsync is not None else {}

    def arm_sticky_fault(self, name: str) -> None:
        self.fsync.arm()

    def arm_commit_fault(self) -> None:
        self.fsync.arm()

    def disarm_commit_fault(self) -> None:
        self.fsync.disarm()

    def export_storage(self) -> dict:
        from backends.gitjournal.projection import merge

        return merge([GitJournalStore(led).export_durable() for led in self.ledgers])

    def teardown_storage(self) -> None:
        if self.fsync is not None:
            self.fsync.cleanup()


def make_adapter(options: dict | None = None) -> GitJournalAdapter:
    return GitJournalAdapter(options)
