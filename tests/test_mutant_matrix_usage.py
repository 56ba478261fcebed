"""``benchmarks/mutant_matrix.py`` refuses a name it does not know the way
every command of the suite does: one line on stderr and exit 254, before any
run starts (argparse's own exit 2 and a traceback on a bad ``--seeds`` were
the old behaviour)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "mutant_matrix.py"


@pytest.mark.parametrize("args, says", [
    (["--bugs", "split-nothing"], "unknown planted bugs: split-nothing"),
    (["--control", "oracle", "--bugs", "none"], "unknown control backends: oracle"),
    (["--paths", "python,ext"], "unknown paths: python,ext"),
    (["--seeds", "one"], "--seeds one"),
    (["--jobs", "two"], "--jobs"),
    (["--frobnicate"], "unrecognized arguments"),
])
def test_bad_input_is_one_line_and_254(args, says, tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--json", str(tmp_path / "out.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 254, proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("mutant_matrix: ") and says in proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_the_plan_names_every_control_on_the_paths_it_has():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_mutant_matrix_plan", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        plan = module.plan_of(module.parse(["--control", "sqlite,reference,postgres", "--bugs", "split-publish",
                                            "--seeds", "1-2"]))
    finally:
        sys.modules.pop(spec.name, None)
    assert [s for b, c, p, s in plan if b is None] == [1, 1, 1, 1, 2, 2, 2, 2]   # seed by seed
    controls = [(c, p) for b, c, p, s in plan if s == 1 and b is None]
    assert controls == [("sqlite", "python"), ("sqlite", "external"), ("reference", "external"),
                        ("postgres", "python")]
    assert [(b, p, s) for b, c, p, s in plan if b] == [("split-publish", "python", 1), ("split-publish", "python", 2),
                                                       ("split-publish", "external", 1),
                                                       ("split-publish", "external", 2)]
