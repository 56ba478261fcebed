"""Operations, refusal and reason codes, messages and exit codes of the issue-lock protocol.

``REFUSAL_CODES`` is the spec's recovery refusal table, exactly (issue-lock-
contract.md, "Refusals"); recovery refuses with one of these and nothing else.
``INCOMPLETE`` is bootstrap's ``reason_code`` for a lock that is not canonical.

The spec names the gates (heartbeat, renew, re-lock, create-PR) but not their
refusal codes; the ``GATE_CODES`` below are the suite's, and where a spec code
means exactly the same thing (``no_durable_lock``, ``foreign_claimant``,
``healthy_foreign_lock``, ``identity_unresolved``, ``binding_mismatch``,
``worktree_invalid``, ``already_canonical``) a gate reuses it.

Exit codes follow the work-claim CLI convention so one classifier serves both
protocols: 0 success; 2 a malformed request (nothing happened); 3 a refusal
(``state: "unchanged"``); 6 the store could not decide or the outcome is
unknown. A reply saying ``state: "changed"`` with a non-zero exit (bootstrap
wrote a lock that failed its read-back) is uncertain for the history.
"""

from __future__ import annotations

#: The protocol's operations, by the names the history uses (``f``).
OPERATIONS = ("whoami", "bootstrap", "lock", "heartbeat", "renew", "commit", "create-pr", "inspect", "recover")
#: Operations that may write the lock file.
LOCK_WRITERS = ("bootstrap", "lock", "heartbeat", "renew", "recover")
#: Operations that must write nothing (``recover`` with ``dry_run: true`` too).
READ_ONLY = ("whoami", "inspect")

# --------------------------------------------------------------------------- the spec's codes
NO_DURABLE_LOCK = "no_durable_lock"
ALREADY_CANONICAL = "already_canonical"
FOREIGN_CLAIMANT = "foreign_claimant"
HEALTHY_FOREIGN_LOCK = "healthy_foreign_lock"
IDENTITY_UNRESOLVED = "identity_unresolved"
BINDING_MISMATCH = "binding_mismatch"
WORKTREE_INVALID = "worktree_invalid"
HEAD_MISMATCH = "head_mismatch"

#: The recovery refusal table, in the spec's order.
REFUSAL_CODES = (NO_DURABLE_LOCK, ALREADY_CANONICAL, FOREIGN_CLAIMANT, HEALTHY_FOREIGN_LOCK, IDENTITY_UNRESOLVED,
                 BINDING_MISMATCH, WORKTREE_INVALID, HEAD_MISMATCH)

INCOMPLETE = "incomplete_issue_lock_contract"

# --------------------------------------------------------------------------- the suite's gate codes
STALE_SESSION = "stale_session"               # the token is not the lock's task_session_id (fencing)
LEASE_EXPIRED = "lease_expired"               # heartbeat / write on an expired lease: renew is the path
LEASE_NOT_EXPIRED = "lease_not_expired"       # #760 renewal only ever assesses an expired lease
NOT_BASE_EQUIVALENT = "not_base_equivalent"   # re-lock needs a branch with no commits beyond base
CREATE_PR_GUARD = "create_pr_provenance_guard"  # #447: no sanctioned lock_provenance or no work_lease
NOTHING_TO_PROPOSE = "nothing_to_propose"     # create-PR of a branch with no commits
PR_EXISTS = "pr_exists"
GATE_CODES = (STALE_SESSION, LEASE_EXPIRED, LEASE_NOT_EXPIRED, NOT_BASE_EQUIVALENT, CREATE_PR_GUARD,
              NOTHING_TO_PROPOSE, PR_EXISTS)

INVALID_REQUEST = "invalid_request"
STORE_UNAVAILABLE = "store_unavailable"       # no decision happened
OUTCOME_UNKNOWN = "outcome_unknown"           # a write was attempted; whether it persisted is unknown

EXIT_OK, EXIT_INVALID, EXIT_REFUSED, EXIT_STORE = 0, 2, 3, 6

MESSAGE = {
    NO_DURABLE_LOCK: "There is no durable lock for this issue.",
    ALREADY_CANONICAL: "The lock already meets the canonical contract; rewriting it would invalidate a live heartbeat token.",
    FOREIGN_CLAIMANT: "The recorded claimant is not the active identity and profile pair.",
    HEALTHY_FOREIGN_LOCK: "A live lock owned by someone else holds this issue; takeover is not a recovery path.",
    IDENTITY_UNRESOLVED: "The caller's identity or profile could not be resolved by the server.",
    BINDING_MISMATCH: "The repository, issue, branch or worktree does not match the recorded lock binding.",
    WORKTREE_INVALID: "The worktree is missing, not registered, or checked out on another branch.",
    HEAD_MISMATCH: "The worktree head is not the expected head: the branch moved under the caller.",
    INCOMPLETE: "The issue lock does not meet the canonical contract; do not implement.",
    STALE_SESSION: "The task session is not the lock's current owning session.",
    LEASE_EXPIRED: "The lease has expired; renew it before writing.",
    LEASE_NOT_EXPIRED: "The lease has not expired; heartbeat instead of renewing.",
    NOT_BASE_EQUIVALENT: "The branch carries commits beyond its base; the re-lock path is no longer available.",
    CREATE_PR_GUARD: "Create-PR requires a sanctioned lock provenance and a work lease.",
    NOTHING_TO_PROPOSE: "The branch carries no commits beyond its base.",
    PR_EXISTS: "A pull request already exists for this issue.",
    INVALID_REQUEST: "The request is not a valid issue-lock request.",
    STORE_UNAVAILABLE: "The lock store could not be reached; nothing was decided.",
    OUTCOME_UNKNOWN: "The lock store failed while writing; whether the write persisted is unknown.",
}

# --------------------------------------------------------------------------- next actions
NEXT_HEARTBEAT, NEXT_RECOVER, NEXT_LOCK, NEXT_RENEW = "heartbeat", "recover", "lock", "renew"
NEXT_BOOTSTRAP, NEXT_WHOAMI, NEXT_NONE = "bootstrap", "whoami", "none"
NEXT_ACTIONS = (NEXT_HEARTBEAT, NEXT_RECOVER, NEXT_LOCK, NEXT_RENEW, NEXT_BOOTSTRAP, NEXT_WHOAMI, NEXT_NONE)
