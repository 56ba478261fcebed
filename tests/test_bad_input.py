"""Bad input of every kind ends as ONE line on stderr and exit 254 (design.md),
never a traceback or 255; a real bug in the suite still is 255 with its
traceback. One test per failure observed in issue 13.

Cases that fail before any process starts call the CLI in-process; cases that
reach the runner (a program or a server that fails its set-up) run
``chaos run`` as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml

from chaos import cli
from chaos.testing.synthetic import make_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


def one_line_254(code: int, err: str) -> str:
    assert code == 254, err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("chaos: error:")]
    assert len(lines) == 1 and len(lines[0]) < 1000, err
    return lines[0]


def chaos(capsys, *argv) -> tuple[int, str]:
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def chaos_sub(*argv, timeout: float = 120, cwd: str | None = None) -> tuple[int, str]:
    p = subprocess.run([PY, "-m", "chaos.cli", *[str(a) for a in argv]], capture_output=True, text=True,
                       timeout=timeout, cwd=cwd or ROOT)
    return p.returncode, p.stderr


QUICK = ["--workers", "1", "--time-limit", "1", "--nemesis", "none"]


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "0", "-1"])
def test_time_limit_must_be_a_finite_positive_number(capsys, tmp_path, value):
    line = one_line_254(*chaos(capsys, "run", "--store", tmp_path / "s", "--time-limit", value))
    assert "--time-limit" in line
    assert not (tmp_path / "s").exists()


def test_op_timeout_negative_or_not_finite_is_refused(capsys, tmp_path):
    for value in ("-1", "nan", "inf"):
        assert "--op-timeout" in one_line_254(*chaos(capsys, "run", "--store", tmp_path, "--op-timeout", value))


def test_op_timeout_is_in_the_reproduce_command():
    from chaos.commands.run import build_config

    parser = cli.build_parser()
    for value, shown in (("0", "--op-timeout 0"), ("2.5", "--op-timeout 2.5")):
        cfg = build_config(parser.parse_args(["run", "--op-timeout", value, "--seed", "1", *QUICK]))
        assert shown in cfg.command and cfg.op_timeout == float(value)
        again = build_config(parser.parse_args(cfg.command.split()[1:]))
        assert again.op_timeout == cfg.op_timeout


def test_store_under_proc_or_naming_a_file_is_a_usage_error(capsys, tmp_path):
    assert "--store /proc/x" in one_line_254(*chaos(capsys, "run", "--store", "/proc/x", *QUICK))
    (tmp_path / "afile").write_text("x")
    line = one_line_254(*chaos(capsys, "run", "--store", tmp_path / "afile", *QUICK))
    assert "not a directory" in line


def test_a_store_name_dir_that_is_a_file_is_a_usage_error(tmp_path):
    from chaos.errors import UsageError
    from chaos.store import RunDir

    (tmp_path / "t").write_text("x")
    with pytest.raises(UsageError, match="cannot create the run directory"):
        RunDir(str(tmp_path), "t")


def test_run_factory_that_does_not_import_is_a_usage_error(capsys, tmp_path):
    line = one_line_254(*chaos(capsys, "run", "--backend", "python", "--factory", "nosuchmod:fn",
                               "--store", tmp_path / "s", *QUICK))
    assert "nosuchmod" in line
    assert not (tmp_path / "s").exists()  # refused before a run directory is made


def test_unparseable_dsn_is_a_usage_error(capsys, tmp_path):
    line = one_line_254(*chaos(capsys, "run", "--backend", "postgres", "--dsn", "=== bad", "--store", tmp_path, *QUICK))
    assert "--dsn" in line


def test_dsn_on_a_closed_port_is_a_setup_error_not_a_crash(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    code, err = chaos_sub("run", "--backend", "postgres", "--dsn", f"host=127.0.0.1 port={port} dbname=x user=x",
                          "--store", tmp_path, *QUICK)
    assert "Connection refused" in one_line_254(code, err) or "connection failed" in err


def test_backend_provision_ledger_that_cannot_be_a_directory(capsys, tmp_path):
    for name in ("sqlite", "reference", "gitjournal"):
        assert "--ledger /proc/x" in one_line_254(*chaos(capsys, "backend", name, "provision", "--ledger", "/proc/x",
                                                         "--json"))
    (tmp_path / "f").write_text("x")
    one_line_254(*chaos(capsys, "backend", "sqlite", "provision", "--ledger", tmp_path / "f", "--json"))
    one_line_254(*chaos(capsys, "backend", "sqlite", "provision", "--ledger", tmp_path / "l", "--json",
                        "--write-paths", "{x"))


# ------------------------------------------------------------------ matrices


def _matrix(tmp_path, **members) -> str:
    doc = {"name": "m", "backends": ["sqlite"], "seeds": [1], "time_limit": 1, "workers": 1, **members}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_matrix_that_is_a_binary_file(capsys):
    assert "not UTF-8" in one_line_254(*chaos(capsys, "test-all", "--matrix", sys.executable, "--dry-run"))


def test_matrix_workloads_must_be_a_list_of_names(capsys, tmp_path):
    for bad in (5, "claims", [5], []):
        line = one_line_254(*chaos(capsys, "test-all", "--matrix", _matrix(tmp_path, workloads=bad), "--dry-run"))
        assert "workloads" in line


def test_matrix_alias_bomb_fails_fast_in_one_line(capsys, tmp_path):
    levels = ["  - &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"  - &{name} [{', '.join([f'*{prev}'] * 9)}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("name: bomb\nbackends: [sqlite]\nseeds: [1]\nworkloads:\n" + "\n".join(levels) + "\n")
    assert path.stat().st_size < 500
    started = time.monotonic()
    line = one_line_254(*chaos(capsys, "test-all", "--matrix", path, "--dry-run"))
    assert time.monotonic() - started < 2 and "limit" in line


def test_matrix_junit_in_a_missing_directory_is_refused_before_any_run(capsys, tmp_path):
    store = tmp_path / "store"
    line = one_line_254(*chaos(capsys, "test-all", "--matrix", _matrix(tmp_path), "--store", store,
                               "--junit", "/nonexistent/x.xml"))
    assert "--junit" in line
    assert not any(p.is_dir() for p in store.glob("*")) if store.exists() else True  # no run was made


def test_matrix_store_that_is_a_file_is_refused(capsys, tmp_path):
    (tmp_path / "f").write_text("x")
    one_line_254(*chaos(capsys, "test-all", "--matrix", _matrix(tmp_path), "--store", tmp_path / "f"))


# ------------------------------------------------------------------ stored runs


def test_check_write_with_a_results_test_that_is_not_an_object(capsys, tmp_path):
    import json

    run_dir = make_run(str(tmp_path), verdict="valid")
    path = os.path.join(run_dir, "results.json")
    doc = json.load(open(path))
    doc["test"] = "x"
    json.dump(doc, open(path, "w"))
    code, err = chaos(capsys, "check", run_dir, "--write", "--no-linearizable")
    assert code in (0, 1, 2) and "Traceback" not in err
    assert "test has the wrong type" in open(os.path.join(run_dir, "report.html")).read()


def test_check_with_a_results_json_over_its_limit_or_not_json(capsys, tmp_path):
    run_dir = make_run(str(tmp_path), verdict="valid")
    with open(os.path.join(run_dir, "results.json"), "wb") as f:
        f.write(b"[" * 200_000)
    assert "results" in one_line_254(*chaos(capsys, "check", run_dir))


# ------------------------------------------------------------------ external programs


def _script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def _fast_profile(tmp_path, timeout_s: float) -> str:
    doc = yaml.safe_load(open(os.path.join(ROOT, "profiles", "chaos-sqlite.yaml")))
    doc["timeout_s"] = timeout_s
    path = tmp_path / "fast.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("body", [
    'echo "this is not json"',                   # garbage on stdout
    'echo "oops" >&2; exit 3',                   # only stderr
    'kill -9 $$',                                # dies by SIGKILL (exit 137)
    "head -c 100000000 /dev/zero | tr '\\0' a",  # 100 MB of output
    "sleep 1000",                                # never exits
], ids=["garbage", "stderr-only", "sigkill", "100MB", "never-exits"])
def test_external_program_that_fails_its_set_up(tmp_path, body):
    cmd = _script(tmp_path, "prog.sh", body)
    started = time.monotonic()
    code, err = chaos_sub("run", "--backend", "external", "--command", cmd, "--profile", _fast_profile(tmp_path, 3),
                          "--store", tmp_path / "s", *QUICK)
    assert "external backend setup failed" in one_line_254(code, err)
    assert time.monotonic() - started < 60


# ------------------------------------------------------------------ the classification itself


def test_a_real_bug_is_still_255_with_its_traceback(capsys, monkeypatch):
    from chaos.commands import doctor

    def broken(args):
        return {}["no such key"]

    monkeypatch.setattr(doctor, "run", broken)
    code, err = chaos(capsys, "doctor")
    assert code == 255 and "Traceback" in err and "KeyError" in err


def test_input_errors_print_one_bounded_line(capsys, monkeypatch):
    from chaos.commands import doctor
    from chaos.errors import SetupFailed

    def noisy(args):
        raise SetupFailed("first line\nsecond line\n" + "x" * 100_000)

    monkeypatch.setattr(doctor, "run", noisy)
    line = one_line_254(*chaos(capsys, "doctor"))
    assert "first line | second line" in line and "more characters" in line


def test_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = capsys.readouterr().out
    assert "exit codes:" in top and "254" in top and "255" in top
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    assert "2    unknown" in out and "254" in out
    with pytest.raises(SystemExit):
        cli.main(["backend", "--help"])
    assert "the contract's exit code" in capsys.readouterr().out


@pytest.mark.parametrize("members, needle", [
    ({"time_limit": "abc"}, "time_limit must be"),
    ({"time_limit": float("nan")}, "--time-limit nan"),
    ({"workers": 0}, "--workers"),
    ({"op_timeout": -1}, "--op-timeout"),
    ({"name": "../x"}, "name"),
    ({"claims": {"nosuch": 1}}, "claims"),
    ({"nemesis": [5]}, "nemesis"),
])
def test_run_config_file_with_bad_members(capsys, tmp_path, members, needle):
    doc = {"name": "t", "backend": "sqlite", "workload": "claims", "nemesis": [], "workers": 1, "time_limit": 1,
           "seed": 1, **members}
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(doc))
    line = one_line_254(*chaos(capsys, "run", "--config", path, "--store", tmp_path / "s"))
    assert needle in line
    assert not (tmp_path / "s").exists()


def test_run_config_file_alias_bomb(capsys, tmp_path):
    path = tmp_path / "test.yaml"
    rows = ["claims:", "  a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        rows.append(f"  {name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    path.write_text("\n".join(rows) + "\n")
    assert "limit" in one_line_254(*chaos(capsys, "run", "--config", path, "--store", tmp_path / "s"))


@pytest.mark.parametrize("members, needle", [
    ("workers: 1000", "--workers"),
    ("time_limit: 1.0e+300", "--time-limit"),
    ("nemesis: [nosuch]", "unknown nemesis nosuch"),
    ("name: ../../x", "scenario name '../../x'"),
    ("nemesis_opts: {pause_ms: [5, 1]}", "nemesis_opts"),
    ("claims: {lease_ms: -1}", "claims.lease_ms"),
])
def test_scenario_file_with_bad_members_is_named_in_one_line(capsys, tmp_path, members, needle):
    path = tmp_path / "sc.yaml"
    key = members.split(":")[0]
    path.write_text("".join(f"{k}: x\n" for k in ("name", "description") if k != key) + members + "\n")
    line = one_line_254(*chaos(capsys, "run", "--scenario", path, "--store", tmp_path / "s"))
    assert needle in line and ("scenario" in line), line
    assert not (tmp_path / "s").exists()


# ------------------------------------------------------------------ profiles

BAD_PROFILES = {"argv: 5": "argv", "busy: 5": "busy", "admin: 7": "admin", 'timeout_s: "abc"': "timeout_s"}


def _profile(tmp_path, member: str) -> str:
    doc = open(os.path.join(ROOT, "profiles", "chaos-sqlite.yaml")).read()
    key = member.split(":")[0]
    kept = [ln for ln in doc.splitlines() if not ln.startswith(key + ":")
            and not (key in ("argv", "admin", "busy") and ln.startswith("  ") and _in_block(doc, ln, key))]
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(kept) + f"\n{member}\n")
    return str(path)


def _in_block(doc: str, line: str, key: str) -> bool:
    """``line`` is an indented line of the top-level block ``key:``."""
    current = None
    for ln in doc.splitlines():
        if ln and not ln.startswith((" ", "#")):
            current = ln.split(":")[0]
        if ln == line:
            return current == key
    return False


@pytest.mark.parametrize("member", sorted(BAD_PROFILES))
def test_profile_of_the_wrong_types_is_a_config_error_for_run_and_conform(capsys, tmp_path, member):
    profile = _profile(tmp_path, member)
    assert BAD_PROFILES[member] in one_line_254(*chaos(capsys, "run", "--backend", "external", "--command",
                                                       "python -m chaos.cli backend sqlite", "--profile", profile,
                                                       "--store", tmp_path / "s", *QUICK))
    assert not (tmp_path / "s").exists()
    code, err = chaos(capsys, "conform", "--backend", "external", "--command", "python -m chaos.cli backend sqlite",
                      "--profile", profile, "--case", "renew-release-restart-aba")
    assert BAD_PROFILES[member] in one_line_254(code, err)   # a config error, not every case "failed"


def test_a_bad_store_is_refused_before_a_factory_is_probed(tmp_path, monkeypatch, capsys):
    """The fuzz test's find: ``--factory os:getcwd --store FILE/x`` probed the
    factory on a scratch directory in /tmp before refusing the store."""
    from chaos.cli import main
    from chaos.conform.adapters import python as adapter

    probed = []
    monkeypatch.setattr(adapter, "probe", lambda factory: probed.append(factory) or "store")
    (tmp_path / "f").write_text("a file")
    code = main(["run", "--store", str(tmp_path / "f" / "x"), "--backend", "python", "--factory", "os:getcwd",
                 "--time-limit", "1"])
    assert code == 254 and probed == []
    assert capsys.readouterr().err.count("chaos: error: --store") == 1
