"""pytest plugin: gate a release on a chaos run from a project's own test suite.

Registered through the ``pytest11`` entry point, so installing claim-chaos is
enough. Options: ``--chaos-backend``, ``--chaos-nemesis``, ``--chaos-time-limit``,
``--chaos-seed``, ``--chaos-workers``, ``--chaos-store``.

Fixtures:

* ``chaos_run(backend=..., nemesis=..., time_limit=..., seed=..., workers=...,
  workload="claims", factory=None, allow_unknown=False) -> RunOutcome``:
  runs one ``chaos run`` (in a subprocess, so the worker processes, faults
  and their cleanup are the real ones) and returns its outcome
  (``.verdict``, ``.exit_code``, ``.run_dir``, ``.results``). On an
  ``invalid`` verdict it fails the test with every checker's explanation and
  the command that reproduces the run. ``unknown`` also fails (the run proved
  nothing) unless ``allow_unknown=True``, which skips instead. A crash of the
  suite (exit 254/255) fails with its output.
* ``chaos_result``: the outcome of one run configured by the test's
  ``@pytest.mark.chaos(backend=..., nemesis=[...], ...)`` marker. The run
  happens while the fixture is set up, but an ``invalid`` (or ``unknown``)
  verdict is reported as the test's FAILURE (its call phase, before the
  test body runs), not as an error at setup: a backend that broke the
  contract is a failed test, not a broken fixture.

Unset arguments come from the marker, then from the command-line options.
Runs are stored under ``--chaos-store`` (default: a pytest temp dir).
"""

from __future__ import annotations

import pytest

from chaos.commands.test_all import RunOutcome, RunRequest, run_one

#: the failure message of a ``chaos_result`` run, kept for the test's call phase
FAILURE = pytest.StashKey[str]()


def pytest_addoption(parser):
    group = parser.getgroup("chaos", "claim-chaos fault-injection runs")
    group.addoption("--chaos-backend", default="sqlite", help="backend for chaos runs (default sqlite)")
    group.addoption("--chaos-nemesis", default=None, help="comma-separated nemeses (default: all the backend supports)")
    group.addoption("--chaos-time-limit", type=float, default=10.0, help="seconds of workload per chaos run")
    group.addoption("--chaos-seed", type=int, default=None, help="seed for chaos runs")
    group.addoption("--chaos-workers", type=int, default=4, help="worker processes per chaos run")
    group.addoption("--chaos-store", default=None, help="store directory for chaos runs (default: a pytest temp dir)")


def pytest_configure(config):
    config.addinivalue_line("markers", "chaos(**kwargs): configure the chaos run of the chaos_result fixture "
                                       "(backend, nemesis, time_limit, seed, workers, workload, factory)")


def _nemesis_list(value) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [] if value in ("", "none") else [x.strip() for x in value.split(",") if x.strip()]
    return list(value)


def failure_message(outcome: RunOutcome) -> str:
    """What a failing chaos test prints: the verdict, the explanations, how to reproduce."""
    lines = [f"chaos run {outcome.verdict.upper()} (exit {outcome.exit_code}) "
             f"on backend {outcome.request.factory or outcome.request.backend}, seed {outcome.request.seed}"]
    lines += outcome.explanations()[:20]
    for name, r in (outcome.results.get("checkers") or {}).items():
        if isinstance(r, dict) and r.get("valid") == "unknown":
            reasons = ([r["error"]] if r.get("error") else []) + list(r.get("unknown_reasons") or [])
            lines.append(f"[{name}] unknown: {'; '.join(str(x) for x in reasons[:3]) or 'no reason given'}")
    lines += [f"note: {n}" for n in (outcome.results.get("notes") or [])[:5]]  # why an unknown run proved nothing
    if not outcome.results and outcome.output.strip():
        lines.append(outcome.output.strip()[-1500:])
    lines.append(f"reproduce: {outcome.command}")
    if outcome.run_dir:
        lines.append(f"report: {outcome.run_dir}/report.html")
    return "\n".join(lines)


class ChaosRunner:
    """The callable behind the ``chaos_run`` fixture."""

    def __init__(self, config, store: str, marker_kwargs: dict):
        self.config, self.store, self.defaults = config, store, marker_kwargs
        self.outcomes: list[RunOutcome] = []
        self.deferred: str | None = None   # the failure of a deferred run (``chaos_result``)

    def _opt(self, key: str, option: str, given):
        if given is not None:
            return given
        if key in self.defaults:
            return self.defaults[key]
        return self.config.getoption(option)

    def __call__(self, backend: str | None = None, nemesis=None, time_limit: float | None = None,
                 seed: int | None = None, workers: int | None = None, workload: str | None = None,
                 factory: str | None = None, allow_unknown: bool | None = None, defer: bool = False) -> RunOutcome:
        """One run; its failure raised at once, or with ``defer`` kept in
        ``self.deferred`` for the test's call phase to raise."""
        nem = _nemesis_list(self._opt("nemesis", "--chaos-nemesis", nemesis))
        seed = self._opt("seed", "--chaos-seed", seed)
        req = RunRequest(
            backend=self._opt("backend", "--chaos-backend", backend),
            workload=workload or self.defaults.get("workload", "claims"),
            nemesis=nem if nem is not None else [],
            seed=int(seed) if seed is not None else 1,
            time_limit=float(self._opt("time_limit", "--chaos-time-limit", time_limit)),
            workers=int(self._opt("workers", "--chaos-workers", workers)),
            store=self.store,
            factory=factory or self.defaults.get("factory"),
        )
        if req.factory and req.backend != "python":
            req.backend = "python"
        req.name = "pytest-" + (req.factory.rpartition(":")[2] if req.factory else req.backend)
        outcome = run_one(req)
        self.outcomes.append(outcome)
        allow = allow_unknown if allow_unknown is not None else self.defaults.get("allow_unknown", False)
        if outcome.verdict == "valid":
            return outcome
        if outcome.verdict == "unknown" and allow:
            pytest.skip(failure_message(outcome))
        if defer:
            self.deferred = failure_message(outcome)
            return outcome
        pytest.fail(failure_message(outcome), pytrace=False)


@pytest.fixture
def chaos_run(request, tmp_path_factory) -> ChaosRunner:
    store = request.config.getoption("--chaos-store") or str(tmp_path_factory.mktemp("chaos-store"))
    marker = request.node.get_closest_marker("chaos")
    return ChaosRunner(request.config, store, dict(marker.kwargs) if marker else {})


@pytest.fixture
def chaos_result(request, chaos_run) -> RunOutcome:
    outcome = chaos_run(defer=True)
    if chaos_run.deferred:
        request.node.stash[FAILURE] = chaos_run.deferred
    return outcome


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test using ``chaos_result`` fails in its call phase when the run was not valid."""
    failure = pyfuncitem.stash.get(FAILURE, None)
    if failure:
        pytest.fail(failure, pytrace=False)
