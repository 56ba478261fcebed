"""A backend that checks the ledger revision only inside its commit
boundary, after the fence (§6 step 7, then step 8), with no preflight
revision check at validation: the order Wowbagger's `publish-claimed` decides
in. A stale publish whose lease has run out is then refused as claim-expired,
never as a revision conflict (``tests/test_workload_races.py``)."""

from backends.sqlite import SqliteBackend


class CommitTimeRevision(SqliteBackend):
    _committing = False

    def _commit_publication(self, txn, req, candidate):
        self._committing = True
        try:
            return super()._commit_publication(txn, req, candidate)
        finally:
            self._committing = False

    def _revision_matches(self, actual, req):
        return super()._revision_matches(actual, req) if self._committing else True


def open_backend(spec, clock, hooks):
    return CommitTimeRevision(spec, clock, hooks)
