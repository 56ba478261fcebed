"""Issue 30, item 2: an external program writes only beneath the run's own
directory (Landlock, ``backends.external.confine``). A small program of the
tests' own tries each kind of write outside and inside; the kernel decides."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backends.external import ExternalBackend, confine

pytestmark = pytest.mark.skipif(confine.abi_version() <= 0, reason=f"no Landlock here: {confine.status()[1]}")

#: every write it is asked to try, and the errno (0: it worked) each one met
PROGRAM = r'''
import errno, json, os, sys

def attempt(fn):
    try:
        fn()
        return 0
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)

def create(path):
    with open(path, "w") as f:
        f.write("written")

outside, ledger, existing = os.environ["OUTSIDE"], os.environ["LEDGER"], os.environ["EXISTING"]
tried = {
    "create outside": attempt(lambda: create(os.path.join(outside, "escaped"))),
    "mkdir outside": attempt(lambda: os.mkdir(os.path.join(outside, "dir"))),
    "overwrite outside": attempt(lambda: create(existing)),
    "truncate outside": attempt(lambda: os.truncate(existing, 0)),
    "remove outside": attempt(lambda: os.remove(existing)),
    "create in ledger": attempt(lambda: create(os.path.join(ledger, "item"))),
    "rename in ledger": attempt(lambda: os.rename(os.path.join(ledger, "item"), os.path.join(ledger, "moved"))),
    "move out of ledger": attempt(lambda: os.rename(os.path.join(ledger, "moved"), os.path.join(outside, "moved"))),
    "mkdir in ledger": attempt(lambda: os.mkdir(os.path.join(ledger, "sub"))),
    "create in TMPDIR": attempt(lambda: create(os.path.join(os.environ["TMPDIR"], "scratch"))),
    "write /dev/null": attempt(lambda: create("/dev/null")),
}
print(json.dumps({"ok": True, "result": {"tried": tried, "tmpdir": os.environ["TMPDIR"]}}))
'''


def _run(tmp_path) -> tuple[dict, dict]:
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    ledger = run_dir / "ledgers" / "ledger-1"
    ledger.mkdir(parents=True)
    outside.mkdir()
    existing = outside / "user-file"
    existing.write_text("the user's data")
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    backend = ExternalBackend({"command": f"{sys.executable} {prog}", "ledger": str(ledger), "write_root": str(run_dir)})
    backend.env = {"OUTSIDE": str(outside), "LEDGER": str(ledger), "EXISTING": str(existing)}
    reply = backend.call("capabilities", {})
    assert reply.exit == 0, reply
    return reply.envelope["result"], {"run": run_dir, "outside": outside, "ledger": ledger, "existing": existing}


def test_writes_outside_the_run_directory_are_refused_by_the_kernel(tmp_path):
    result, where = _run(tmp_path)
    tried = result["tried"]
    for what in ("create outside", "mkdir outside", "overwrite outside", "remove outside", "move out of ledger"):
        assert tried[what] == "EACCES", (what, tried)
    if confine.abi_version() >= 3:
        assert tried["truncate outside"] == "EACCES", tried
    assert sorted(os.listdir(where["outside"])) == ["user-file"]
    assert where["existing"].read_text() == "the user's data"


def test_writes_beneath_the_run_directory_work(tmp_path):
    result, where = _run(tmp_path)
    tried = result["tried"]
    for what in ("create in ledger", "rename in ledger", "mkdir in ledger", "create in TMPDIR", "write /dev/null"):
        assert tried[what] == 0, (what, tried)
    assert sorted(os.listdir(where["ledger"])) == ["moved", "sub"]
    assert result["tmpdir"] == str(where["run"] / "tmp" / "program")
    assert (where["run"] / "tmp" / "program" / "scratch").read_text() == "written"


def test_the_suites_own_process_and_git_stay_unconfined(tmp_path):
    _run(tmp_path)   # confining a child must not confine the harness itself
    (tmp_path / "outside" / "after").write_text("the harness can still write here")
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True, capture_output=True)


def test_only_rights_the_running_abi_knows_are_requested():
    refer, truncate = 1 << 13, 1 << 14
    for abi, has_refer, has_truncate in ((1, False, False), (2, True, False), (3, True, True), (7, True, True)):
        directory, file = confine.write_rights(abi)
        assert bool(directory & refer) == has_refer and bool(directory & truncate) == has_truncate, abi
        assert bool(file & truncate) == has_truncate and not file & refer, abi
        assert not directory & ((1 << 0) | (1 << 2) | (1 << 3)), "reading and executing stay unrestricted"


def test_doctor_names_the_mechanism():
    ok, detail = confine.status()
    assert ok and f"ABI {confine.abi_version()}" in detail
    out = subprocess.run([sys.executable, "-c", "from chaos.commands.doctor import findings; import json; "
                          "print(json.dumps([r for r in findings() if r[0].startswith('Landlock')]))"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert json.loads(out)[0][1] is True


@pytest.mark.parametrize("workload, command", [("claims", "backend sqlite"), ("issue-lock", "lock-backend sqlite")])
def test_a_run_where_landlock_is_missing_says_so_in_its_notes(capsys, monkeypatch, tmp_path, workload, command):
    """Not a refusal: the run goes on, and its notes say writes were not
    confined (the kernel's answer is replaced here; the rest is a real run),
    for either protocol's programs."""
    from chaos import cli

    monkeypatch.setattr(confine, "abi_version", lambda: 0)
    code = cli.main(["run", "--backend", "external", "--workload", workload,
                     "--command", f"{sys.executable} -m chaos.cli {command}",
                     "--store", str(tmp_path / "s"), "--workers", "1", "--time-limit", "1", "--nemesis", "none"])
    capsys.readouterr()
    notes = json.loads((tmp_path / "s" / "latest" / "results.json").read_text())["notes"]
    assert code in (0, 2) and [n for n in notes if n.startswith("writes not confined: ")], notes


def test_an_issue_lock_program_is_confined_to_its_write_root(tmp_path):
    """The second protocol's external programs go through the same bound."""
    from backends.issuelock.external import ExternalLockBackend

    root, outside = tmp_path / "run", tmp_path / "outside"
    (root / "store").mkdir(parents=True)
    outside.mkdir()
    backend = ExternalLockBackend({"command": "true", "store": str(root / "store"), "write_root": str(root)})
    script = ("import json, os\n"
              "def write(p):\n"
              "    try:\n"
              "        open(p, 'w').write('x'); return 'ok'\n"
              "    except OSError as e:\n"
              "        return e.strerror\n"
              f"print(json.dumps({{'outside': write({str(outside / 'escaped')!r}),"
              f" 'inside': write({str(root / 'store' / 'lock')!r})}}))\n")
    code, reply = backend._run([sys.executable, "-c", script], b"")
    assert code == 0 and reply == {"outside": "Permission denied", "inside": "ok"}, reply
    assert not (outside / "escaped").exists() and (root / "store" / "lock").exists()
