"""The canonical author issue-lock contract (../shared/spec/issue-lock-contract.md), once.

Modules: ``fields`` (required-field sets, constants, ``IssueKey``), ``reader``
(the one reader: claimant placement, ``expiration_state``, missing fields),
``builder`` (the one builder: canonical, heartbeat/renew successor, recovered,
and the legacy thin shape for seeding), ``gates`` (every gate and the recovery
decision as pure functions), ``codes`` (operations, the spec's refusal table,
the suite's gate codes, messages, exits), ``envelopes`` (every reply),
``schemas`` (strict request parsing). Every store, writer, workload and
checker of the issue-lock protocol uses these; nothing else formats a lock.
"""

from backends.issuelock.contract import builder, codes, envelopes, fields, gates, reader, schemas
from backends.issuelock.contract.builder import (
    build_canonical_issue_lock, build_legacy_bootstrap_lock, build_recovered_lock, next_lease_write,
)
from backends.issuelock.contract.codes import INCOMPLETE, OPERATIONS, REFUSAL_CODES
from backends.issuelock.contract.fields import (
    EXPIRATION_STATES, REQUIRED_LOCK_FIELDS, REQUIRED_WORK_LEASE_FIELDS, SANCTIONED_SOURCES, SOURCE_LOCK_ISSUE,
    IssueKey,
)
from backends.issuelock.contract.reader import (
    expiration_state, is_canonical, is_live, lock_claimant, lock_contract, lock_generation, missing_fields,
    parse_lock, task_session_id,
)

__all__ = [name for name in dir() if not name.startswith("_")]
