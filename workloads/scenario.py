"""Named scenarios: YAML files that preset a run (workers, nemeses, timings).

A scenario file is a mapping with ``name`` and ``description`` (strings) and
any of: ``workers`` (int), ``time_limit`` (number), ``nemesis`` (list of
names), ``claims`` (ClaimsConfig overrides: ``namespaces``, ``items``,
``lease_ms``, ``work_ms`` [lo, hi], ``backoff_ms`` [lo, hi], ``publish``,
``publishes`` [lo, hi], the rates ``blind_retry_rate``, ``stale_fence_rate``,
``replay_after_info_rate``, ``stale_after_loss_rate`` in [0, 1],
``shared_item_ids``, ``race_pairs``, ``race_lease_ms``, ``episodes`` (a list
of ``workloads.races.EPISODES``)) and
``nemesis_opts`` (fault timing ranges in ms, e.g. ``pause_ms: [3000, 4000]``;
``pause_at: publish``; ``power_loss_mode: drop | torn | mixed``;
``partition_mode: blackhole | refuse | mixed``; ``partition_after: commit | requests``).
``load(path)`` validates it and raises ``ValueError`` with one line on a bad
file (the CLI turns that into a usage error).
"""

from __future__ import annotations

import os

from backends import safeload
from workloads.claims import ClaimsConfig
from workloads.races import EPISODES

KEYS = {"name", "description", "workers", "time_limit", "nemesis", "claims", "nemesis_opts"}
SCENARIO_DIR = os.path.join(os.path.dirname(__file__), "scenarios")


def resolve(name_or_path: str) -> str:
    if os.path.exists(name_or_path):
        return name_or_path
    candidate = os.path.join(SCENARIO_DIR, name_or_path if name_or_path.endswith(".yaml") else name_or_path + ".yaml")
    if os.path.exists(candidate):
        return candidate
    raise ValueError(f"scenario {name_or_path!r}: no such file (built-in: {', '.join(builtin())})")


def builtin() -> list[str]:
    return sorted(f[:-5] for f in os.listdir(SCENARIO_DIR) if f.endswith(".yaml"))


def load(name_or_path: str) -> dict:
    path = resolve(name_or_path)
    data = safeload.yaml_file(path, what="scenario")  # LoadError is a ValueError
    if not isinstance(data, dict):
        raise ValueError(f"scenario {path}: must be a mapping")
    unknown = set(data) - KEYS
    if unknown:
        raise ValueError(f"scenario {path}: unknown keys {sorted(unknown)} (allowed: {sorted(KEYS)})")
    for key in ("name", "description"):
        if not isinstance(data.get(key), str):
            raise ValueError(f"scenario {path}: {key!r} must be a string")
    if "workers" in data and (isinstance(data["workers"], bool) or not isinstance(data["workers"], int) or data["workers"] < 1):
        raise ValueError(f"scenario {path}: 'workers' must be a positive integer")
    if "time_limit" in data and (isinstance(data["time_limit"], bool) or not isinstance(data["time_limit"], (int, float))
                                 or not 0 < data["time_limit"] < float("inf")):
        raise ValueError(f"scenario {path}: 'time_limit' must be a positive number")
    if "nemesis" in data and (not isinstance(data["nemesis"], list) or not all(isinstance(x, str) for x in data["nemesis"])):
        raise ValueError(f"scenario {path}: 'nemesis' must be a list of names")
    claims = data.get("claims", {})
    if not isinstance(claims, dict):
        raise ValueError(f"scenario {path}: 'claims' must be a mapping")
    try:
        cfg = ClaimsConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in claims.items()})
    except TypeError as e:
        raise ValueError(f"scenario {path}: bad 'claims': {e}") from None
    for rng in (cfg.work_ms, cfg.backoff_ms, cfg.publishes):
        if len(rng) != 2 or rng[0] > rng[1]:
            raise ValueError(f"scenario {path}: ranges are [lo, hi] with lo <= hi")
    if cfg.publishes[0] < 1:
        raise ValueError(f"scenario {path}: 'publishes' are at least 1 per hold")
    for rate in (cfg.blind_retry_rate, cfg.stale_fence_rate, cfg.replay_after_info_rate, cfg.stale_after_loss_rate):
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
            raise ValueError(f"scenario {path}: the '*_rate' settings are numbers in [0, 1]")
    if isinstance(cfg.race_pairs, bool) or not isinstance(cfg.race_pairs, int) or cfg.race_pairs < 0:
        raise ValueError(f"scenario {path}: 'race_pairs' must be a non-negative integer")
    unknown_episodes = sorted(set(cfg.episodes) - set(EPISODES))
    if unknown_episodes or not cfg.episodes:
        raise ValueError(f"scenario {path}: 'episodes' must be a non-empty list of {', '.join(EPISODES)}"
                         + (f" (unknown: {', '.join(unknown_episodes)})" if unknown_episodes else ""))
    opts = data.get("nemesis_opts", {})
    if opts.get("pause_at", "publish") != "publish":
        raise ValueError(f"scenario {path}: 'nemesis_opts.pause_at' can only be 'publish'")
    if opts.get("power_loss_mode", "drop") not in ("drop", "torn", "mixed"):
        raise ValueError(f"scenario {path}: 'nemesis_opts.power_loss_mode' is drop, torn or mixed")
    words = ("pause_at", "power_loss_mode", "partition_mode", "partition_after", "partition_most")
    if opts.get("partition_after", "commit") not in ("commit", "requests"):
        raise ValueError(f"scenario {path}: 'nemesis_opts.partition_after' is commit or requests")
    if opts.get("partition_mode", "mixed") not in ("blackhole", "refuse", "mixed"):
        raise ValueError(f"scenario {path}: 'nemesis_opts.partition_mode' is blackhole, refuse or mixed")
    ranges = {k: v for k, v in opts.items() if k not in words} if isinstance(opts, dict) else None
    if ranges is None or not all(isinstance(v, list) and len(v) == 2 for v in ranges.values()):
        raise ValueError(f"scenario {path}: 'nemesis_opts' maps names to [lo, hi] ranges in ms")
    data["claims"] = {k: tuple(v) if isinstance(v, list) else v for k, v in claims.items()}
    data["nemesis_opts"] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in opts.items()}
    return data
