"""``chaos run --workload claims``: the work-claim workload's answers to the runner's questions.

The agents and racers come from ``workloads.claims`` and ``workloads.races``;
the system under test from the backend's ``Sut`` (``chaos.sut``); the verdict
from ``checkers``. Before the workload is built, racer episodes that need an
ability the backend lacks are left out; after set-up the run adopts what a
black-box program minted and is scaled to the backend's measured call latency
(``chaos.timing``); the final phase reads every tuple and publication back
and, for a Git-backed ledger, commits and verifies it as its users would.
"""

from __future__ import annotations

import os
import sys

from chaos.workload_kinds.base import WorkloadKind


class ClaimsKind(WorkloadKind):
    name = "claims"
    protocol = "work-claim"
    ledger_of: dict = {}   # namespace -> ledger of a program with several ledgers (black_box_world sets it)

    def prepare(self, cfg, abilities, notes: list) -> None:
        """Racer episodes that need an ability the backend lacks (a black-box
        program cannot seed a claim record, may map no legacy commands) are
        left out up front, each with its reason; recorded in ``cfg.claims``
        (``episodes``), so the workload and its coverage plan follow."""
        from workloads.claims import ClaimsConfig
        from workloads.races import EPISODE_NEEDS

        kept, dropped = [], []
        for episode in ClaimsConfig(**cfg.claims).episodes:
            why = abilities.missing(EPISODE_NEEDS.get(episode, ()))
            (dropped.append(f"{episode} ({why})") if why else kept.append(episode))
        if dropped:
            cfg.claims = dict(cfg.claims, episodes=kept)
            notes.append(f"racer episodes left out, the backend lacks what they need: {'; '.join(dropped)}")

    def build(self, cfg):
        from workloads.claims import ClaimsConfig, claims_workload

        # a black-box program's minted namespaces (black_box_world adopts them; never recorded in test.yaml)
        return claims_workload(cfg.seed, ClaimsConfig(**cfg.claims), namespaces=getattr(cfg, "adopted_namespaces", None))

    def target(self, cfg, run, note_pid, note_dir):
        from chaos import sut

        return sut.get(cfg.backend, runs=True).target(cfg, run, note_pid, note_dir)

    def namespaces(self, world):
        return world.namespaces

    def durable(self, world) -> dict:
        return world.durable()

    def adapt(self, cfg, target, run, world, notes: list):
        """What the target turned out to be (``black_box_world``) and how fast it
        answers (``calibrate``) are recorded in ``cfg``; the workload is rebuilt from it."""
        _, world = self.black_box_world(cfg, target, world, notes)
        self.calibrate(cfg, target, run, world)
        return self.build(cfg)

    def episodes(self, cfg) -> tuple:
        from workloads.claims import ClaimsConfig

        return tuple(ClaimsConfig(**cfg.claims).episodes)

    def plan(self, cfg, world, cycles_per_worker: int = 40) -> list[dict]:
        from workloads.claims import ClaimsConfig, plan_cycle
        from workloads.coverage import plan_for
        from workloads.races import episode_of

        ccfg = ClaimsConfig(**cfg.claims)
        rows = [{"kind": "cycle", "thread": t, "cycle": c, **plan_cycle(cfg.seed, t, c, len(world.agent_tuples), ccfg)}
                for t in range(cfg.workers) for c in range(cycles_per_worker)]
        pairs = plan_for(cfg.claims, cfg.workers, None)["race_pairs"]
        for k in range(pairs):  # the first 2 * pairs threads race (workloads.races): episodes, not cycles
            rows += [{"kind": "episode", "pair": k, "threads": [2 * k, 2 * k + 1], "n": n,
                      "episode": episode_of(cfg.seed, k, n, ccfg.episodes, pairs)} for n in range(cycles_per_worker * 3)]
        return rows

    def notes(self, ops: list[dict], cfg) -> list[str]:
        """The racer episode kinds the run never started (a bug only such an
        episode meets went untested: say so)."""
        from workloads.claims import ClaimsConfig
        from workloads.coverage import intent_episode

        rotation = ClaimsConfig(**cfg.claims).episodes
        started = {intent_episode(o["intent"]) for o in ops if o.get("type") == "invoke" and o.get("intent")}
        missed = [k for k in rotation if k not in started]
        if not missed or len(missed) == len(rotation):  # no racers at all: nothing was asked of them
            return []
        return [f"the racers started {len(rotation) - len(missed)} of the {len(rotation)} episode kinds "
                f"(never: {', '.join(missed)})"]

    def settle_s(self, cfg) -> float:
        from workloads.claims import ClaimsConfig

        return ClaimsConfig(**cfg.claims).lease_ms / 1000 + 0.2

    def final_reads(self, history: list[dict], world) -> list[dict]:
        op_ids = sorted({(o["value"]["operation_id"], o["value"]["ledger_namespace"], o["value"]["item_id"])
                         for o in history if o["type"] == "invoke" and o.get("f") == "publish"})
        reads = [{"f": "read", "value": {"ledger_namespace": ns, "item_id": item}} for ns, item in world.tuples]
        # the capabilities once more: the envelope set-up saw must still be the one (contract §3: a caller
        # gates publish-claimed on it), judged in every run, not only one the racers asked again in
        again = [{"f": "capabilities", "value": {}}]
        return reads + again + [{"f": "publication-read", "value": {"operation_id": i, "ledger_namespace": ns, "item_id": item}}
                        for i, ns, item in op_ids]

    def final_phase(self, cfg, world, history: list[dict], call) -> None:
        call(self.final_reads(history, world), "reading everything back")
        if cfg.claims.get("commit"):
            self.final_git(world, call)

    def final_git(self, world, call) -> None:
        """Git-backed ledgers, as their users run them: the final agent commits
        every item file still differing from HEAD, then ``claim-verify`` runs on
        every ledger; both are client ops in the history (checked by
        ``checkers.invariants.git_finalization``)."""
        by_ns: dict = {}
        for ns, item in world.tuples:
            by_ns.setdefault(ns, []).append(item)
        ops = [{"f": "commit", "value": {"ledger_namespace": ns, "all": True, "item_ids": items}}
               for ns, items in by_ns.items()]
        call(ops, "committing and running claim-verify")
        verifies = [{"f": "verify", "value": {"ledger_namespace": ns}} for ns in by_ns]
        call(verifies)

    def ctx(self, cfg, world, capabilities) -> dict:
        from workloads.claims import ClaimsConfig

        ctx = {"capabilities": capabilities, "lease_ms": ClaimsConfig(**cfg.claims).lease_ms,
               "tuples": [list(t) for t in world.tuples], "initial_durable": world.durable(),
               "backend": cfg.backend, "workload": cfg.workload}
        if len(set(self.ledger_of.values())) > 1:   # a capabilities envelope is one ledger's
            ctx["ledger_of"] = self.ledger_of
        return ctx

    def check(self, history: list[dict], ctx: dict) -> dict:
        import checkers

        return checkers.run_checkers(history, ctx)

    def coverage(self, history: list[dict], cfg, capabilities) -> dict:
        from workloads.coverage import coverage, plan_for

        return coverage(history, plan_for(cfg.claims, cfg.workers, capabilities))

    # ------------------------------------------------------------------ after set-up

    def black_box_world(self, cfg, target, world, notes: list):
        """A black-box program: the namespaces it minted at provision (the suite
        adopts them), a cooperating agent that commits (Git-backed ledgers), no
        publications when its items have no public path. Recorded in
        ``cfg.claims`` so the workload is rebuilt from the config alone."""
        ledgers = (getattr(target, "spec", None) or {}).get("ledgers")   # namespace -> ledger, several ledgers
        # by their path in the run dir: which ledger is which is all a checker asks, and a deterministic
        # run's results.json holds nothing of where the store is
        run_path = getattr(getattr(target, "run", None), "path", None)
        self.ledger_of = ({ns: os.path.relpath(p, run_path) if run_path else p for ns, p in ledgers.items()}
                          if isinstance(ledgers, dict) else {})
        adopted = list(getattr(target, "namespaces", None) or world.namespaces)
        if adopted != list(world.namespaces):
            cfg.adopted_namespaces = adopted   # not a RunConfig field: a new provision mints new ones
        if getattr(target, "commits", False):
            cfg.claims = dict(cfg.claims, commit=True)
        if not getattr(target, "publishes", True):
            cfg.claims = dict(cfg.claims, publish=False)
            if "lost_reply_classes" not in cfg.nemesis_opts:  # an armed publish-class lost reply could never fire
                cfg.nemesis_opts = dict(cfg.nemesis_opts, lost_reply_classes=["claim"])
            notes.append("the backend has no public path to seed ledger items (profile items.path: null): "
                         "publications are not exercised")
        return self.build(cfg)

    def calibrate(self, cfg, target, run, world) -> None:
        """Measure the call latency (unless ``--scale`` was given) and scale the
        run's times to it (``chaos.timing``); updates ``cfg`` and its command."""
        from chaos import timing
        from workloads.claims import ClaimsConfig
        from workloads.items import mint_item_id
        from workloads.random import Stream

        ccfg = ClaimsConfig(**cfg.claims)
        measured = None
        if cfg.scale is None:
            item, _ = mint_item_id(Stream(cfg.seed, ("calibration",)))
            try:
                measured = timing.measure(target.spec, {}, world.namespaces[0], item,
                                          run.file("logs", "calibration.log"))
            except Exception as e:  # a backend that cannot even answer: the run itself will say so
                measured = {"error": f"{type(e).__name__}: {e}"}
        chosen = timing.choose(measured, cfg.scale, lease_ms=ccfg.lease_ms, workers_default=cfg.workers,
                               time_limit_default=cfg.time_limit)
        cfg.scale = chosen["scale"]
        if cfg.auto_workers:
            cfg.workers = chosen["workers"]
        if cfg.auto_time_limit:
            cfg.time_limit = chosen["time_limit"]
        if cfg.auto_op_timeout and chosen["op_timeout_min"] > cfg.op_timeout:
            cfg.op_timeout = chosen["op_timeout_min"]
        cfg.claims = timing.scaled_claims(cfg.claims, cfg.scale, ccfg)
        ccfg = ClaimsConfig(**cfg.claims)
        mode = _member(target.capabilities, "result", "operations", "work_claim", "mode")
        if mode == "merge-coordinated" and chosen["slow"] and "kill_at" not in cfg.nemesis_opts:
            # a merge-coordinated publish is several durable steps (intent, item, final),
            # each a separate write of a process-per-call program: most kills aim inside
            # one (chaos.nemesis.process; a fast in-process backend's publish is too short
            # to aim at without stalling the nemesis thread)
            cfg.nemesis_opts = dict(cfg.nemesis_opts, kill_at="publish", kill_publish_share=0.75)
        if chosen["slow"] and "clock_forward_s" not in cfg.nemesis_opts:
            # forward skews the run outlives: a frozen floor strands every dead holder's claim
            cfg.nemesis_opts = dict(cfg.nemesis_opts,
                                    clock_forward_s=timing.clock_offsets(ccfg.lease_ms, cfg.time_limit))
        cfg.timing = {"measured": measured, "scale": cfg.scale, "workers": cfg.workers, "time_limit": cfg.time_limit,
                      "op_timeout": cfg.op_timeout, "lease_ms": ccfg.lease_ms, "work_ms": list(ccfg.work_ms),
                      "backoff_ms": list(ccfg.backoff_ms)}
        if "--config" not in cfg.command:
            cfg.command = _with_flags(cfg.command, {"--scale": str(cfg.scale), "--workers": str(cfg.workers),
                                                    "--time-limit": str(cfg.time_limit),
                                                    "--op-timeout": f"{cfg.op_timeout:g}"})
        m = measured or {}
        seen = (f"measured read {m.get('read_ms')} ms, decision {m.get('decision_ms')} ms; "
                if m and "error" not in m else "")
        print(f"chaos: timing: {seen}scale {cfg.scale} -> lease {ccfg.lease_ms} ms, work {ccfg.work_ms[0]}-"
              f"{ccfg.work_ms[1]} ms, op deadline {cfg.op_timeout} s, {cfg.workers} workers, {cfg.time_limit} s"
              + (f", forward skews {cfg.nemesis_opts['clock_forward_s']} s" if "clock_forward_s" in cfg.nemesis_opts
                 else ""),
              file=sys.stderr)


def _member(doc, *path):
    """``doc[path[0]][path[1]]...`` or None where a member is missing or not an
    object (a program's reply may have any shape)."""
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _with_flags(command: str, flags: dict[str, str]) -> str:
    """``command`` with each ``--flag value`` set (replaced or appended)."""
    import shlex

    words = shlex.split(command)
    for flag, value in flags.items():
        if flag in words:
            i = words.index(flag)
            words[i + 1:i + 2] = [value]
        else:
            words += [flag, value]
    return shlex.join(words)
