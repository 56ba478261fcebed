"""JUnit XML for CI dashboards: one ``<testsuite>`` per run, one ``<testcase>`` per checker.

Mapping (docs/results-schema.md):

* ``valid``   -> a passing testcase;
* ``invalid`` -> ``<failure type="invalid">`` whose text is every anomaly's
  explanation with its history indices (a proven violation);
* ``unknown`` -> ``<error type="unknown">`` with the reasons. Not ``<skipped>``:
  CI dashboards (Jenkins, GitLab) count skipped tests as harmless, but an
  unknown verdict means the run proved nothing (a checker crashed or timed
  out, or a requested fault never took effect) and ``chaos`` exits 2 for it.
  ``<error>`` keeps it visible and distinct from a proven violation.

Each testcase's ``classname`` is ``chaos.<backend>.<test name>.seed<seed>``
(dots in a name become ``_``: dashboards read dots as packages), so two runs
of one backend in one CI job (another seed, another scenario) never collide,
and one run keeps its names from job to job.

A run that never produced checker results (crashed) gets one testcase
``run`` with an ``<error>`` saying so; so does a run whose checkers all
passed but whose verdict is ``unknown`` (its ``notes`` say why, e.g. a
requested fault never took effect). A matrix is a ``<testsuites>`` of its
runs' suites.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from chaos.reports.load import RunData

MAX_TEXT = 20000


def _word(valid) -> str:
    return {True: "valid", False: "invalid"}.get(valid, "unknown")


def run_suite(run: RunData) -> ET.Element:
    """The ``<testsuite>`` element of one run."""
    t = run.test_info
    backend = str(t.get("backend", "unknown"))
    duration = (run.results.get("stats") or {}).get("duration_s", 0) or 0
    suite = ET.Element("testsuite", name=f"{run.name} [{backend}, seed {t.get('seed', '?')}]",
                       timestamp=str(run.results.get("started_at") or ""), time=f"{float(duration):.3f}")
    props = ET.SubElement(suite, "properties")
    for key in ("backend", "workload", "seed", "workers", "time_limit"):
        if key in t:
            ET.SubElement(props, "property", name=key, value=str(t[key]))
    ET.SubElement(props, "property", name="nemesis", value=",".join(t.get("nemesis") or []))
    ET.SubElement(props, "property", name="verdict", value=run.verdict)
    ET.SubElement(props, "property", name="run_dir", value=run.run_dir)
    for d in run.results.get("known_deviations") or []:
        ET.SubElement(props, "property", name=f"known:{d.get('id')}",
                      value=f"matched {d.get('matched', 0)}: {d.get('reason')}")
    if run.command:
        ET.SubElement(props, "property", name="command", value=run.command)
    failures = errors = 0
    classname = case_class(backend, run.name, t.get("seed", "unknown"))
    checkers = run.checkers or {"run": None}
    if not run.checkers and run.results.get("notes"):
        run.problems.extend(str(n) for n in run.results["notes"])
    for name, r in checkers.items():
        stats = (r or {}).get("stats") or {} if isinstance(r, dict) else {}
        case = ET.SubElement(suite, "testcase", classname=classname, name=name,
                             time=f"{float(stats.get('seconds', 0) or 0):.3f}")
        if r is None:
            errors += 1
            el = ET.SubElement(case, "error", type="unknown", message="the run produced no checker results")
            el.text = "\n".join(run.problems) or "results.json has no checkers"
            continue
        word = _word(r.get("valid") if isinstance(r, dict) else None)
        if isinstance(r, dict) and r.get("known"):  # acknowledged findings: shown, never a failure by themselves
            out = ET.SubElement(case, "system-out")
            out.text = _cap("\n".join(f"known ({(a.get('known') or {}).get('id')}): {a.get('type')} "
                                       f"(ops {a.get('ops')}): {a.get('explanation')}" for a in r["known"]))
        if word == "invalid":
            failures += 1
            anomalies = r.get("anomalies") or []
            el = ET.SubElement(case, "failure", type="invalid",
                               message=f"{len(anomalies)} anomal{'y' if len(anomalies) == 1 else 'ies'}")
            el.text = _cap("\n\n".join(f"{a.get('type')} (ops {a.get('ops')}): {a.get('explanation')}"
                                       for a in anomalies if isinstance(a, dict))
                           + (f"\n\nreproduce: {run.command}" if run.command else ""))
        elif word == "unknown":
            errors += 1
            reasons = ([r["error"]] if isinstance(r, dict) and r.get("error") else []) + \
                list((r.get("unknown_reasons") if isinstance(r, dict) else None) or [])
            el = ET.SubElement(case, "error", type="unknown", message="the checker could not decide")
            el.text = _cap("\n".join(str(x) for x in reasons) or "no reason given")
    notes = [str(n) for n in (run.results.get("notes") or [])]
    decided = {_word(r.get("valid")) for r in run.checkers.values() if isinstance(r, dict)}
    if run.checkers and run.verdict == "unknown" and not decided - {"valid"}:
        # every checker passed, yet the run is unknown (e.g. a requested fault never took effect)
        errors += 1
        case = ET.SubElement(suite, "testcase", classname=classname, name="run", time="0.000")
        el = ET.SubElement(case, "error", type="unknown", message="the run proved nothing")
        el.text = _cap("\n".join(notes) or "verdict unknown")
    suite.set("tests", str(len(suite.findall("testcase"))))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", "0")
    return suite


def case_class(backend: str, name: str, seed) -> str:
    """The testcases' ``classname``: backend, test name and seed (see the module docstring)."""
    return ".".join(("chaos", *(str(x).replace(".", "_") for x in (backend, name, f"seed{seed}"))))


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "\n... (truncated; see results.json)"


def to_xml(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def run_junit(run: RunData) -> str:
    """``junit.xml`` of one run (a single ``<testsuite>`` root)."""
    return to_xml(run_suite(run))


def matrix_junit(runs: list[RunData], name: str = "chaos test-all") -> str:
    """``<testsuites>`` holding one ``<testsuite>`` per run of a matrix."""
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for run in runs:
        suite = run_suite(run)
        root.append(suite)
        for k in totals:
            totals[k] += int(suite.get(k, 0))
    for k, v in totals.items():
        root.set(k, str(v))
    return to_xml(root)
