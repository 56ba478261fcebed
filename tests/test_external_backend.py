"""``backends.external`` against real programs: our own CLI, and programs that
crash, print garbage or report busy."""

from __future__ import annotations

import json
import os
import sys

import pytest

from backends.external import ExternalBackend, Indeterminate
from backends.external.profile import load_profile

ROOT = os.path.join(os.path.dirname(__file__), "..")
PROFILES = os.path.join(ROOT, "profiles")
CLI = f"{sys.executable} -m chaos.cli backend"


def test_every_shipped_profile_loads():
    from backends.issuelock.external import load_lock_profile

    def load(path):  # each profile through the loader of its protocol
        return load_lock_profile(path) if "protocol: issue-lock" in open(path).read() else load_profile(path)
    names = {load(os.path.join(PROFILES, f)).name for f in os.listdir(PROFILES) if f.endswith(".yaml")}
    assert {"chaos-sqlite", "chaos-gitjournal", "wowbagger-0.1.0-alpha.7", "issuelock-chaos-sqlite",
            "issuelock-chaos-gitfile"} <= names
    wow = load_profile(os.path.join(PROFILES, "wowbagger-0.1.0-alpha.7.yaml"))
    assert wow.black_box and wow.api_version == 2 and wow.provision_mints_namespace
    assert (wow.busy.exit, wow.busy.code, wow.busy.reason) == (6, "claim-store-unavailable", "claim-store-locked")


def test_drives_our_sqlite_cli(tmp_path):
    b = ExternalBackend({"command": f"{CLI} sqlite", "ledger": str(tmp_path),
                         "profile": os.path.join(PROFILES, "chaos-sqlite.yaml")})
    out = b.provision(str(tmp_path), ["wbns_" + "b" * 32])
    assert out["namespaces"] == ["wbns_" + "b" * 32]
    caps = b.call("capabilities", {})
    assert caps.exit == 0 and caps.envelope["result"]["operations"]["work_claim"]["mode"] == "fenced"
    bad = b.call("read", b'{"ledger_namespace": NaN}')
    assert bad.exit == 2 and bad.envelope["error"]["code"] == "invalid-request"


def _script(tmp_path, body: str) -> str:
    p = tmp_path / "prog.py"
    p.write_text(body)
    return f"{sys.executable} {p}"


def test_a_crash_is_indeterminate(tmp_path):
    cmd = _script(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n")
    with pytest.raises(Indeterminate, match="signal 9"):
        ExternalBackend({"command": cmd, "ledger": str(tmp_path)}).call("capabilities", {})


@pytest.mark.parametrize("out", ['print("{}"); print("{}")', 'print("not json")', 'import sys; sys.stdout.write("{}")',
                                 'print(\'{"a":1,"a":2}\')'])
def test_output_that_is_not_one_strict_json_line_is_indeterminate(tmp_path, out):
    cmd = _script(tmp_path, out + "\n")
    with pytest.raises(Indeterminate):
        ExternalBackend({"command": cmd, "ledger": str(tmp_path)}).call("capabilities", {})


def test_a_timeout_is_indeterminate(tmp_path):
    cmd = _script(tmp_path, "import time; time.sleep(30)\n")
    b = ExternalBackend({"command": cmd, "ledger": str(tmp_path), "profile": {"name": "slow", "timeout_s": 0.5}})
    with pytest.raises(Indeterminate, match="timed out"):
        b.call("capabilities", {})


def test_declared_busy_is_retried_and_declared_differences_normalised(tmp_path):
    counter = tmp_path / "n"
    busy = {"ok": False, "error": {"code": "claim-store-unavailable", "message": "m",
                                   "details": {"reason": "claim-store-locked"}}}
    ok = {"ok": True, "result": {"backend": {"name": "x", "extra": 1}}}
    cmd = _script(tmp_path, f"""import json, os, sys
p = {str(counter)!r}
n = int(open(p).read()) if os.path.exists(p) else 0
open(p, "w").write(str(n + 1))
if n < 2:
    print(json.dumps({busy!r})); sys.exit(6)
print(json.dumps({ok!r}))
""")
    profile = {"name": "p", "busy": {"exit": 6, "code": "claim-store-unavailable", "reason": "claim-store-locked",
                                     "retry": {"attempts": 5, "backoff_ms": 1}},
               "capabilities_extra_members_allowed": ["/result/backend/extra"]}
    b = ExternalBackend({"command": cmd, "ledger": str(tmp_path), "profile": profile})
    reply = b.call("capabilities", {})
    assert reply.exit == 0 and reply.envelope == {"ok": True, "result": {"backend": {"name": "x"}}}
    assert b.invocations == 3
    assert json.loads(json.dumps(reply.envelope))  # plain data


def test_what_a_call_forks_dies_with_the_call(tmp_path):
    """A program that leaves a child running in its process group: the child is
    killed when the call ends (each call runs in its own session)."""
    import psutil

    pidfile = tmp_path / "child.pid"
    cmd = _script(tmp_path, f"""import os, subprocess, sys, json
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open({str(pidfile)!r}, "w").write(str(child.pid))
print(json.dumps({{"ok": True, "result": {{}}}}))
""")
    reply = ExternalBackend({"command": cmd, "ledger": str(tmp_path)}).call("capabilities", {})
    assert reply.exit == 0
    pid = int(pidfile.read_text())
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the call's child {pid} outlived the call")


def test_a_non_contract_exit_is_a_protocol_violation_with_evidence(tmp_path):
    from backends.external import ReplyProtocolError

    cmd = _script(tmp_path, "import sys; sys.stderr.write('EIO: i/o error, fsync\\n'); sys.exit(1)\n")
    with pytest.raises(ReplyProtocolError) as e:
        ExternalBackend({"command": cmd, "ledger": str(tmp_path)}).call("acquire", {})
    assert e.value.evidence["exit"] == 1 and e.value.evidence["stdout"] == ""
    assert "EIO" in e.value.evidence["stderr"] and e.value.evidence["op"] == "acquire"
    cmd = _script(tmp_path, 'print(\'{"ok": true}\'); raise SystemExit(7)\n')
    with pytest.raises(ReplyProtocolError, match="not a contract exit code"):
        ExternalBackend({"command": cmd, "ledger": str(tmp_path)}).call("read", {})


def test_an_export_printed_inside_an_envelope_is_unwrapped(tmp_path):
    durable = {"clock_floors": [], "claims": [], "ledgers": [], "publication_outcomes": []}
    cmd = _script(tmp_path, f"import json; print(json.dumps({{'ok': True, 'result': {{'durable': {durable!r}}}}}))\n")
    profile = {"name": "wrapped", "admin": {"seed": ["s"], "export": ["admin", "export"]},
               "export": {"unwrap": "/result/durable", "requests": False}}
    b = ExternalBackend({"command": cmd, "ledger": str(tmp_path), "profile": profile})
    assert b.admin("export", str(tmp_path)) == durable
    assert b.profile.export.requests is False
    bad = ExternalBackend({"command": cmd, "ledger": str(tmp_path),
                           "profile": dict(profile, export={"unwrap": "/result/nothing"})})
    with pytest.raises(RuntimeError, match="has no /result/nothing"):
        bad.admin("export", str(tmp_path))
