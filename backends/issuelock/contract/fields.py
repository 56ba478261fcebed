"""What a canonical author issue lock carries (issue-lock-contract.md, "The contract").

The required-field sets are the contract's ``author_lock_contract.REQUIRED_LOCK_FIELDS``
and ``REQUIRED_WORK_LEASE_FIELDS``. Field paths are dotted (``work_lease.claimant.profile``)
and are what every "missing fields" list names, so a writer, a gate and a
checker always agree on the name of what is missing.

Values inside the suite: instants are ``int`` ms since the Unix epoch and go on
the wire as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (the work-claim contract's format,
``backends.contract.values``); generations are ``int`` >= 1; a legacy lock that
never recorded a generation counts as generation 0.
"""

from __future__ import annotations

import re

#: The lock's top-level fields (the spec's table, in its order).
REQUIRED_LOCK_FIELDS = (
    "remote", "org", "repo", "issue_number",   # repository and issue identity
    "branch_name", "worktree_path",            # the binding this claim owns
    "work_lease",                              # the canonical lease block
    "lock_provenance",                         # sanctioned source, minted server-side
    "lock_generation",                         # monotonic; every write advances it
)

#: ``work_lease`` members. The spec lists these "notably"; ``lease_policy`` (where
#: the sliding TTL comes from) and ``acquired_at`` complete the block.
REQUIRED_WORK_LEASE_FIELDS = (
    "claimant",            # {username, profile}: the canonical claimant placement
    "lease_policy",        # {kind: "sliding", ttl_ms}
    "acquired_at",
    "expires_at",          # sliding TTL from lease_policy
    "last_heartbeat_at",   # liveness evidence
    "heartbeat_count",
    "task_session_id",     # the ownership fencing token: never null
    "lifecycle_version",   # heartbeat-v1; its absence is what makes a lock legacy
)

REQUIRED_CLAIMANT_FIELDS = ("username", "profile")
REQUIRED_PROVENANCE_FIELDS = ("source", "writer", "minted_at")

LIFECYCLE_VERSION = "heartbeat-v1"

#: ``issue_lock_provenance.SOURCE_LOCK_ISSUE``: both writers (and recovery) mint it.
SOURCE_LOCK_ISSUE = "gitea_lock_issue"
#: The #447 create-PR guard's sanctioned sources. Deliberately NOT widened for bootstrap.
SANCTIONED_SOURCES = frozenset({SOURCE_LOCK_ISSUE})

#: Which server-side code path wrote a lock (``lock_provenance.writer``).
WRITERS = ("bootstrap", "lock", "recover")

LEASE_KIND = "sliding"
RECOVERY_BLOCK = "bootstrap_lock_recovery"
#: Members of the recovery block: both sides of the transition.
RECOVERY_FIELDS = (
    "recovered_at", "recovered_by", "prior_contract", "prior_missing_fields", "prior_generation",
    "prior_owning_session", "prior_claimant_placement", "replacement_task_session_id", "preserved_head",
)

#: ``expiration_state`` values: the real fact about a lock's expiry.
EXPIRY_RECORDED, EXPIRY_MISSING, EXPIRY_UNPARSEABLE = "recorded", "missing", "unparseable"
EXPIRATION_STATES = (EXPIRY_RECORDED, EXPIRY_MISSING, EXPIRY_UNPARSEABLE)

#: ``lock_contract`` values.
CONTRACT_ABSENT = "absent"
CONTRACT_CANONICAL = "canonical"
CONTRACT_LEGACY = "legacy-bootstrap"   # no lifecycle_version: the pre-#953 dialect
CONTRACT_INCOMPLETE = "incomplete"     # lifecycle_version present, something else missing
CONTRACTS = (CONTRACT_ABSENT, CONTRACT_CANONICAL, CONTRACT_LEGACY, CONTRACT_INCOMPLETE)

#: Repository-name parts and branch/worktree names the stores accept.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
BRANCH_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
WORKTREE_RE = re.compile(r"branches/[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
TOKEN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
SESSION_RE = re.compile(r"ts_[0-9a-f]{32}")
HEAD_RE = re.compile(r"[0-9a-f]{40}")
ISSUE_MAX = 1_000_000_000
CONTENT_MAX_BYTES = 4096
TTL_MIN_MS, TTL_MAX_MS = 100, 86_400_000


def full(regex: re.Pattern, value: object) -> bool:
    return isinstance(value, str) and regex.fullmatch(value) is not None


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class IssueKey(tuple):
    """``(remote, org, repo, issue_number)``: the identity of one lock (one lock
    file per key in the git-file store, one row in SQLite)."""

    __slots__ = ()

    def __new__(cls, remote: str, org: str, repo: str, issue_number: int):
        return super().__new__(cls, (remote, org, repo, issue_number))

    remote = property(lambda self: self[0])
    org = property(lambda self: self[1])
    repo = property(lambda self: self[2])
    issue_number = property(lambda self: self[3])

    @property
    def repository(self) -> tuple:
        return self[:3]

    @property
    def path(self) -> str:
        """``remote/org/repo/issue``: the key as one string (history, file names)."""
        return f"{self[0]}/{self[1]}/{self[2]}/{self[3]}"

    def as_request(self) -> dict:
        return {"remote": self[0], "org": self[1], "repo": self[2], "issue_number": self[3]}

    @classmethod
    def of(cls, doc: dict) -> "IssueKey":
        return cls(doc["remote"], doc["org"], doc["repo"], doc["issue_number"])
