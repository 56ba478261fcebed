"""pytest plugin: gate a release on a chaos run from a project's own test suite.

Registered through the ``pytest11`` entry point, so installing claim-chaos is
enough. Options: ``--chaos-backend``, ``--chaos-nemesis``, ``--chaos-time-limit``,
``--chaos-seed``, ``--chaos-workers``. The ``chaos_run`` fixture runs one test
and fails the test with the checkers' explanation on a violation.
"""

from __future__ import annotations


def pytest_addoption(parser):
    group = parser.getgroup("chaos", "claim-chaos fault-injection runs")
    group.addoption("--chaos-backend", default="sqlite", help="backend for chaos runs (default sqlite)")
    group.addoption("--chaos-nemesis", default=None, help="comma-separated nemeses (default: all the backend supports)")
    group.addoption("--chaos-time-limit", type=float, default=10.0, help="seconds of workload per chaos run")
    group.addoption("--chaos-seed", type=int, default=None, help="seed for chaos runs")
    group.addoption("--chaos-workers", type=int, default=4, help="worker processes per chaos run")
