"""The no-I/O reference backend (``backends.reference``): the oracle. It is
replayed by ``chaos conform`` and served by ``chaos backend reference`` (a
JSON file under an flock); ``chaos run`` does not run it (no durable storage
shared between worker processes)."""

from __future__ import annotations

import os

from chaos.sut.abilities import can, cannot
from chaos.sut.base import SimpleSession, Sut

EVERYTHING = "plain data in the in-memory model"


class ReferenceSut(Sut):
    name = "reference"
    order = 0
    summary = "the no-I/O oracle (MemoryStore + Engine)"
    runs = False
    cli = True

    def declare(self, opts: dict) -> dict:
        rows = {name: can(EVERYTHING, "model") for name in (
            "seed", "export", "floor-fault", "outcome-unknown-fault", "advisory-setup", "write-paths",
            "legacy-writes")}
        rows.update({
            "barrier": can("the engine's before_commit hook, in process", "hook"),
            "clock-hook": can("a fixed clock, set per action", "hook"),
            "restart": can("drop process state, keep the durable model", "model"),
            "claim-verify": cannot("a strict fenced model has nothing to reconcile with git"),
            "commit": cannot("items live in the model"),
        })
        for name in ("kill", "pause", "clock", "fsync", "lost-reply"):
            rows[name] = cannot("chaos run does not run the in-memory reference")
        return rows

    def conform_session(self, options: dict):
        from chaos.conform.adapters.reference import make_adapter

        return SimpleSession(make_adapter, options)

    def cli_spec(self, ledger: str, args) -> dict:
        return {"backend": "reference", "path": os.path.join(ledger, "reference.json")}

    def cli_provision(self, ledger: str, namespaces: list[str], write_paths: dict | None, args) -> None:
        import json

        os.makedirs(ledger, exist_ok=True)
        config = {"namespaces": namespaces, **({"write_paths": write_paths} if write_paths else {})}
        with open(self.cli_spec(ledger, args)["path"], "x") as f:
            json.dump({"config": config, "durable": {}}, f)


SUT = ReferenceSut()
