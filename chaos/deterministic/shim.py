"""Build the scheduling shim (``sched.c``) once per source version, like the other preload shims
(``chaos.faults.failsync.build_shim``), and the environment a scheduled process runs with."""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from pathlib import Path

from chaos.faults.failsync import build_shim

SOURCE = Path(__file__).with_name("sched.c")

#: CLOCK_REALTIME at virtual time 0 (2026-01-01T00:00:00Z): every run starts its clocks here
EPOCH_NS = 1_767_225_600 * 10**9
#: CLOCK_MONOTONIC at virtual time 0
MONO_NS = 1000 * 10**9


#: what a black-box program runs with (``host.py``): every thread controlled (its futex waits and epoll
#: are scheduler waits: a Python program's threads, Node's libuv pool and V8's helpers), one libuv pool
#: thread, no io_uring (which would bypass every interposed call)
THREADS_ENV = {"CHAOS_SCHED_THREADS": "1", "UV_THREADPOOL_SIZE": "1", "UV_USE_IO_URING": "0"}
#: and a Node program: a virtual pid, the same in every run (Wowbagger hashes its pid into temp names and
#: writes it in lock files: sched.c, "pids"); its start flies (``flights``). Not every program: a Python
#: program that looks itself up in /proc (psutil) would look up the virtual pid, which the shim refuses.
#: Its schedule repeats (docs/deterministic.md).
THREADED_ENV = {**THREADS_ENV, "CHAOS_SCHED_VPIDS": "1"}


@functools.cache
def build() -> str:
    """The shim's .so path (compiled with the system gcc on first use), once per process: every
    process of a run preloads the one it started with, even if the source changes meanwhile."""
    return build_shim(SOURCE, "chaos-sched")


def alone_env(name: str, threads: bool = False) -> dict:
    """What a program started outside the scheduler (a run's set-up: provision, the seeding commit)
    runs with: clocks at the virtual epoch, randomness seeded from ``name``; ``threads``: ASLR off
    too (a program whose randomness mixes in addresses, Node's OpenSSL)."""
    return {"LD_PRELOAD": build(), "CHAOS_SCHED_ALONE": name, "CHAOS_SCHED_EPOCH_NS": str(EPOCH_NS),
            "CHAOS_SCHED_MONO_NS": str(MONO_NS), **({"CHAOS_SCHED_THREADS": "1"} if threads else {})}


@contextmanager
def own_stream(label: str):
    """Inside a deterministic run's set-up (``alone_env`` in this process's environment), the programs
    started here draw their randomness from a stream of their own, ``<name>/<label>``, still the same in
    every run: two provisions that each mint a namespace mint two (on one stream both minted the same,
    and the run's ledgers, agents and racers all shared that one namespace). Elsewhere: nothing."""
    base = os.environ.get("CHAOS_SCHED_ALONE")
    if not base:
        yield
        return
    os.environ["CHAOS_SCHED_ALONE"] = f"{base}/{label}"
    try:
        yield
    finally:
        os.environ["CHAOS_SCHED_ALONE"] = base


#: the harness's variables a controlled process keeps (``stable_env``): what finds programs and their
#: libraries, a user's identity, configuration and locale, and settings meant for the suite, git, Node
#: or Python
KEPT_VARS = frozenset({"PATH", "LD_LIBRARY_PATH", "HOME", "XDG_CONFIG_HOME", "USER", "LOGNAME", "LANG", "TZ",
                       "TMPDIR"})
KEPT_PREFIXES = ("LC_", "CHAOS_", "GIT_", "NODE_", "PYTHON")
#: where ``chaos`` is imported from (the directory holding the package)
CHAOS_ROOT = str(Path(__file__).resolve().parents[2])


def stable_env(environ=None) -> dict:
    """The environment every process of a deterministic run starts from, the set-up's programs
    included: the kept variables of ``environ`` (``os.environ``), nothing else, and ``PYTHONPATH``
    led by the directory ``chaos`` is imported from. Whatever else the harness was started with (its
    shell's, pytest's, a trace file's name) would change the history: a Node program's heap holds its
    environment, so where V8 collects garbage (and reads the clock) moves with its size (a 10-worker
    Wowbagger run's first lock token differed with one variable more), and a worker host started in a
    checkout imports ``chaos`` by another path than one started elsewhere (its first slice read the
    clock twice more)."""
    environ = os.environ if environ is None else environ
    kept = {k: v for k, v in environ.items()
            if (k in KEPT_VARS or k.startswith(KEPT_PREFIXES)) and not k.startswith("CHAOS_SCHED_")}
    kept["PYTHONPATH"] = os.pathsep.join([CHAOS_ROOT] + ([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else []))
    return kept


def env(sock: str, name: str, prefixes: list[str], reads: bool = False) -> dict:
    """What a process needs to run under the scheduler listening on ``sock``:
    ``name`` is its logical name in traces (never its pid, which differs
    between runs); ``prefixes`` are the store paths whose calls are points;
    ``reads``: reads of store fds are points too."""
    return {"LD_PRELOAD": build(), "CHAOS_SCHED_SOCK": sock, "CHAOS_SCHED_NAME": name,
            "CHAOS_SCHED_PREFIX": ":".join(prefixes), "CHAOS_SCHED_EPOCH_NS": str(EPOCH_NS),
            "CHAOS_SCHED_MONO_NS": str(MONO_NS), "CHAOS_SCHED_READS": "1" if reads else "0",
            "PYTHONHASHSEED": "0"}
