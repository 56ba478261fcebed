"""Names of the ``claim-verify`` reply (contract §6, last part).

The envelope namespace/command of a ``claim-verify`` reply and its finding
names. Envelopes are built with the contract's generic ``success`` /
``error`` builders and existing codes and messages (no new prose): a clean
verification is ``success``; bad findings are ``error(...,
Code.PUBLICATION_OUTCOME_UNKNOWN, details)``, which gives exit 6,
``state: "unknown"``.
"""

from __future__ import annotations

VERIFY_NAMESPACE = "work-claim"
VERIFY_COMMAND = "claim-verify"

#: clean recovery: a pending intent was resolved from the exact item bytes
PENDING_INTENT_RESOLVED = "pending-intent-resolved"
#: an intent whose item bytes are neither the old nor the candidate revision
PUBLICATION_OUTCOME_UNKNOWN = "publication-outcome-unknown"
#: the working tree or HEAD went back to an older published revision
REVISION_REGRESSION = "revision-regression"
#: the item bytes are no published revision: written outside the journal
STALE_WRITE_DETECTED = "stale-write-detected"

BAD_FINDINGS = frozenset({PUBLICATION_OUTCOME_UNKNOWN, REVISION_REGRESSION, STALE_WRITE_DETECTED})
