"""Issue 30: each crash, false verdict, memory blow-up, data loss and leftover
a hostile user found, pinned by a test that failed before its fix.

Cases that stop before a run starts call the CLI in-process; cases that need
the runner or a real program run it as a subprocess (small programs of the
tests' own, written to ``tmp_path``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from chaos import cli
from chaos.testing.synthetic import make_run
from test_bad_input import chaos, one_line_254   # one definition of what a one-line usage error is

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
VECTORS = os.environ.get("CHAOS_VECTORS") or os.path.join(ROOT, "..", "shared", "vectors", "work-claims")
QUICK = ["--workers", "1", "--time-limit", "1", "--nemesis", "none"]
SQLITE_CLI = f"{PY} -m chaos.cli backend sqlite"


def chaos_sub(*argv, timeout: float = 180, cwd: str | None = None, env: dict | None = None,
              stdin: bytes | None = None) -> tuple[int, str]:
    p = subprocess.run([PY, "-m", "chaos.cli", *[str(a) for a in argv]], capture_output=True, timeout=timeout,
                       cwd=cwd or ROOT, env={**os.environ, **(env or {})}, input=stdin)
    return p.returncode, p.stderr.decode(errors="replace")


def _profile(tmp_path, name: str = "p.yaml", **members) -> str:
    doc = yaml.safe_load(open(os.path.join(ROOT, "profiles", "chaos-sqlite.yaml")))
    doc.update(members)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


# ------------------------------------------------------------------ arguments and configs


def test_an_unbalanced_quote_in_command_is_one_line(capsys, tmp_path):
    line = one_line_254(*chaos(capsys, "run", "--backend", "external", "--command", "'abc", "--store",
                               tmp_path / "s", *QUICK))
    assert "--command" in line and "No closing quotation" in line
    assert not (tmp_path / "s").exists()
    one_line_254(*chaos(capsys, "conform", "--backend", "external", "--command", "'abc", "--vectors", VECTORS))


@pytest.mark.parametrize("value", [".inf", "-1", "0", "1001", "-.inf"])
def test_config_scale_is_range_checked_like_the_flag(capsys, tmp_path, value):
    path = tmp_path / "test.yaml"
    path.write_text(f"name: t\nbackend: sqlite\nscale: {value}\n")
    line = one_line_254(*chaos(capsys, "run", "--config", path, "--store", tmp_path / "s"))
    assert "scale" in line
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("timeout_s", [float("nan"), float("inf"), -1.0, 1e9])
def test_profile_timeout_must_be_finite(capsys, tmp_path, timeout_s):
    profile = _profile(tmp_path, timeout_s=timeout_s)
    line = one_line_254(*chaos(capsys, "run", "--backend", "external", "--command", SQLITE_CLI, "--profile", profile,
                               "--store", tmp_path / "s", *QUICK))
    assert "timeout_s" in line


@pytest.mark.parametrize("token", ["{", "}", "{ledger", "{nosuch}", "{ledger!r}", "{0}", "a{}b"])
def test_a_malformed_argv_template_is_the_profiles_error(capsys, tmp_path, token):
    """It used to reach the program as a literal argument and the run reported the BACKEND invalid."""
    profile = _profile(tmp_path, argv={"read": ["claim", "read", "--ledger", token, "--input", "-", "--json"]})
    line = one_line_254(*chaos(capsys, "run", "--backend", "external", "--command", SQLITE_CLI, "--profile", profile,
                               "--store", tmp_path / "s", *QUICK))
    assert "argv.read[3]" in line
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("path", ["/tmp/{item_id}.md", "../{item_id}.md", "a/../../{item_id}.md", "{item_id}/.."])
def test_item_paths_outside_the_ledger_are_refused(capsys, tmp_path, path):
    profile = _profile(tmp_path, items={"path": path})
    assert "items.path" in one_line_254(*chaos(capsys, "run", "--backend", "external", "--command", SQLITE_CLI,
                                               "--profile", profile, "--store", tmp_path / "s", *QUICK))


def test_backend_postgres_with_a_garbage_dsn_is_one_line(capsys, tmp_path):
    line = one_line_254(*chaos(capsys, "backend", "postgres", "--dsn", "garbage", "provision", "--json"))
    assert "garbage" in line


# ------------------------------------------------------------------ user code: --factory


FACTORIES = """
def boom(spec, clock, hooks):
    raise RuntimeError("user factory exploded")

def nothing(spec, clock, hooks):
    return 42
"""


@pytest.mark.parametrize("factory, needle", [
    ("os:getcwd", "TypeError"), ("json:dumps", "TypeError"), ("builtins:dict", "TypeError"),
    ("userfactories:boom", "user factory exploded"), ("userfactories:nothing", "not a backend"),
])
def test_backend_python_factory_that_is_no_backend(capsys, tmp_path, monkeypatch, factory, needle):
    (tmp_path / "userfactories.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    ledger = tmp_path / "l"
    assert chaos(capsys, "backend", "python", "--factory", factory, "provision", "--ledger", ledger, "--json")[0] == 0
    request = tmp_path / "req.json"
    request.write_text("{}")
    line = one_line_254(*chaos(capsys, "backend", "python", "--factory", factory, "claim", "read", "--ledger", ledger,
                               "--input", request, "--json"))
    assert f"--factory {factory}" in line and needle in line


@pytest.mark.parametrize("factory, needle", [("os:getcwd", "TypeError"), ("userfactories:boom", "exploded"),
                                             ("userfactories:nothing", "not a backend")])
def test_run_factory_that_is_no_backend_names_the_factory(tmp_path, factory, needle):
    (tmp_path / "userfactories.py").write_text(FACTORIES)
    code, err = chaos_sub("run", "--backend", "python", "--factory", factory, "--store", tmp_path / "s", *QUICK,
                          cwd=str(tmp_path))
    line = one_line_254(code, err)
    assert f"--factory {factory}" in line and needle in line


# ------------------------------------------------------------------ stored runs: check, shrink, serve, latest


def test_check_of_an_empty_history_is_unknown(capsys, tmp_path):
    run_dir = make_run(str(tmp_path), verdict="valid", empty=True)
    assert cli.main(["check", run_dir, "--no-linearizable"]) == 2
    assert "nothing was checked" in capsys.readouterr().out
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "history.jsonl").write_bytes(b"")
    code, err = chaos(capsys, "check", tmp_path / "bare", "--no-linearizable")
    assert code == 2 and "Traceback" not in err


def test_shrink_of_a_run_whose_test_yaml_is_not_yaml(capsys, tmp_path):
    run_dir = make_run(str(tmp_path), verdict="invalid")
    with open(os.path.join(run_dir, "test.yaml"), "w") as f:
        f.write("name: [unclosed\n  : {")
    assert "test.yaml" in one_line_254(*chaos(capsys, "shrink", run_dir))


def test_shrink_never_replaces_an_earlier_result_without_force(capsys, tmp_path):
    run_dir = make_run(str(tmp_path), verdict="invalid")
    shrunk = os.path.join(run_dir, "shrunk")
    os.makedirs(os.path.join(shrunk, "run"))
    os.makedirs(os.path.join(shrunk, "replays"))
    for rel, text in (("test.yaml", "mine: 1\n"), ("run/keep.txt", "a minimal run"), ("replays/keep.txt", "x")):
        with open(os.path.join(shrunk, rel), "w") as f:
            f.write(text)
    line = one_line_254(*chaos(capsys, "shrink", run_dir, "--budget", "0.001"))
    assert "--force" in line
    assert open(os.path.join(shrunk, "test.yaml")).read() == "mine: 1\n"
    assert os.path.isfile(os.path.join(shrunk, "run", "keep.txt"))
    assert os.path.isfile(os.path.join(shrunk, "replays", "keep.txt"))


def test_serve_answers_a_nul_in_the_path(tmp_path):
    import urllib.error
    import urllib.request

    from chaos.commands.serve import start_in_thread

    make_run(str(tmp_path), verdict="valid")
    server, url = start_in_thread(str(tmp_path))
    try:
        for path in ("%00", "a%00b/report.html", "synthetic/%00"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(url + path, timeout=30)
            assert e.value.code == 400
    finally:
        server.shutdown()
        server.server_close()


def test_a_real_directory_at_latest_is_left_alone(tmp_path):
    from chaos.store import RunDir

    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "mine.txt").write_text("the user's")
    run = RunDir(str(tmp_path), "t")
    reason = run.link_latest()
    assert reason and "not a symlink" in reason
    assert (tmp_path / "latest" / "mine.txt").read_text() == "the user's"
    assert not [p for p in os.listdir(tmp_path) if p.startswith("latest.tmp")]


# ------------------------------------------------------------------ external programs


def _program(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    path.chmod(0o755)
    return str(path)


def test_a_program_printing_forever_is_cut_off_with_bounded_memory():
    """It drove the harness to 3.7 GB and MemoryError: output was read whole."""
    # the peak of this process's own memory (VmHWM), not ru_maxrss: Linux carries ru_maxrss over an exec,
    # so a child spawned from a big pytest process would report pytest's peak
    code = ("import re, time\n"
            "from backends.external.process import Indeterminate, run_cli\n"
            "t = time.monotonic()\n"
            "try:\n"
            "    run_cli(['sh', '-c', 'yes'], b'', {}, 60)\n"
            "except Indeterminate as e:\n"
            "    print(e)\n"
            "hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
            "print(time.monotonic() - t, hwm)\n")
    p = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    message, figures = p.stdout.strip().splitlines()[-2:]
    seconds, max_rss_kb = figures.split()
    assert "more than" in message and "stdout" in message, p.stdout + p.stderr
    assert float(seconds) < 30
    assert int(max_rss_kb) < 400_000   # the 64 MiB bound and its copies, not gigabytes


def test_reply_bounds_are_per_stream():
    from backends.external.process import Indeterminate, run_cli

    with pytest.raises(Indeterminate, match="more than 1000 bytes on stderr"):
        run_cli(["sh", "-c", "head -c 5000 /dev/zero >&2; echo '{}'"], b"", {}, 30, max_stderr=1000)
    assert run_cli(["sh", "-c", "echo '{\"ok\": true}'"], b"", {}, 30, max_stdout=100) == (0, {"ok": True})


WRONG_TYPES = """#!/bin/sh
cat > /dev/null
echo '{"ok": true, "result": [1, 2]}'
"""


@pytest.mark.parametrize("mode", ["--timed", "--deterministic"])
def test_a_program_answering_json_of_the_wrong_types_is_not_a_crash(tmp_path, mode):
    prog = _program(tmp_path, "prog.sh", WRONG_TYPES)
    code, err = chaos_sub("run", "--backend", "external", "--command", prog, "--store", tmp_path / "s", mode, *QUICK)
    assert "capabilities reply" in one_line_254(code, err)


def test_the_workload_reads_a_typed_view_of_each_reply():
    from chaos.replyview import capabilities_problem, workload_view

    good = {"type": "ok", "value": {"envelope": {"ok": True, "result": {"claim": {"epoch": "1"}, "read_back": None}}}}
    assert workload_view(good) is good
    bad = {"type": "ok", "value": {"envelope": {"ok": True, "result": {"claim": [1], "read_back": {"active": "x"},
                                                                       "committed_revision": 5}}}}
    view = workload_view(bad)["value"]["envelope"]["result"]
    assert view == {"claim": None, "read_back": {"active": None}, "committed_revision": None}
    assert bad["value"]["envelope"]["result"]["claim"] == [1]   # the history keeps what was printed
    assert workload_view({"type": "ok", "value": {"envelope": [1]}})["value"]["envelope"] == {}
    assert capabilities_problem({"ok": True, "result": [1]}) and capabilities_problem("x")
    assert capabilities_problem({"ok": True, "result": {"operations": {"work_claim": {"mode": "fenced"}}}}) is None


DAEMONIZING = """#!{py}
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 256)
        os.execvp(sys.executable, [sys.executable, "-c",
                  "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)", "{marker}"])
    os._exit(0)
os.execvp(sys.executable, [sys.executable, "-m", "chaos.cli", "backend", "sqlite", *sys.argv[1:]])
"""


def _marked(marker: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                out.append(int(pid))
        except OSError:
            pass
    return out


def test_conform_leaves_no_process_of_a_daemonizing_program(tmp_path):
    marker = f"chaos-test-daemon-{os.getpid()}-{time.monotonic_ns()}"
    prog = _program(tmp_path, "daemonizing.py", DAEMONIZING.format(py=PY, marker=marker))
    try:
        code, err = chaos_sub("conform", "--backend", "external", "--command", prog, "--vectors", VECTORS,
                              "--case", "renew-release-restart-aba")
        assert code == 0, err
        deadline = time.monotonic() + 10
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marked(marker) == []
    finally:
        for pid in _marked(marker):   # only the processes this test's own program started
            os.kill(pid, signal.SIGKILL)


def test_libfaketime_leaves_nothing_in_dev_shm(tmp_path):
    """Killed (and normally exiting) targets used to leave faketime_shm_<pid> / sem.faketime_sem_<pid>."""
    from chaos.faults.faketime import ClockFault

    began = time.time() - 1   # a segment of a dead process whose pid was reused is older: not this test's
    clock = ClockFault(str(tmp_path / "clock"))
    clock.set_offset(-3600)
    env = {**os.environ, **clock.env()}
    p = subprocess.Popen([PY, "-c", "import os, time; print(time.time(), flush=True); time.sleep(60)"], env=env,
                         stdout=subprocess.PIPE, text=True)
    faked = float(p.stdout.readline())
    assert faked < time.time() - 3000   # the preload is live
    p.kill()
    p.wait()
    done = subprocess.run([PY, "-c", "import os; print(os.getpid())"], env=env, capture_output=True, text=True)
    def made_now(path: str) -> bool:
        try:
            return os.stat(path).st_mtime >= began
        except FileNotFoundError:
            return False

    for pid in (p.pid, int(done.stdout)):
        assert not made_now(f"/dev/shm/faketime_shm_{pid}")
        assert not made_now(f"/dev/shm/sem.faketime_sem_{pid}")


# ------------------------------------------------------------------ profiles against the program


def test_profile_api_version_is_compared_with_the_programs_capabilities(capsys, tmp_path):
    profile = _profile(tmp_path, api_version=2)
    line = one_line_254(*chaos(capsys, "conform", "--backend", "external", "--command", SQLITE_CLI, "--profile",
                               profile, "--vectors", VECTORS, "--case", "capabilities-fenced"))
    assert "member api_version is 2" in line and "api_version 1" in line
    code, err = chaos_sub("run", "--backend", "external", "--command", SQLITE_CLI, "--profile", profile,
                          "--store", tmp_path / "s", *QUICK)
    assert "member api_version is 2" in one_line_254(code, err)


def test_profile_backend_name_and_mode_are_compared(capsys, tmp_path):
    profile = _profile(tmp_path, backend_name="some-other-store", profile="merge-coordinated")
    line = one_line_254(*chaos(capsys, "conform", "--backend", "external", "--command", SQLITE_CLI, "--profile",
                               profile, "--vectors", VECTORS, "--case", "capabilities-fenced"))
    assert "member backend_name" in line and "member profile is merge-coordinated" in line


def test_a_wrong_publication_read_outcome_wrapped_is_one_line_naming_it(capsys, tmp_path):
    """It showed as 18-19 field mismatches of one case that never named the member."""
    profile = _profile(tmp_path, publication_read_outcome_wrapped=False)
    line = one_line_254(*chaos(capsys, "conform", "--backend", "external", "--command", SQLITE_CLI, "--profile",
                               profile, "--vectors", VECTORS, "--case", "publication-response-loss"))
    assert "member publication_read_outcome_wrapped is false" in line


NO_VERIFY = """#!/bin/sh
case "$1" in claim-verify|legacy) echo "unknown command $1" >&2; exit 64;; esac
exec {py} -m chaos.cli backend sqlite "$@"
"""


def test_doctor_does_not_say_ok_for_a_mapped_command_the_program_lacks(capsys, tmp_path):
    prog = _program(tmp_path, "noverify.sh", NO_VERIFY.format(py=PY))
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump({"name": "noverify", "argv": {
        "legacy-transition": ["legacy", "transition-v1", "--ledger", "{ledger}", "--input", "-", "--json"],
        "legacy-create": ["legacy", "create-v1", "--ledger", "{ledger}", "--input", "-", "--json"]}}))
    code = cli.main(["doctor", "--backend", "external", "--profile", str(profile), "--command", prog])
    out = capsys.readouterr().out
    assert code in (0, 1)
    rows = {ln.split()[1].rstrip(":"): ln.split()[0] for ln in out.splitlines() if ln.startswith("  ") and ":" in ln}
    assert rows.get("legacy-writes") == "MISSING", out
    assert "member argv.legacy-transition" in out and "member argv.legacy-create" in out
    assert cli.main(["doctor", "--backend", "external", "--command", SQLITE_CLI]) in (0, 1)
    assert "MISMATCH" not in capsys.readouterr().out   # a program that has every mapped command


def test_a_run_with_the_clock_fault_leaves_dev_shm_as_it_found_it(tmp_path):
    """Measured in a /dev/shm of the run's own (a mount namespace), so another
    suite's processes on the machine cannot add to it: 6 pairs before the fix."""
    import shlex
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private /dev/shm")
    run = shlex.join([PY, "-m", "chaos.cli", "run", "--store", str(tmp_path / "s"), "--workers", "2",
                      "--time-limit", "3", "--nemesis", "clock"])
    script = f"mount -t tmpfs tmpfs /dev/shm || exit 99; {run} >/dev/null 2>&1; echo rc=$?; ls -A /dev/shm"
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    if p.returncode == 99 or "rc=" not in p.stdout:
        pytest.skip(f"no private /dev/shm here: {p.stderr.strip()[:200]}")
    verdict_line, *left = p.stdout.split("rc=", 1)[1].splitlines()
    assert verdict_line.strip() in ("0", "2"), p.stdout
    assert left == [], left
