"""An external implementation's profile: how to drive it and what differs.

A profile is a small YAML file (``profiles/<name>.yaml``). Every member is
optional except ``name``; the defaults are the contract CLI convention that
``chaos backend NAME`` speaks::

    name: chaos-sqlite
    backend_name: null            # name its capabilities report (null: ask it)
    profile: fenced               # or merge-coordinated
    namespaces_per_ledger: many   # or 1 (a Git ledger binds one namespace)
    git: false                    # ledgers must live inside a git work tree
    timeout_s: 30
    argv: {op: [template ...]}    # appended to the command prefix; {ledger}
                                  # is the ledger dir; "{namespaces}" expands
                                  # to provision_namespace_flag + ns, per ns
    admin: {seed|export|arm-floor-fault|enable-bypass: [template ...]}
    faults:                       # how the conformance runner makes each fault real
      clock_floor_persist: {admin: arm-floor-fault} | {fsync_match: "journal.jsonl"}
      publication-outcome-unknown: {fsync_match: "{ledger}/"}
    advisory_setup: bypass-admin  # or unprovisioned (advisory = no provision)
    provision_write_paths: false  # provision accepts --write-paths JSON (CFG cases)
    barrier_env: null             # env var naming a dir for the opt-in pre-commit barrier
    busy: {exit: 6, code: claim-store-unavailable, reason: claim-store-locked,
           retry: {attempts: 20, backoff_ms: 50}}
    capabilities_extra_members_allowed: [/result/backend/some_member]  # JSON pointers
    publication_read_outcome_wrapped: true
    refuses_before_reading: false
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from backends import safeload

CONVENTION_ARGV: dict[str, list[str]] = {
    "provision": ["provision", "--ledger", "{ledger}", "{namespaces}", "--json"],
    "capabilities": ["claim", "capabilities", "--ledger", "{ledger}", "--input", "-", "--json"],
    "read": ["claim", "read", "--ledger", "{ledger}", "--input", "-", "--json"],
    "acquire": ["claim", "acquire", "--ledger", "{ledger}", "--input", "-", "--json"],
    "renew": ["claim", "renew", "--ledger", "{ledger}", "--input", "-", "--json"],
    "release": ["claim", "release", "--ledger", "{ledger}", "--input", "-", "--json"],
    "publish": ["publish-claimed", "--ledger", "{ledger}", "--input", "-", "--json"],
    "publication-read": ["claim", "verify", "--ledger", "{ledger}", "--input", "-", "--json"],
    "verify": ["claim-verify", "--ledger", "{ledger}", "--json"],
}


class ProfileError(ValueError):
    pass


@dataclass
class Busy:
    exit: int = 6
    code: str = "claim-store-unavailable"
    reason: str = "claim-store-locked"
    attempts: int = 20
    backoff_ms: int = 50

    def matches(self, exit_code: int, envelope: dict) -> bool:
        err = envelope.get("error") if isinstance(envelope, dict) else None
        return (exit_code == self.exit and isinstance(err, dict) and err.get("code") == self.code
                and isinstance(err.get("details"), dict) and err["details"].get("reason") == self.reason)


@dataclass
class ExternalProfile:
    name: str
    backend_name: str | None = None
    profile: str = "fenced"
    namespaces_per_ledger: str | int = "many"
    git: bool = False
    timeout_s: float = 30.0
    argv: dict[str, list[str] | None] = field(default_factory=lambda: copy.deepcopy(CONVENTION_ARGV))
    provision_namespace_flag: str = "--namespace"
    admin: dict[str, list[str]] = field(default_factory=dict)
    faults: dict[str, dict] = field(default_factory=dict)
    advisory_setup: str | None = None
    provision_write_paths: bool = False
    barrier_env: str | None = None
    busy: Busy | None = None
    capabilities_extra_members_allowed: list[str] = field(default_factory=list)
    publication_read_outcome_wrapped: bool = True
    refuses_before_reading: bool = False

    @property
    def one_namespace_per_ledger(self) -> bool:
        return self.namespaces_per_ledger in (1, "1")


def load_profile(source: str | Path | dict) -> ExternalProfile:
    """A profile from a YAML file path or an already-parsed dict."""
    if isinstance(source, dict):
        doc = copy.deepcopy(source)
    else:
        try:
            doc = safeload.yaml_file(source, what="profile")
        except safeload.LoadError as e:
            raise ProfileError(str(e)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        raise ProfileError(f"profile {source}: a mapping with a 'name' is required")
    known = set(ExternalProfile.__dataclass_fields__)
    unknown = set(doc) - known
    if unknown:
        raise ProfileError(f"profile {source}: unknown members {sorted(unknown)}")
    argv = copy.deepcopy(CONVENTION_ARGV)
    argv.update(doc.pop("argv", None) or {})
    busy = doc.pop("busy", None)
    if busy is not None:
        retry = busy.pop("retry", {}) or {}
        busy = Busy(**busy, **retry)
    return ExternalProfile(**doc, argv=argv, busy=busy)
