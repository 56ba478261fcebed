"""``chaos run``: run a workload against a backend under faults and check it.

Defaults: embedded SQLite, the ``claims`` workload, the deterministic mode
where it can run (else the timed one, saying why), every nemesis the mode
and backend support here, 10 workers, 30 s of workload plus the final phase.
Backends: ``sqlite``; ``postgres`` (our own server, or
``--dsn`` for yours: then only a fresh schema is created and dropped, and the
server is never faulted); ``gitjournal`` (a git repo in the run dir);
``external --command '...' [--profile FILE]`` (any contract CLI). Which
nemeses hit what, per backend: ``chaos doctor``. Same ``--seed`` -> the same history in the
deterministic mode; the same operation and fault schedule (``schedule.jsonl``) in the timed one, whose
outcomes may differ. Exit code = verdict (0 valid,
1 invalid, 2 unknown; 130 interrupted).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys

from backends import safeload
from chaos.errors import UsageError
from chaos.store import check_name, refuse_unusable_dir, writable_dir

#: the longest --time-limit / --op-timeout accepted (a week; more is a typo)
MAX_SECONDS = 7 * 24 * 3600
#: --op-timeout unless given (seconds; raised for a slow backend in the timed mode)
DEFAULT_OP_TIMEOUT = 8.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    from chaos import sut

    p.add_argument("--backend", default="sqlite", help=f"one of {', '.join(sut.names(runs=True))} (default sqlite)")
    p.add_argument("--factory", default=None,
                   help='python: "module:function" opening your backend class (docs/backend-authors.md); '
                        "it gets the run's SQLite file path in spec['path'] (with --backend postgres: the "
                        "run's dsn and schema)")
    p.add_argument("--dsn", default=None,
                   help="postgres: use this server (a fresh schema is created and dropped; the server itself is "
                        "never killed, paused or fsync-faulted). Default: start our own server")
    p.add_argument("--command", dest="backend_command", default=None,
                   help="external: the contract CLI command line (e.g. 'python -m chaos.cli backend sqlite'; "
                        "a leading python/python3 or chaos means this interpreter)")
    p.add_argument("--profile", default=None, help="external: the profile YAML (default profiles/chaos-sqlite.yaml)")
    p.add_argument("--workload", default="claims",
                   help="claims (the work-claim contract, default) or issue-lock (the issue-lock contract; "
                        "backends sqlite, gitfile, external, python)")
    p.add_argument("--nemesis", default=None,
                   help="comma-separated faults: kill,pause,clock,fsync,lost-reply,restart; 'none' for no faults "
                        "(default: every one the backend supports here)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default 10)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds of workload (default 30)")
    p.add_argument("--seed", type=int, default=None, help="seed (default: random, recorded in test.yaml)")
    p.add_argument("--scenario", default=None, help="a scenario YAML file or built-in name")
    p.add_argument("--store", default=None,
                   help="root of run directories (default ./store; with --config, the store its run was made in, "
                        "while it is there)")
    p.add_argument("--name", default=None, help="test name (run dir store/<name>/<timestamp>)")
    p.add_argument("--op-timeout", type=float, default=None,
                   help="deadline per operation in seconds (default 8, raised for slow backends): the timed "
                        "mode's; the deterministic mode has none, so another value runs the timed mode")
    p.add_argument("--scale", type=float, default=None,
                   help="multiply lease, work and backoff times by this (default: measured from the backend's "
                        "call latency at start; recorded so a run reproduces)")
    p.add_argument("--nodes", choices=("local", "docker"), default="local",
                   help="docker: the PostgreSQL server and every worker in containers of a Docker daemon "
                        "($DOCKER_HOST or --docker-host; docs/faults.md); kill, pause, restart through its API")
    p.add_argument("--docker-host", default=None, help="the Docker daemon for --nodes docker (default $DOCKER_HOST)")
    p.add_argument("--node-memory", default=None, help="--nodes docker: memory limit of every container (e.g. 512m)")
    p.add_argument("--node-cpus", type=float, default=None, help="--nodes docker: CPU limit of every container")
    p.add_argument("--config", default=None,
                   help="run exactly this test.yaml (a stored run's, or chaos shrink's minimal one, with its "
                        "explicit fault list); only --store and --name apply on top")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--deterministic", action="store_true", default=None,
                      help="same seed, same history: every worker under one scheduler (PCT) on a virtual clock, "
                           "faults (kill, pause, clock, fsync, lost-reply) at exact scheduling points "
                           "(docs/deterministic.md). The default wherever it can run (claims on sqlite, python, "
                           "gitjournal, the suite's own CLI as a black box and Wowbagger, with exact faults only); "
                           "this flag refuses a run it cannot make deterministic instead of running it timed")
    mode.add_argument("--timed", dest="deterministic", action="store_false",
                      help="the timed mode: real processes on the real clock, faults by timers (every nemesis, "
                           "every backend; the same seed gives the same fault schedule, not the same history)")
    p.add_argument("--pct-depth", type=int, default=3,
                   help="--deterministic: PCT depth d (d - 1 priority change points; default 3)")
    p.add_argument("--pct-points", type=int, default=None,
                   help="--deterministic: draw PCT's change points over this many scheduling points (default: "
                        "over the time limit, as virtual instants; docs/deterministic.md)")
    p.add_argument("--no-report", dest="report", action="store_false",
                   help="skip report.html (its plots cost seconds; results.json, junit.xml and the history are "
                        "written as always), as chaos shrink's replays do")


def build_config(args: argparse.Namespace):
    """The run ``args`` ask for. Neither ``--deterministic`` nor ``--timed``: the deterministic mode
    where it can run (``chaos.deterministic.plan.refusal``), else the timed one, saying why on stderr."""
    mode = getattr(args, "deterministic", None)
    deadline = getattr(args, "op_timeout", None)
    if deadline is not None:
        check_limits(1, 1.0, deadline)   # a bad value is its own one-line error, whatever the mode
    timed_flag = (None if deadline is None or deadline == DEFAULT_OP_TIMEOUT else
                  f"--op-timeout {deadline:g}: the deterministic mode has no per-op deadline (a call ends where "
                  f"the schedule gets it; a run that cannot go on ends unknown)")
    if mode is True and timed_flag:
        raise UsageError(f"--deterministic: {timed_flag}")
    if mode is not None:
        return _build_config(args, mode)
    if getattr(args, "pct_depth", 3) != 3 or getattr(args, "pct_points", None) is not None:
        return _build_config(args, True)   # PCT's flags ask for the deterministic mode
    from chaos.deterministic.plan import refusal

    cfg = None if timed_flag else _build_config(args, True)
    why = timed_flag or refusal(cfg)
    if why is None:
        return cfg
    print(f"chaos: timed mode, not deterministic: {why.removeprefix('--deterministic: ')}", file=sys.stderr)
    return _build_config(args, False)


def _build_config(args: argparse.Namespace, deterministic: bool):
    """The run's ``RunConfig`` from its flags and its scenario, in one mode; a bad value is a
    ``UsageError`` (one line, exit 254) before anything starts."""
    from chaos.random import fresh_seed
    from chaos.runner import RunConfig
    from workloads import scenario as scenarios

    from chaos import sut
    from chaos.workload_kinds import workload_kind

    kind = workload_kind(args.workload)
    backend = sut.get(args.backend, runs=True)
    if kind.protocol not in backend.protocols:
        raise UsageError(f"--backend {args.backend} does not run the {kind.protocol} protocol "
                         f"(--workload {args.workload}); it runs: {', '.join(backend.protocols)}")
    dsn = getattr(args, "dsn", None)
    command = getattr(args, "backend_command", None)
    factory = getattr(args, "factory", None)
    profile = getattr(args, "profile", None)
    nodes = getattr(args, "nodes", "local") or "local"
    opts = {"dsn": dsn, "command": command, "profile": profile, "factory": factory, "protocol": kind.protocol,
            "nodes": None if nodes == "local" else nodes}
    backend.check(opts)
    if nodes == "docker":
        from chaos.nodes.docker import reachable

        ok, why = reachable(getattr(args, "docker_host", None))
        if not ok:
            raise UsageError(f"--nodes docker: {why}")
    elif getattr(args, "docker_host", None) or getattr(args, "node_memory", None) or getattr(args, "node_cpus", None):
        raise UsageError("--docker-host, --node-memory and --node-cpus are for --nodes docker")
    if profile and not os.path.isfile(profile):
        raise UsageError(f"--profile {profile}: no such file")
    sc: dict = {}
    if args.scenario:
        try:
            sc = scenarios.load(args.scenario)
        except ValueError as e:
            raise UsageError(str(e)) from None
    from_scenario = f"scenario {args.scenario}: " if sc else ""
    if sc:  # a scenario file is checked whole, named in the error, even where a flag overrides a member
        check_limits(sc.get("workers", 1), sc.get("time_limit", 1.0), 0, from_scenario)
    names = _nemeses(args, sc, opts, deterministic, from_scenario)
    workers = args.workers if args.workers is not None else sc.get("workers", 10)
    time_limit = args.time_limit if args.time_limit is not None else sc.get("time_limit", 30.0)
    op_timeout = args.op_timeout if args.op_timeout is not None else DEFAULT_OP_TIMEOUT
    check_limits(workers, time_limit, op_timeout)
    check_scale(args.scale)
    seed = args.seed if args.seed is not None else fresh_seed()
    if args.name is not None:
        name = check_name(args.name, "--name")
    else:
        name = check_name(sc.get("name") or f"{args.workload}-{args.backend}",
                          "scenario name" if sc.get("name") else "test name")
    pct_depth, pct_points = getattr(args, "pct_depth", 3), getattr(args, "pct_points", None)
    if not deterministic and (pct_depth != 3 or pct_points is not None):
        raise UsageError("--pct-depth and --pct-points are for the deterministic mode, not --timed")
    pct = (pct_depth, pct_points) if deterministic else None
    argv = _reproduce_argv(args, opts, names, workers, time_limit, seed, op_timeout, name, pct)
    return RunConfig(name=name, backend=args.backend, workload=args.workload, nemesis=names, workers=workers,
                     time_limit=float(time_limit), seed=seed, store=args.store, op_timeout=float(op_timeout),
                     scale=args.scale, auto_workers=args.workers is None and "workers" not in sc,
                     auto_time_limit=args.time_limit is None and "time_limit" not in sc,
                     auto_op_timeout=args.op_timeout is None,
                     claims=dict(sc.get("claims", {})), nemesis_opts=dict(sc.get("nemesis_opts", {})),
                     issuelock=dict(sc.get("issuelock", {})),
                     scenario=args.scenario, command=shlex.join(argv), dsn=dsn,
                     profile=os.path.abspath(profile) if profile else None, backend_command=command,
                     factory=factory, nodes=nodes, docker_host=getattr(args, "docker_host", None),
                     node_memory=getattr(args, "node_memory", None), node_cpus=getattr(args, "node_cpus", None),
                     deterministic=deterministic,
                     pct_depth=pct_depth, pct_points=pct_points)


def _nemeses(args, sc: dict, opts: dict, deterministic: bool, from_scenario: str) -> list[str]:
    """The run's faults: --nemesis, else the scenario's, else every one the backend supports here (in
    the deterministic mode, those it has at exact points); a name unknown or not available here is a
    ``UsageError``."""
    from chaos.nemesis import NEMESES, support, supported

    if args.nemesis is not None:
        names = [] if args.nemesis.strip() in ("", "none") else [n.strip() for n in args.nemesis.split(",")]
    elif "nemesis" in sc:
        names = sc["nemesis"]
    else:
        names = supported(args.backend, dict(opts, **sc.get("nemesis_opts", {})))
        if deterministic:
            from chaos.deterministic.plan import DEFAULT_FAULTS, SCHEDULER_FAULTS

            names = [n for n in DEFAULT_FAULTS if n in names or n in SCHEDULER_FAULTS]
    unknown = [n for n in names if n not in NEMESES.keys()]
    if unknown:
        where = from_scenario if args.nemesis is None else ""
        raise UsageError(f"{where}unknown nemesis {', '.join(unknown)} (known: {', '.join(sorted(NEMESES.keys()))})")
    table = support(args.backend, dict(opts, **sc.get("nemesis_opts", {})))
    bad = [f"{n} ({table[n][1]})" for n in names
           if not table[n][0] and not _scheduler_fault(n, deterministic)]
    if bad:
        raise UsageError(f"nemesis not available with --backend {args.backend} here: {'; '.join(bad)}")
    return names


def _reproduce_argv(args, opts: dict, names: list[str], workers: int, time_limit: float, seed: int,
                    op_timeout: float, name: str, pct: tuple[int, int | None] | None) -> list[str]:
    """The ``chaos run`` line that reproduces this run (test.yaml's ``command``): every choice made
    explicit, its mode too whatever the default (``pct``: the deterministic mode's PCT depth and points,
    None for the timed mode), and no password. ``opts``: the backend's options as ``_build_config`` read
    them."""
    argv = ["chaos", "run", "--backend", args.backend, "--workload", args.workload,
            "--nemesis", ",".join(names) or "none", "--workers", str(workers), "--time-limit", str(time_limit),
            "--seed", str(seed), "--op-timeout", f"{op_timeout:g}", "--name", name, "--store", args.store]
    if args.scenario:
        argv += ["--scenario", args.scenario]
    if opts["dsn"]:
        from chaos.sut.base import redact_dsn

        argv += ["--dsn", redact_dsn(opts["dsn"])]  # never record a password; supply it again to reproduce
    for flag, key in (("--command", "command"), ("--factory", "factory"), ("--profile", "profile")):
        if opts[key]:
            argv += [flag, opts[key]]
    if pct is not None:
        argv += ["--deterministic", "--pct-depth", str(pct[0])]
        if pct[1] is not None:
            argv += ["--pct-points", str(pct[1])]
    else:
        argv += ["--timed"]   # the reproduce line keeps its mode whatever the default
    if opts["nodes"]:
        argv += ["--nodes", opts["nodes"]]
        for flag, value in (("--docker-host", getattr(args, "docker_host", None)),
                            ("--node-memory", getattr(args, "node_memory", None)),
                            ("--node-cpus", getattr(args, "node_cpus", None))):
            if value is not None:
                argv += [flag, str(value)]
    return argv


def check_limits(workers, time_limit, op_timeout, where: str = "") -> None:
    """The numbers of a run, from flags, a scenario or a test.yaml (``UsageError``, one line)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 200:
        raise UsageError(f"{where}--workers must be an integer between 1 and 200")
    for flag, value, low_ok in (("--time-limit", time_limit, False), ("--op-timeout", op_timeout, True)):
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or not (0 <= value if low_ok else 0 < value) or value > MAX_SECONDS):
            shown = f"{value:g}" if isinstance(value, float) else repr(value)
            raise UsageError(f"{where}{flag} {shown}: must be a number of seconds in "
                             f"{'[' if low_ok else '('}0, {MAX_SECONDS}]")


def check_scale(scale, where: str = "") -> None:
    """``--scale`` or a test.yaml's ``scale``: null, or a number in (0, 1000]."""
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not math.isfinite(scale) or not 0 < scale <= 1000):
        raise UsageError(f"{where}{'scale' if where else '--scale'} {scale!r}: must be a positive number (at most 1000)")


#: test.yaml member -> the types it may hold (``--config``)
CONFIG_TYPES = {"name": (str,), "backend": (str,), "workload": (str,), "nemesis": (list,), "workers": (int,),
                "time_limit": (int, float), "seed": (int,), "store": (str,), "op_timeout": (int, float),
                "claims": (dict,), "issuelock": (dict,), "nemesis_opts": (dict,), "scenario": (str, type(None)),
                "command": (str,), "fsync_history": (bool,), "dsn": (str, type(None)), "profile": (str, type(None)),
                "backend_command": (str, type(None)), "factory": (str, type(None)), "faults": (list, type(None)),
                "scale": (int, float, type(None)), "auto_workers": (bool,), "auto_time_limit": (bool,),
                "auto_op_timeout": (bool,), "timing": (dict,),
                "nodes": (str,), "docker_host": (str, type(None)), "node_memory": (str, type(None)),
                "node_cpus": (int, float, type(None)), "deterministic": (bool,), "pct_depth": (int,),
                "pct_points": (int, type(None))}


def _check_config_types(data: dict, where: str) -> None:
    for key, value in data.items():
        types = CONFIG_TYPES.get(key)
        if types and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            raise UsageError(f"{where}{key} must be {' or '.join('null' if t is type(None) else t.__name__ for t in types)}, "
                             f"not {type(value).__name__}")
    if not all(isinstance(n, str) for n in data.get("nemesis", [])):
        raise UsageError(f"{where}nemesis must be a list of fault names")


def config_from_file(args: argparse.Namespace):
    """A ``RunConfig`` from a ``test.yaml`` (``--config``), checked like the flags are."""
    from dataclasses import fields

    from chaos import sut
    from chaos.nemesis import support
    from chaos.runner import RunConfig, backend_options

    try:
        data = safeload.yaml_file(args.config, what="--config")
    except safeload.LoadError as e:
        raise UsageError(str(e)) from None
    names = {f.name for f in fields(RunConfig)}
    if not isinstance(data, dict) or set(data) - names:
        extra = sorted(set(data) - names) if isinstance(data, dict) else []
        raise UsageError(f"--config {args.config}: not a test.yaml" + (f" (unknown keys: {', '.join(extra)})"
                                                                        if extra else ""))
    where = f"--config {args.config}: "
    _check_config_types(data, where)
    cfg = RunConfig(**data)
    check_limits(cfg.workers, cfg.time_limit, cfg.op_timeout, where)
    check_scale(cfg.scale, where)
    check_name(args.name if args.name else cfg.name, "--name" if args.name else f"{where}name")
    from workloads.scenario import check_claims, check_nemesis_opts

    try:
        cfg.claims = check_claims(cfg.claims, where)
        cfg.nemesis_opts = check_nemesis_opts({k: list(v) if isinstance(v, tuple) else v
                                               for k, v in cfg.nemesis_opts.items()}, where)
    except ValueError as e:
        raise UsageError(str(e)) from None
    backend = sut.get(cfg.backend, runs=True)
    opts = dict(backend_options(cfg), protocol="work-claim" if cfg.workload == "claims" else cfg.workload)
    backend.check(opts)
    table = support(cfg.backend, dict(opts, **(cfg.nemesis_opts or {})))
    bad = [f"{n} ({table.get(n, (False, 'unknown nemesis'))[1]})" for n in cfg.nemesis
           if not table.get(n, (False, "unknown nemesis"))[0] and not _scheduler_fault(n, cfg.deterministic)]
    if bad:
        raise UsageError(f"nemesis not available with --backend {cfg.backend} here: {'; '.join(bad)}")
    if cfg.faults is not None and not (isinstance(cfg.faults, list) and all(
            isinstance(o, dict) and {"time", "f", "value"} <= set(o) for o in cfg.faults)):
        raise UsageError(f"--config {args.config}: 'faults' is a list of {{time, f, value}} ops")
    cfg.store = args.store
    if args.name:
        cfg.name = args.name
    if getattr(args, "deterministic", None) is not None:   # --deterministic or --timed on top of the file's mode
        cfg.deterministic = args.deterministic
    cfg.command = shlex.join(["chaos", "run", "--config", os.path.abspath(args.config), "--store", cfg.store,
                              "--name", cfg.name] + (["--deterministic"] if cfg.deterministic else []))
    return cfg


def _scheduler_fault(name: str, deterministic: bool) -> bool:
    """A fault the deterministic scheduler makes itself (the virtual clock's steps): no tool needed."""
    if not deterministic:
        return False
    from chaos.deterministic.plan import SCHEDULER_FAULTS

    return name in SCHEDULER_FAULTS


def recorded_store(config_path: str) -> str | None:
    """The store a ``--config`` file's run was made in, while it is a directory: a replay runs there, in a
    path of the same length (a Node program's history moves with it: docs/deterministic.md). None when
    the file does not say or the store is gone (``config_from_file`` says what is wrong with the file)."""
    try:
        data = safeload.yaml_file(config_path, what="--config")
    except safeload.LoadError:
        return None
    store = data.get("store") if isinstance(data, dict) else None
    return store if isinstance(store, str) and store and os.path.isdir(store) else None


def run(args: argparse.Namespace) -> int:
    from chaos.runner import run as run_test

    if args.store is None:
        args.store = (getattr(args, "config", None) and recorded_store(args.config)) or "store"
    refuse_unusable_dir(args.store)  # first, creating nothing: before a factory is probed on a scratch dir
    cfg = config_from_file(args) if getattr(args, "config", None) else build_config(args)
    if cfg.deterministic:
        from chaos.deterministic.plan import refusal
        from chaos.deterministic.run import run as run_deterministic

        why = refusal(cfg)
        if why:
            raise UsageError(why)
    store_dir = writable_dir(cfg.store)   # (made absolute: "missing/../s" is "s", as it was created)
    print(f"chaos: {cfg.command}", file=sys.stderr)
    if cfg.backend == "python" and cfg.factory:
        from chaos.conform import process_model

        problem = process_model.check(cfg.factory, store_dir)   # else the run would only show hundreds of anomalies
        if problem:
            print(f"chaos: warning: {problem}", file=sys.stderr)
    if cfg.deterministic:
        return run_deterministic(cfg, report=getattr(args, "report", True), config_path=getattr(args, "config", None))
    return run_test(cfg, report=getattr(args, "report", True))
