"""A backend whose every release finds its lease expired (claim-expired): the
racers' publish-after-release episode must then not publish, since the claim
it would be fenced by was never released (``tests/test_workload_races.py``)."""

from backends.sqlite import SqliteBackend


class ExpiredRelease(SqliteBackend):
    def _expired(self, op, active, now):
        return op == "release" or super()._expired(op, active, now)


def open_backend(spec, clock, hooks):
    return ExpiredRelease(spec, clock, hooks)
