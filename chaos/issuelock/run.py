"""``chaos run --workload issue-lock``: the issue-lock protocol's answers to the runner's questions.

The universe and agents come from ``workloads.issuelock``; the store from
``chaos.issuelock.targets``; the verdict from ``checkers.issuelock``. The final
phase lets every lease expire (the store's TTL plus a margin), then inspects
every issue once (the read-back the checkers compare with the export).
"""

from __future__ import annotations

from dataclasses import fields

from chaos.workload_kinds.base import WorkloadKind


class IssueLockKind(WorkloadKind):
    name = "issue-lock"
    protocol = "issue-lock"

    @staticmethod
    def config(cfg):
        from workloads.issuelock import IssueLockConfig

        known = {f.name for f in fields(IssueLockConfig)}
        overrides = dict(getattr(cfg, "issuelock", None) or {})
        bad = set(overrides) - known
        if bad:
            from chaos.errors import UsageError

            raise UsageError(f"unknown issue-lock workload settings {sorted(bad)} (known: {sorted(known)})")
        return IssueLockConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()})

    def build(self, cfg):
        from workloads.issuelock import issuelock_workload

        return issuelock_workload(cfg.seed, self.config(cfg), cfg.workers)

    def target(self, cfg, run, note_pid, note_dir):
        from chaos import sut

        return sut.get(cfg.backend, runs=True).issue_lock_target(cfg, run, note_pid, note_dir)

    def namespaces(self, world):
        return None

    def durable(self, world) -> dict:
        return world.durable()

    def plan(self, cfg, world, cycles_per_worker: int = 40) -> list[dict]:
        from workloads.issuelock import plan_cycle

        ilcfg = self.config(cfg)
        return [{"kind": "cycle", "thread": t, "cycle": c, **plan_cycle(cfg.seed, t, c, world, ilcfg)}
                for t in range(cfg.workers) for c in range(cycles_per_worker)]

    def settle_s(self, cfg) -> float:
        return self.config(cfg).ttl_ms / 1000 + 0.3

    def final_reads(self, history: list[dict], world) -> list[dict]:
        from workloads.issuelock import token_of

        return [{"f": "inspect", "value": {"agent_token": token_of(0), **key.as_request()}} for key in world.issues]

    def ctx(self, cfg, world, capabilities) -> dict:
        return {"protocol": "issue-lock", "backend": cfg.backend, "workload": cfg.workload,
                "ttl_ms": world.ttl_ms, "initial_durable": world.durable(),
                "issues": [k.path for k in world.issues],
                "legacy": [{"issue": s.key.path, "owner": s.owner, "variant": s.variant, "branch": s.branch,
                            "worktree": s.worktree} for s in world.legacy]}

    def check(self, history: list[dict], ctx: dict) -> dict:
        import checkers.issuelock

        return checkers.issuelock.run_checkers(history, ctx)

    def coverage(self, history: list[dict], cfg, capabilities) -> dict:
        from workloads.issuelock_coverage import coverage

        return coverage(history)
