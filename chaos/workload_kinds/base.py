"""One workload ``chaos run`` can run: the questions the runner asks every kind.

The runner (``chaos.runner.Run.execute``) names no workload; it asks its kind,
in this order::

    kind.prepare(cfg, abilities, notes)        # fit the config to the backend, before anything is built
    client_gen, world = kind.build(cfg)        # pure: seed + config
    target = kind.target(cfg, run, note_pid, note_dir)   # the system under test for this protocol
    target.setup(kind.namespaces(world), kind.durable(world))
    kind.adapt(cfg, target, run, world, notes) # fit the config to the target set up (None: nothing to change)
    kind.episodes(cfg)                         # racer episodes planned (the faults they need are readied)
    kind.plan(cfg, world, cycles_per_worker)   # the workload's rows of schedule.jsonl
      ... the workload and the faults run ...
    kind.notes(ops, cfg)                       # what the workload phase left unexercised, in words
    kind.settle_s(cfg)                         # how long the final phase lets leases expire
    kind.final_phase(cfg, world, ops, call)    # the read-back (and anything after it): call(ops[, step]) runs client ops
    kind.ctx(cfg, world, capabilities)         # the checker context (results.json["ctx"])
    kind.check(history, ctx)                   # the merged checker verdict
    kind.coverage(history, cfg, capabilities)  # per contract path: requested, attempted, completed

A kind is a subclass of ``WorkloadKind`` listed in ``chaos.workload_kinds.WORKLOADS``;
what it does not override does nothing. Its own settings, where it has some,
are a plain-data member of ``RunConfig`` (``claims``, ``issuelock``), so
``test.yaml`` reproduces the run: the one edit beside the runner's flow a new
kind can need.
"""

from __future__ import annotations


class WorkloadKind:
    name = ""
    protocol = ""   # the contract it tests: a backend serves it when it is in ``Sut.protocols``

    def prepare(self, cfg, abilities, notes: list) -> None:
        """Before the workload is built: leave out (in ``cfg``) what the backend's
        ``abilities`` cannot do, saying so in ``notes``."""

    def build(self, cfg):
        """``(client generator, world)``: a pure function of the seed and ``cfg``."""
        raise NotImplementedError

    def target(self, cfg, run, note_pid, note_dir):
        """The system under test (a ``chaos.sut.base.Target``) this protocol drives."""
        raise NotImplementedError

    def namespaces(self, world):
        return None

    def durable(self, world) -> dict:
        """What the target is seeded with (the manifest's durable shape)."""
        return {}

    def adapt(self, cfg, target, run, world, notes: list):
        """After set-up: fit ``cfg`` to what the target turned out to be (its
        speed, what a black box lets the suite see) and return the rebuilt
        ``(client generator, world)``, which the runner records again
        (``test.yaml``, ``schedule.jsonl``); ``None`` when nothing changes."""
        return None

    def episodes(self, cfg) -> tuple:
        """The racer episodes this run plans (``workloads.races``): the runner
        readies a fault mechanism only an episode needs."""
        return ()

    def plan(self, cfg, world, cycles_per_worker: int = 40) -> list[dict]:
        """The workload's planned rows of ``schedule.jsonl``."""
        return []

    def notes(self, ops: list[dict], cfg) -> list[str]:
        """What the workload phase (``ops``) left unexercised, one note each."""
        return []

    def settle_s(self, cfg) -> float:
        """Seconds the final phase waits, once every fault is healed, before it reads back."""
        return 0.0

    def final_reads(self, history: list[dict], world) -> list[dict]:
        """The read-back ops of the final phase."""
        return []

    def final_phase(self, cfg, world, history: list[dict], call) -> None:
        """The final phase's client ops: ``call(ops)`` runs them to completion,
        recorded in the history like the workload's; ``call(ops, "what")`` also
        names the step on the progress line."""
        call(self.final_reads(history, world))

    def ctx(self, cfg, world, capabilities) -> dict:
        return {"backend": cfg.backend, "workload": cfg.workload}

    def check(self, history: list[dict], ctx: dict) -> dict:
        """``{"valid": True | False | "unknown", "checkers": {...}}`` (``checkers.compose``)."""
        raise NotImplementedError

    def coverage(self, history: list[dict], cfg, capabilities) -> dict:
        """Per contract path the workload declares: requested, attempted, completed
        (``workloads.coverage``); none declared: ``{}``."""
        return {}
