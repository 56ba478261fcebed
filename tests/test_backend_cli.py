"""``chaos backend NAME ...``: the contract CLI convention, run for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def chaos(*args: str, stdin: bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], input=stdin, capture_output=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=60)


def one_line(res: subprocess.CompletedProcess) -> dict:
    assert res.stdout.endswith(b"\n") and res.stdout.count(b"\n") == 1, res.stdout
    return json.loads(res.stdout)


@pytest.mark.parametrize("name", ["sqlite", "gitjournal", "reference"])
def test_provision_acquire_read_with_a_clock_file(tmp_path, name):
    if name == "gitjournal":
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    ledger = str(tmp_path / "ledger")
    ns = "wbns_" + "a" * 32
    assert chaos("backend", name, "provision", "--ledger", ledger, "--namespace", ns, "--json").returncode == 0
    clock = tmp_path / "clock"
    clock.write_text("1894352400000")
    env = {"CHAOS_CLOCK_FILE": str(clock)}
    body = {"ledger_namespace": ns, "item_id": "wb_01Q4837BM01W70T30B184GG1R6", "owner_id": "a",
            "lease_duration_ms": 60000, "expected": {"last_epoch": "0", "active": None}}
    res = chaos("backend", name, "claim", "acquire", "--ledger", ledger, "--input", "-", "--json",
                stdin=json.dumps(body).encode(), env=env)
    assert res.returncode == 0
    assert one_line(res)["result"]["claim"]["issued_at"] == "2030-01-11T09:00:00.000Z"
    res = chaos("backend", name, "claim", "read", "--ledger", ledger, "--input", "-", "--json",
                stdin=json.dumps({"ledger_namespace": ns, "item_id": body["item_id"]}).encode(), env=env)
    assert one_line(res)["result"]["read_back"]["last_epoch"] == "1"  # persisted between invocations


def test_strict_parsing_and_oversize_input(tmp_path):
    ledger = str(tmp_path)
    chaos("backend", "sqlite", "provision", "--ledger", ledger, "--json")
    res = chaos("backend", "sqlite", "claim", "read", "--ledger", ledger, "--input", "-", "--json",
                stdin=b'{"a":1,"a":2}')
    assert res.returncode == 2 and one_line(res)["error"]["message"] == "The request is not unique-key UTF-8 JSON."
    res = chaos("backend", "sqlite", "publish-claimed", "--ledger", ledger, "--input", "-", "--json",
                stdin=b" " * (11_534_336 + 10))
    assert res.returncode == 2 and one_line(res)["error"]["code"] == "invalid-request"


def test_usage_errors_exit_254_without_traceback(tmp_path):
    res = chaos("backend", "sqlite", "claim", "frobnicate", "--ledger", str(tmp_path))
    assert res.returncode == 254 and b"Traceback" not in res.stderr
    res = chaos("backend", "gitjournal", "claim", "read")
    assert res.returncode == 254 and b"--ledger" in res.stderr


def _acquire_with_failing_fsync(tmp_path, backend: str, match: str):
    """An acquire of a free item on a provisioned ledger whose fsyncs of ``match`` fail (EIO shim)."""
    from chaos.faults.failsync import build

    ledger = str(tmp_path / "ledger")
    assert chaos("backend", backend, "provision", "--ledger", ledger, "--namespace", NS, "--json").returncode == 0
    (tmp_path / "failsync.on").touch()
    env = {"LD_PRELOAD": build(), "FAILSYNC_FILE": str(tmp_path / "failsync.on"), "FAILSYNC_MATCH": match}
    return chaos("backend", backend, "claim", "acquire", "--ledger", ledger, "--input", "-", "--json",
                 stdin=json.dumps(FREE_ACQUIRE).encode(), env=env), ledger


NS = "wbns_" + "a" * 32
FREE_ACQUIRE = {"ledger_namespace": NS, "item_id": "wb_01Q4837BM01W70T30B184GG1R6", "owner_id": "a",
                "lease_duration_ms": 60000, "expected": {"last_epoch": "0", "active": None}}


def test_a_claim_commit_of_unknown_outcome_prints_no_reply_and_says_why_in_one_line(tmp_path):
    # the COMMIT fsync of claims.db fails (EIO shim): the acquire may have committed, and no
    # contract reply says "unknown" for a claim, so none is printed (chaos.commands.backend)
    from chaos.commands.backend import NO_REPLY_EXIT

    res, _ = _acquire_with_failing_fsync(tmp_path, "sqlite", "claims.db")
    assert (res.returncode, res.stdout) == (NO_REPLY_EXIT, b"")
    assert b"Traceback" not in res.stderr and res.stderr.count(b"\n") == 1
    assert b"claim commit outcome unknown" in res.stderr


def test_a_reference_call_whose_save_fails_answers_store_unavailable_and_changes_nothing(tmp_path):
    # the fsync nemesis on the reference CLI (the red team's reference control): the reply was
    # printed before the JSON file was saved, so a failing fsync crashed the call with exit 255
    # after it had acknowledged an acquire the file never got
    res, ledger = _acquire_with_failing_fsync(tmp_path, "reference", "reference.json")
    reply = one_line(res)
    assert (res.returncode, reply["error"]["code"], reply["state"]) == (6, "claim-store-unavailable", "unchanged")
    assert b"Traceback" not in res.stderr and res.stderr.count(b"\n") == 1
    assert sorted(os.listdir(ledger)) == ["reference.json", "reference.json.lock"]   # no partial copy left
    (tmp_path / "failsync.on").unlink()
    read = json.dumps({"ledger_namespace": NS, "item_id": FREE_ACQUIRE["item_id"]}).encode()
    res = chaos("backend", "reference", "claim", "read", "--ledger", ledger, "--input", "-", "--json", stdin=read)
    assert one_line(res)["result"]["read_back"] == {**one_line(res)["result"]["read_back"], "last_epoch": "0",
                                                     "active": None}   # "unchanged" was true
    res = chaos("backend", "reference", "claim", "acquire", "--ledger", ledger, "--input", "-", "--json",
                stdin=json.dumps(FREE_ACQUIRE).encode())
    assert res.returncode == 0 and one_line(res)["result"]["claim"]["epoch"] == "1"   # saves once fsync works


def test_a_refused_publish_whose_save_fails_still_echoes_its_operation_id(tmp_path):
    # the red team's reference control, seeds 4, 6, 11 and 16 (2026-12-05): a noncanonical publish
    # (its fence's owner_id too long) is refused by the engine without an operation_id; the save
    # after it failed (fsync EIO), and the store-unavailable reply carried none either, which the
    # envelopes checker rightly called malformed: a publication reply echoes the request's id
    from chaos.faults.failsync import build

    ledger = str(tmp_path / "ledger")
    assert chaos("backend", "reference", "provision", "--ledger", ledger, "--namespace", NS, "--json").returncode == 0
    (tmp_path / "failsync.on").touch()
    env = {"LD_PRELOAD": build(), "FAILSYNC_FILE": str(tmp_path / "failsync.on"), "FAILSYNC_MATCH": "reference.json"}
    body = {"operation_id": "pub_x_1", "ledger_namespace": NS, "item_id": FREE_ACQUIRE["item_id"],
            "expected_revision": "sha256:" + "0" * 64, "candidate_source_base64": "eA==",
            "candidate_sha256": "sha256:" + "0" * 64,
            "claim_fence": {"ledger_namespace": NS, "item_id": FREE_ACQUIRE["item_id"], "owner_id": "a" * 300,
                            "epoch": "1"}}
    res = chaos("backend", "reference", "publish-claimed", "--ledger", ledger, "--input", "-", "--json",
                stdin=json.dumps(body).encode(), env=env)
    reply = one_line(res)
    assert (res.returncode, reply["error"]["code"]) == (6, "claim-store-unavailable"), reply
    assert reply["operation_id"] == "pub_x_1"


def test_a_bound_namespace_is_never_called_unbound_when_the_provisioning_cannot_be_read(tmp_path):
    # what the red team's CLI runs met (revision-unchecked, seed 2): a writer SIGKILLed inside its
    # transaction leaves a hot journal; while fsync fails, every reader must roll it back and cannot
    # (SQLITE_IOERR_FSYNC), the provisioning read among them. The namespace's binding is then unknown,
    # so the call decides nothing (exit 6); it was answered ledger-namespace-unbound (exit 2)
    import signal

    from chaos.faults.failsync import build

    ledger = str(tmp_path / "ledger")
    ns = "wbns_" + "a" * 32
    assert chaos("backend", "sqlite", "provision", "--ledger", ledger, "--namespace", ns, "--json").returncode == 0
    db = os.path.join(ledger, "claims.db")
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from backends.sqlite.store import connect; c = connect(sys.argv[1]); "
        "c.execute('BEGIN IMMEDIATE'); c.execute('UPDATE provisioning SET value = value'); "
        "c.execute('PRAGMA cache_size = 1'); c.execute('CREATE TABLE filler(x)'); "
        "c.execute('INSERT INTO filler VALUES (zeroblob(200000))'); print('in', flush=True); time.sleep(60)"),
        db], cwd=ROOT, stdout=subprocess.PIPE)
    assert writer.stdout.readline() == b"in\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert os.path.getsize(db + "-journal") > 0   # hot: the killed transaction is still to be rolled back
    (tmp_path / "failsync.on").touch()
    env = {"LD_PRELOAD": build(), "FAILSYNC_FILE": str(tmp_path / "failsync.on"), "FAILSYNC_MATCH": "claims.db"}
    read = json.dumps({"ledger_namespace": ns, "item_id": "wb_01Q4837BM01W70T30B184GG1R6"}).encode()
    res = chaos("backend", "sqlite", "claim", "read", "--ledger", ledger, "--input", "-", "--json", stdin=read, env=env)
    reply = one_line(res)
    assert (res.returncode, reply["error"]["code"], reply["state"]) == (6, "claim-store-unavailable", "unchanged")
    (tmp_path / "failsync.on").unlink()   # fsync works again: the next call rolls the journal back and answers
    res = chaos("backend", "sqlite", "claim", "read", "--ledger", ledger, "--input", "-", "--json", stdin=read, env=env)
    assert res.returncode == 0 and one_line(res)["result"]["read_back"]["last_epoch"] == "0"


def test_a_claim_call_imports_only_what_it_runs(tmp_path):
    # one process per operation (black-box runs, the red team's CLI path): every module a call
    # imports is paid on every call, so a claim call loads neither the other commands nor PyYAML
    ledger = str(tmp_path)
    ns = "wbns_" + "b" * 32
    assert chaos("backend", "sqlite", "provision", "--ledger", ledger, "--namespace", ns, "--json").returncode == 0
    probe = ("import json, sys, chaos.cli\n"
             "code = chaos.cli.main(sys.argv[1:])\n"
             "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
             "sys.exit(code)\n")
    res = subprocess.run([sys.executable, "-c", probe, "backend", "sqlite", "claim", "read", "--ledger", ledger,
                          "--input", "-", "--json"], input=json.dumps({"ledger_namespace": ns, "item_id":
                          "wb_01Q4837BM01W70T30B184GG1R6"}).encode(), capture_output=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0 and one_line(res)["ok"] is True
    loaded = set(json.loads(res.stderr.decode().strip().splitlines()[-1]))
    assert "chaos.commands.backend" in loaded
    assert not loaded & {"yaml", "http.server", "chaos.commands.run", "chaos.commands.serve", "chaos.conform.suite",
                         "checkers.history", "backends.contract.ledger_item"}, sorted(loaded)
    assert "backend" in chaos("--help").stdout.decode()     # the full command list is still there
