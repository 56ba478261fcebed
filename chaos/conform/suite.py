"""Run a set of cases against one backend and summarise (the API behind
``chaos conform``).

    report = run_conformance("sqlite", Path(".../work-claims"), cases=None, options={})
    report.exit_code  # 0 only when every applicable case passed

A ``python`` backend first gets the process-model probe
(``chaos.conform.process_model``): one that keeps its state in process memory
fails one ``process-model`` result naming that, and no case runs (each would
only fail with diffs that never say why).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.conform.adapters import open_session
from chaos.conform.manifest import load_cases
from chaos.conform.runner import CaseResult, run_case

PASSING = ("pass", "profile-substituted")


@dataclass
class Report:
    backend: str
    vectors: str
    results: list[CaseResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def vacuous(self) -> str | None:
        """Why this report proved nothing (exit 2), else None."""
        ran = [r for r in self.results if r.status != "not-applicable"]
        if not ran:
            return "no case was applicable to this backend: nothing was compared"
        if all(r.status == "error" for r in ran):
            return "every applicable case failed at set-up or export: nothing was compared"
        return None

    @property
    def exit_code(self) -> int:
        """1 when a comparison failed; 2 when nothing (or not everything
        applicable) was compared; 0 only when every applicable case passed."""
        if any(r.status == "fail" for r in self.results):
            return 1
        if self.vacuous or any(r.status == "error" for r in self.results):
            return 2
        return 0

    def to_json(self) -> dict:
        return {
            "backend": self.backend,
            "vectors": self.vectors,
            "passed": self.count("pass"),
            "failed": self.count("fail"),
            "not_applicable": self.count("not-applicable"),
            "errors": self.count("error"),
            "vacuous": self.vacuous,
            "profile_substituted": self.count("profile-substituted"),
            "cases": [r.to_json() for r in self.results],
        }


def run_conformance(backend: str, vectors: Path, cases: list[str] | None = None,
                    options: dict | None = None, on_result=None, on_loaded=None) -> Report:
    """Load the manifests strictly (``UsageError`` on any defect, before any
    backend starts), then replay each case on a fresh adapter."""
    loaded = load_cases(Path(vectors), cases)
    from chaos import sut

    report = Report(backend, str(vectors))
    backend_obj = sut.get(backend, conforms=True)
    abilities = backend_obj.abilities(dict(options or {}))
    api_version = backend_obj.api_version(dict(options or {}))
    session = open_session(backend, dict(options or {}))
    try:
        if on_loaded is not None:
            on_loaded(loaded)
        if backend == "python":
            from chaos.conform import process_model

            start = time.monotonic()
            problem = process_model.check((options or {}).get("factory"))
            if problem:
                result = CaseResult("process-model", "fail", time.monotonic() - start, [problem])
                report.results.append(result)
                if on_result is not None:
                    on_result(result)
                return report
        for case in loaded:
            try:
                adapter = session.new_adapter()
            except Exception as e:  # the backend could not even be prepared
                result = CaseResult(case.name, "error", 0.0, [], [f"set-up failed: {type(e).__name__}: {e}"])
            else:
                result = run_case(case, adapter, abilities, api_version)
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        session.close()
    return report
