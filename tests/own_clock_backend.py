"""A backend that reads its own system clock instead of the clock the harness
gives it (the registry's ``clock`` argument): correct in every decision, but
a call pinned to an exact instant is decided in real time, so no
lease-boundary probe ever lands (``tests/test_workload_coverage.py``)."""

from backends.api import SystemClock
from backends.sqlite import SqliteBackend


def open_backend(spec, clock, hooks):
    return SqliteBackend(spec, SystemClock(), hooks)
