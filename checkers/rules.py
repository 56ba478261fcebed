"""Every rule of the work-claim contract (§2-§8) the checkers judge, which
checker judges it, and the anomaly types it reports.

One table, read by people (docs/rules.md prints it; a test keeps the two
equal) and by tools (a planted-bug backend per rule, the workload-coverage
gate). ``RULES`` rows are ``Rule(id, section, text, checks)``; ``checks`` maps
a checker name (``checkers.default_checkers()``) to the anomaly types that
name the rule. ``linearizable``'s ``nonlinearizable`` backs every rule of the
claim model; it is listed where no invariant is more precise.
"""

from __future__ import annotations

from typing import NamedTuple


class Rule(NamedTuple):
    id: str
    section: str
    text: str
    checks: dict


RULES: tuple[Rule, ...] = (
    Rule("tuple-identity", "§2", "every reply names the request's (ledger_namespace, item_id); a wrong ledger or "
         "item never falls through to another record", {"envelopes": ("reply-for-another-tuple",)}),
    Rule("epoch-one-owner", "§2, §4", "an epoch is one owner generation (owner_id, issued_at)",
         {"dual_ownership": ("two-owners-one-epoch",), "epochs": ("epoch-reused",)}),
    Rule("epoch-never-reused", "§2, §5 Release", "epochs never wrap, decrement or get reused, also across restarts",
         {"epochs": ("epoch-reallocated", "epoch-decreased"),
          "durability": ("epoch-high-water-lost", "final-epoch-lost")}),
    Rule("capabilities-stable", "§3", "the ledger's capability envelope does not change during a run",
         {"capability_honesty": ("capabilities-changed",)}),
    Rule("fenced-profile", "§3", "fenced / safe_exclusive_dispatch: shared transactional coordinator, explicit "
         "allowlist covering the namespaces served, the exact fenced write paths",
         {"capability_honesty": ("fenced-profile-inconsistent", "unknown-capability-mode")}),
    Rule("fenced-promise", "§1, §3", "a fenced backend never lets a stale epoch write and never has two owners",
         {"capability_honesty": ("fenced-but-unsafe",)}),
    Rule("advisory-refuses", "§3, §6", "an advisory endpoint refuses every publish-claimed and claims no safety",
         {"capability_honesty": ("advisory-published", "advisory-claims-safety")}),
    Rule("merge-not-exclusive", "§1, §3, §7", "merge-coordinated reports safe_exclusive_dispatch false",
         {"capability_honesty": ("merge-coordinated-claims-exclusive",)}),
    Rule("active-epoch", "§4", "active.epoch equals last_epoch", {"epochs": ("epoch-readback-mismatch",)}),
    Rule("read-back-exact", "§4, §5", "a reply shows the exact durable record: an active claim's expiry is one a "
         "successful acquire or renew of that generation set", {"epochs": ("read-back-not-durable",)}),
    Rule("lease-active-while", "§4", "a lease is active exactly while effective_now < expires_at; two owners "
         "never hold a tuple at once", {"dual_ownership": ("overlapping-leases",)}),
    Rule("floor-monotonic", "§4", "effective_now = max(physical, durable floor): decision time never goes back, "
         "also across restarts and backward clock steps",
         {"floors": ("decision-time-regressed",), "durability": ("final-floor-lost",)}),
    Rule("times-from-decision", "§4", "issued_at is the decision time; a new expires_at is decision time + "
         "lease_duration_ms", {"floors": ("issued-at-not-decision-time", "expiry-not-from-decision-time")}),
    Rule("unchanged-means-unchanged", "§4, §8", "a reply with state unchanged (exit 6 included) made no claim, "
         "epoch, ledger or outcome change",
         {"durability": ("failed-acquire-took-effect", "unchanged-reply-took-effect", "epoch-consumed-silently")}),
    Rule("epoch-exhausted", "§4, §5 Acquire 3", "epoch-exhausted only at the maximum last_epoch, after the "
         "witness and held checks", {"decisions": ("false-epoch-exhausted",)}),
    Rule("acquire-witness", "§5 Acquire 1", "an unequal CAS witness is claim-conflict; an equal one is never "
         "claim-conflict; of two acquires with one witness, however they overlap, at most one succeeds", {"decisions": ("false-claim-conflict",), "dual_ownership": ("witness-mismatch-accepted",)}),
    Rule("acquire-held", "§5 Acquire 2", "an equal witness with an unexpired active claim is claim-held (no early "
         "takeover); claim-held needs exactly that",
         {"dual_ownership": ("early-takeover",), "decisions": ("false-claim-held",)}),
    Rule("acquire-next-epoch", "§5 Acquire 4", "a successful acquire allocates exactly last_epoch + 1",
         {"epochs": ("epoch-not-next",)}),
    Rule("renew-release-cas", "§5 Renew, Release", "owner, epoch and expected expiry are one CAS tuple: a "
         "mismatch is claim-conflict, a matching expired tuple claim-expired, never a success; of two renews / "
         "releases that each change one tuple, however they overlap, at most one succeeds",
         {"decisions": ("false-claim-conflict", "false-claim-expired", "renew-after-expiry",
                        "stale-expiry-accepted")}),
    Rule("complete-request", "§6", "every commit attempt, a retry after a lost reply included, carries the "
         "complete request; an operation id alone is invalid-request",
         {"requests": ("incomplete-request-accepted",)}),
    Rule("canonical-request", "§5, §6 step 2", "a request with an unknown or missing member, a wrong type or a "
         "noncanonical value (an owner_id outside the owner grammar, an epoch above 2^64 - 1) is invalid-request, "
         "before any decision", {"requests": ("noncanonical-request-decided",)}),
    Rule("refusal-keeps-floor", "§6 steps 1-6", "a request refused before the floor step (namespace binding, "
         "schema, idempotency, candidate digest or validation) changes nothing, the clock floor included "
         "(vectors.md §5.1 rule 8)", {"floors": ("floor-moved-by-refusal",)}),
    Rule("candidate-digest", "§6 step 2", "the candidate's SHA-256 equals candidate_sha256, before any decision",
         {"requests": ("candidate-digest-accepted",)}),
    Rule("candidate-valid", "§6 step 5", "the candidate is a schema-1 ledger item whose id is the request's "
         "item_id, before any decision", {"requests": ("invalid-candidate-accepted",)}),
    Rule("idempotency", "§6 step 4, §8", "an operation_id is one request: an identical retry gets the stored "
         "envelope verbatim, a different one idempotency-conflict naming both digests",
         {"idempotence": ("replay-differs", "operation-id-bound-twice", "idempotency-conflict-missing",
                          "retry-not-replayed", "idempotency-conflict-details",
                          "idempotency-conflict-unbound")}),
    Rule("fence", "§6 step 7", "a publication commits only under the active unexpired owner generation; a fence "
         "rejection names the first failing dimension of the request's fence",
         {"stale_write": ("stale-fence-accepted",), "decisions": ("false-fence-rejection",)}),
    Rule("revision", "§6 step 8", "a publication commits only on its expected revision (no lost update, also "
         "when the overwritten publish's reply was lost but a later read proves it committed); a revision "
         "conflict names the request's expected revision and the differing durable one",
         {"stale_write": ("revision-chain-broken",), "decisions": ("false-revision-conflict",)}),
    Rule("exact-bytes", "§1, §3, §6 step 9", "the ledger holds exactly the accepted candidates' bytes; nothing "
         "writes outside the fenced path",
         {"stale_write": ("committed-revision-mismatch", "ledger-bytes-mismatch", "unaccepted-revision")}),
    Rule("outcome-durable", "§6, §8", "a stored terminal outcome is durable and readable by operation id, "
         "exactly as first returned",
         {"durability": ("publication-outcome-lost", "final-outcome-missing", "final-revision-lost"),
          "idempotence": ("publication-read-digest", "publication-read-differs", "duplicate-stored-outcome",
                          "stored-outcome-differs", "unknown-outcome-stored")}),
    Rule("indeterminate-exact", "§5, §6, §8", "an info op took effect exactly once at an instant between its "
         "invoke and the end of the run, or never, with the effect and stored outcome the contract prescribes "
         "for that instant; every reply fits one order of all ops", {"linearizable": ("nonlinearizable",)}),
    Rule("legacy-transition", "§7", "legacy transition refuses an active claimed item, and only that",
         {"decisions": ("legacy-write-over-active-claim", "false-legacy-refusal")}),
    Rule("legacy-create", "§7", "legacy create refuses an identity with claim history, and only that",
         {"decisions": ("legacy-create-over-claim-history", "false-legacy-refusal")}),
    Rule("envelope-exact", "§8", "envelope members, codes, messages, exit and state are exact",
         {"envelopes": ("malformed-envelope",)}),
)


def markdown_table() -> str:
    """``RULES`` as the table docs/rules.md prints."""
    rows = ["| rule | contract | what it says | checker: anomaly types |", "|---|---|---|---|"]
    for r in RULES:
        checks = "; ".join(f"`{c}`: " + ", ".join(f"`{t}`" for t in types) for c, types in r.checks.items())
        rows.append(f"| `{r.id}` | {r.section} | {r.text} | {checks} |")
    return "\n".join(rows)
