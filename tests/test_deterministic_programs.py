"""Which black-box programs the deterministic mode runs, decided from the program file
(``chaos.deterministic.programs``): any dynamically linked program of this machine's kind, its threads
controlled; a static binary, a Go program or one of another machine refused up front with the reason.
Real programs: built here with gcc, or this machine's own."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chaos.deterministic.programs import control

ROOT = Path(__file__).resolve().parents[1]
PROFILE = str(ROOT / "profiles" / "chaos-sqlite-blackbox.yaml")
#: a program that needs no C library: exit(0) through the system call
NO_LIBC = 'void _start(void) { __asm__ volatile("mov $60, %eax\\n xor %edi, %edi\\n syscall"); }\n'
GO_NOTE = '__attribute__((section(".note.go.buildid"), used)) static const char id[] = "x";\nint main(void) { return 0; }\n'

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the programs")


def _gcc(tmp_path: Path, name: str, source: str, *flags: str) -> str:
    (tmp_path / f"{name}.c").write_text(source)
    subprocess.run(["gcc", *flags, "-o", str(tmp_path / name), str(tmp_path / f"{name}.c")], check=True)
    return str(tmp_path / name)


def _script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


@needs_gcc
def test_a_dynamically_linked_program_is_controlled_a_static_or_go_one_is_not(tmp_path):
    ok, what = control(sys.executable)
    assert ok and "a dynamically linked program" in what, what
    static = _gcc(tmp_path, "static", NO_LIBC, "-nostdlib", "-static")
    assert subprocess.run([static]).returncode == 0   # it runs; the shim just cannot load into it
    assert control(static) == (False, f"{static}: a static binary: it has no dynamic loader, so no preload "
                                      "library (the shim) loads into it")
    ok, what = control(_gcc(tmp_path, "gofake", GO_NOTE))
    assert not ok and "a Go program" in what, what
    ok, what = control(_gcc(tmp_path, "plain", "int main(void) { return 0; }\n"))
    assert ok, what


def test_a_program_of_another_machine_or_no_program_is_refused(tmp_path):
    i386 = tmp_path / "i386"
    i386.write_bytes(b"\x7fELF\x01\x01\x01" + bytes(11) + (3).to_bytes(2, "little") + bytes(44))
    i386.chmod(0o755)
    ok, what = control(str(i386))
    assert not ok and "32-bit program for ELF machine 3" in what, what
    assert control(_script(tmp_path, "text", "echo hi\n"))[1].endswith(
        "neither an ELF program nor a #! script: what runs it is not known")
    assert control("no-such-program-here --x") == (False, "no-such-program-here: not found (on PATH or as a path)")
    assert control("") == (False, "no --command: which program runs is not known")
    assert control("'abc")[0] is False


@needs_gcc
def test_a_script_is_judged_by_the_program_its_hash_bang_line_runs(tmp_path):
    ok, what = control(_script(tmp_path, "py", f"#!/usr/bin/env -S {Path(sys.executable).name} -u\nprint(1)\n"))
    assert ok and "(run by py" in what, what
    static = _gcc(tmp_path, "static", NO_LIBC, "-nostdlib", "-static")
    ok, what = control(_script(tmp_path, "wrapper", f"#!{static}\n"))
    assert not ok and what.startswith(f"{static} (run by wrapper): a static binary"), what
    ok, what = control(_script(tmp_path, "env-missing", "#!/usr/bin/env no-such-interpreter\n"))
    assert not ok and "no-such-interpreter not found on PATH" in what, what


def test_the_suites_own_cli_is_judged_as_the_suite_runs_it():
    """``chaos backend ...`` is this interpreter running ``chaos.cli`` (``resolve_command``), whether or
    not a ``chaos`` is on PATH."""
    from chaos.sut.external import SUT

    row = SUT.abilities({"command": "chaos backend sqlite", "profile": PROFILE})["deterministic"]
    assert row.ok and "every thread of it controlled" in row.how, row.how


def _run(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--store", str(store), "--no-report", *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.slow
def test_a_program_with_threads_runs_deterministically_by_default(tmp_path):
    """The contract CLI with each call served by a thread it starts: with no mode flag the run is the
    deterministic one; two runs at once, in stores of two path lengths, write one history and one
    results.json (the store's path aside), and every kill took effect, at a point inside a call."""
    args = ("--backend", "external", "--command", f"python {ROOT / 'tests' / 'threaded_contract_cli.py'}",
            "--profile", PROFILE, "--seed", "3", "--workers", "2", "--time-limit", "2", "--nemesis", "kill")
    stores = [tmp_path / "s", tmp_path / ("long" * 8)]
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda s: _run(s, *args), stores))
    for p in done:
        assert p.returncode == 0, p.stderr[-2000:]
        assert "timed mode" not in p.stderr, p.stderr[-2000:]
    paths = [next(s.glob("*/2*/results.json")) for s in stores]
    results = [json.loads(p.read_text()) for p in paths]
    assert results[0]["verdict"] == "valid" and "--deterministic" in results[0]["test"]["command"]
    assert len({p.read_text().replace(str(s), "STORE") for p, s in zip(paths, stores)}) == 1
    kill = results[0]["fault_coverage"]["kill"]
    assert kill["took_effect"] == kill["fired"] == 2, kill
    assert not results[0]["deterministic"]["notes"], results[0]["deterministic"]["notes"]


@needs_gcc
def test_a_static_program_is_refused_up_front_and_runs_timed_by_default(tmp_path):
    static = _gcc(tmp_path, "static", NO_LIBC, "-nostdlib", "-static")
    args = ("--backend", "external", "--command", static, "--profile", PROFILE, "--time-limit", "1")
    refused = _run(tmp_path / "a", "--deterministic", *args)
    assert refused.returncode == 254 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith(f"chaos: error: --deterministic: --backend external: the scheduling shim "
                                     f"cannot control this program: {static}: a static binary"), refused.stderr
    timed = _run(tmp_path / "b", *args)   # its replies are empty: the timed run stops at set-up, in one line
    assert "chaos: timed mode, not deterministic: --backend external: the scheduling shim cannot control this " \
           f"program: {static}: a static binary" in timed.stderr, timed.stderr
    assert timed.returncode == 254 and "Traceback" not in timed.stderr, timed.stderr


#: a parent that runs a shell three times, each leaving a background child and exec'ing the program that
#: writes the store: the shell forks and execs with no stop between ("cmd & exec prog")
BACKGROUND_PARENT = """
import os, signal, subprocess, sys
store, name = sys.argv[1], sys.argv[2]
for i in range(3):
    write = f"open('{store}/{name}{i}', 'w').write('x')"
    p = subprocess.Popen(["sh", "-c", f'sleep 600 & exec {sys.executable} -c "{write}"'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    p.wait()
    os.killpg(p.pid, signal.SIGKILL)   # the call is over: its background child with it
"""


@pytest.mark.parametrize("threads", [False, True])
def test_a_shell_that_leaves_a_child_and_execs_its_program_has_one_schedule(tmp_path, threads):
    """The shell forks the background child and execs the program with no stop between: it says so at an
    "exec" point, so the child's hello comes before the new image's (they came in either order, and the
    scheduler decided between them); and the old image's connection, read after the new image said hello,
    no longer ends the new image's slice ("reached creat #1 while another thread ran"). Two parents, three
    seeds, each run twice: one trace per seed, no unserialized concurrency."""
    from chaos.deterministic.scheduler import Scheduler
    from chaos.deterministic.shim import THREADS_ENV

    parent = _script(tmp_path, "parent.py", BACKGROUND_PARENT)
    for seed in (1, 2, 3):
        traces = set()
        for run in range(2):
            store = tmp_path / f"store-{seed}-{run}"
            store.mkdir()
            with Scheduler(seed, prefixes=[str(store)], stuck_s=30) as s:
                for name in ("a", "b"):
                    s.spawn(name, [sys.executable, parent, str(store), name], env=THREADS_ENV if threads else None)
                s.run_all()
                summary = s.summary()
            assert not summary["notes"], summary["notes"]
            assert any(" exec " in line for line in s.trace), "the shells' exec points"
            assert sorted(p.name for p in store.iterdir()) == [f"{n}{i}" for n in "ab" for i in range(3)]
            traces.add(summary["trace_sha256"])
        assert len(traces) == 1, (seed, traces)
