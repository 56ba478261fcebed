"""A backend that persists the namespace's clock floor before it validates a
publish's candidate, the order Wowbagger 0.1.0-alpha.7's ``publish-claimed``
takes (``reconcileClaimJournal`` appends its ``clock`` entry, then
``validateCandidateLedger``): a ledger-invalid publish moves the floor,
although a validation failure stops before the floor step (vectors.md §5.1
rule 8; ``tests/test_careless_requests.py``)."""

from backends.sqlite import SqliteBackend


class FloorBeforeValidation(SqliteBackend):
    _namespace = None

    def _publish(self, op, req):
        self._namespace = req.ledger_namespace
        return super()._publish(op, req)

    def _candidate_issues(self, candidate, item, current):
        with self.store.transaction(write=True) as txn:
            self._persist_floor(txn, self._namespace)
        return super()._candidate_issues(candidate, item, current)


def open_backend(spec, clock, hooks):
    return FloorBeforeValidation(spec, clock, hooks)
