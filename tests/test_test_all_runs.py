"""chaos test-all end to end: real `chaos run`s, the table, the matrix JUnit, the worst exit."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

from chaos.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_smoke_matrix_is_valid(tmp_path, capsys):
    junit = tmp_path / "matrix.xml"
    code = main(["test-all", "--matrix", os.path.join(ROOT, "matrices", "smoke.yaml"), "--store", str(tmp_path),
                 "--junit", str(junit)])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("sqlite")]
    assert len(rows) == 2 and all(" valid " in r for r in rows), out
    assert code == 0
    for r in rows:
        run_dir = r.split()[-1]
        assert os.path.isfile(os.path.join(run_dir, "report.html"))
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and len(root.findall("testsuite")) == 2 and root.get("failures") == "0"


@pytest.mark.slow
def test_matrix_exits_with_the_worst_run(tmp_path, capsys):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("name: gate\nbackends: [sqlite, {backend: python, factory: 'chaos.testing.planted:open_takeover'}]\n"
                      "nemeses: [[]]\nseeds: [3]\ntime_limit: 4\nworkers: 4\n")
    junit = tmp_path / "matrix.xml"
    code = main(["test-all", "--matrix", str(matrix), "--store", str(tmp_path / "store"), "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "open_takeover" in out and "invalid" in out and "1 invalid, 1 valid" in out
    suites = ET.parse(junit).getroot().findall("testsuite")
    failed = [s for s in suites if s.get("failures") != "0"]
    assert len(failed) == 1 and "python" in failed[0].get("name")
    assert "Two owners held the item at once" in ET.tostring(failed[0], encoding="unicode")
