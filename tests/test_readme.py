"""The README's two commands are the contract with a fresh machine; .ci/run must
run exactly the README's test command."""

from pathlib import Path
import re

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_has_the_two_commands():
    cmds = _readme_commands()
    assert any("chaos run" in c for c in cmds), cmds
    assert any("pytest" in c for c in cmds), cmds


def test_ci_runs_exactly_the_readme_test_command():
    test_cmd = next(c for c in _readme_commands() if "pytest" in c)
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_cmd in ci_lines


def test_tests_under_load_runs_the_readme_test_command():
    """benchmarks/tests_under_load.sh takes the command from README.md (never a copy)."""
    script = (ROOT / "benchmarks" / "tests_under_load.sh").read_text()
    assert "README.md" in script and "pytest -q" not in script
    assert re.search(r'blocks if "pytest" in b', script)
