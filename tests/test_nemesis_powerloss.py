"""The power-loss nemesis in real ``chaos run``s: the correct SQLite backend
stays valid, the ``synchronous=OFF`` variant is invalid and the durability
checker names it; every power-off cut the power mid-write and undid
something (its evidence)."""

from __future__ import annotations

import json

import pytest

from chaos.commands.test_all import RunRequest, run_one
from chaos.testing.sync_variants import VARIANTS


def _run(tmp_path, seed: int, factory: str | None = None, backend: str = "sqlite", extra=()):
    out = run_one(RunRequest(backend=backend, nemesis=["power-loss"], seed=seed, time_limit=6, workers=4,
                             store=str(tmp_path / f"s{seed}"), factory=factory, extra_args=list(extra)))
    offs = [json.loads(line) for line in open(f"{out.run_dir}/history.jsonl")]
    offs = [o for o in offs if o.get("f") == "power-loss" and o["type"] != "invoke"]
    return out, offs


def test_correct_sqlite_stays_valid_and_every_power_off_is_evidenced(tmp_path):
    out, offs = _run(tmp_path, 1)
    assert out.results["verdict"] == "valid", out.results["notes"]
    assert offs and all(o["value"].get("cut_mid_write") for o in offs), offs   # (under load once: a value without it)
    cov = out.results["fault_coverage"]["power-loss"]
    assert cov["took_effect"] >= 1 and cov["took_effect"] == sum(o["value"]["took_effect"] for o in offs)


def _sync_off_caught(tmp_path, seed: int) -> None:
    out, offs = _run(tmp_path, seed, factory=VARIANTS["sync-off"][0])
    assert out.results["verdict"] == "invalid"
    durability = out.results["checkers"]["durability"]
    assert durability["valid"] is False, durability
    assert any(o["value"]["undone_bytes"] > 0 for o in offs)


def test_sync_off_variant_is_invalid_and_named_by_durability(tmp_path):
    _sync_off_caught(tmp_path, 1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_sync_off_variant_is_caught_in_more_seeds(tmp_path, seed):
    _sync_off_caught(tmp_path, seed)
