"""The workloads ``chaos run`` can run, each one object the runner asks the same questions.

    kind = workload_kind(cfg)
    client_gen, world = kind.build(cfg)          # pure: seed + config
    kind.target(cfg, run, note_pid, note_dir)     # the system under test for this protocol
    kind.namespaces(world), kind.durable(world)   # what the target is set up and seeded with
    kind.plan(cfg, world)                         # the per-cycle plan rows of schedule.jsonl
    kind.settle_s(cfg)                            # how long the final phase lets leases expire
    kind.final_reads(history, world)              # the read-back ops of the final phase
    kind.ctx(cfg, world, capabilities)            # the checker context (results.json["ctx"])
    kind.check(history, ctx)                      # the merged checker verdict
    kind.coverage(history, cfg, capabilities)     # per contract path: requested, attempted, completed

``claims`` tests the work-claim contract; ``issue-lock`` the issue-lock
contract (``chaos.issuelock.run``). ``WORKLOADS`` is the one list.
"""

from __future__ import annotations

from chaos.errors import UsageError


class ClaimsKind:
    name = "claims"
    protocol = "work-claim"

    def build(self, cfg):
        from workloads.claims import ClaimsConfig, claims_workload

        # a black-box program's minted namespaces (chaos.runner adopts them; never recorded in test.yaml)
        return claims_workload(cfg.seed, ClaimsConfig(**cfg.claims), namespaces=getattr(cfg, "adopted_namespaces", None))

    def target(self, cfg, run, note_pid, note_dir):
        from chaos import sut

        return sut.get(cfg.backend, runs=True).target(cfg, run, note_pid, note_dir)

    def namespaces(self, world):
        return world.namespaces

    def durable(self, world) -> dict:
        return world.durable()

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

    def ctx(self, cfg, world, capabilities) -> dict:
        from workloads.claims import ClaimsConfig

        return {"capabilities": capabilities, "lease_ms": ClaimsConfig(**cfg.claims).lease_ms,
                "tuples": [list(t) for t in world.tuples], "initial_durable": world.durable(),
                "backend": cfg.backend, "workload": cfg.workload}

    def check(self, history: list[dict], ctx: dict) -> dict:
        import checkers

        return checkers.run_checkers(history, ctx)

    def coverage(self, history: list[dict], cfg, capabilities) -> dict:
        from workloads.coverage import coverage, plan_for

        return coverage(history, plan_for(cfg.claims, cfg.workers, capabilities))


def _issue_lock():
    from chaos.issuelock.run import IssueLockKind

    return IssueLockKind()


WORKLOADS = {"claims": ClaimsKind, "issue-lock": _issue_lock}


def workload_kind(name_or_cfg):
    name = getattr(name_or_cfg, "workload", name_or_cfg)
    if name not in WORKLOADS:
        raise UsageError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})")
    return WORKLOADS[name]()
