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
``partition_mode: blackhole | refuse | mixed``; ``partition_after: commit | requests | renew``).
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
    data["claims"] = check_claims(data.get("claims", {}), f"scenario {path}: ")
    data["nemesis_opts"] = check_nemesis_opts(data.get("nemesis_opts", {}), f"scenario {path}: ")
    return data


#: nemesis_opts members that are words, and their allowed values (every other member is a [lo, hi] range in ms)
NEMESIS_WORDS = {"pause_at": ("publish",), "power_loss_mode": ("drop", "torn", "mixed"),
                 "partition_mode": ("blackhole", "refuse", "mixed"), "partition_after": ("commit", "requests", "renew")}
#: nemesis_opts members that are counts
NEMESIS_COUNTS = ("partition_most",)
_MAX_MS = 7 * 24 * 3600 * 1000


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def check_claims(claims, where: str = "") -> dict:
    """``ClaimsConfig`` overrides, typed like its defaults; lists become tuples. ``ValueError``, one line."""
    if not isinstance(claims, dict):
        raise ValueError(f"{where}'claims' must be a mapping")
    fields = ClaimsConfig.__dataclass_fields__
    unknown = sorted(str(k) for k in claims if k not in fields)
    if unknown:
        raise ValueError(f"{where}unknown 'claims' members {unknown} (known: {sorted(fields)})")
    out = {k: tuple(v) if isinstance(v, list) else v for k, v in claims.items()}
    for key, value in out.items():
        if key == "episodes":   # the racers' rotation: names, not a range
            if not (isinstance(value, tuple) and value and all(isinstance(e, str) for e in value)) \
                    or set(value) - set(EPISODES):
                bad = sorted(set(value) - set(EPISODES)) if isinstance(value, tuple) else value
                raise ValueError(f"{where}'claims.episodes' must be a non-empty list of workloads.races.EPISODES "
                                 f"(unknown: {bad})")
            continue
        default = fields[key].default
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= (
                _MAX_MS if key.endswith("_ms") else 10_000)
        elif isinstance(default, float):
            ok = _number(value) and 0 <= value <= 1
        elif isinstance(default, tuple):
            ok = len(value) == 2 and all(_number(x) and 0 <= x <= _MAX_MS for x in value) and value[0] <= value[1] \
                if isinstance(value, tuple) else False
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise ValueError(f"{where}'claims.{key}' must be {_describe(key, default)}")
    if out.get("namespaces", 1) < 1 or out.get("items", 1) < 1:
        raise ValueError(f"{where}'claims.namespaces' and 'claims.items' must be at least 1")
    if out.get("publishes", (1, 1))[0] < 1:
        raise ValueError(f"{where}'claims.publishes' is at least 1 publication per hold")
    return out


def _describe(key: str, default) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "a non-negative integer" + (" of ms" if key.endswith("_ms") else " (at most 10000)")
    if isinstance(default, float):
        return "a number in [0, 1]"
    if isinstance(default, tuple):
        return "a range [lo, hi] in ms with 0 <= lo <= hi"
    return f"a {type(default).__name__}"


def check_nemesis_opts(opts, where: str = "") -> dict:
    """Fault timing ranges ([lo, hi] ms), words and counts; lists become tuples. ``ValueError``, one line."""
    if not isinstance(opts, dict):
        raise ValueError(f"{where}'nemesis_opts' must be a mapping")
    out = {}
    for key, value in opts.items():
        if not isinstance(key, str):
            raise ValueError(f"{where}'nemesis_opts' keys are names, not {key!r}")
        if key in NEMESIS_WORDS:
            if value not in NEMESIS_WORDS[key]:
                raise ValueError(f"{where}'nemesis_opts.{key}' is {' or '.join(NEMESIS_WORDS[key])}")
            out[key] = value
        elif key in NEMESIS_COUNTS:
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 200:
                raise ValueError(f"{where}'nemesis_opts.{key}' is an integer between 1 and 200")
            out[key] = value
        else:
            if not (isinstance(value, list) and len(value) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                        and 0 <= x <= _MAX_MS for x in value)
                    and value[0] <= value[1]):
                raise ValueError(f"{where}'nemesis_opts' maps names to [lo, hi] ranges of whole ms "
                                 f"(0 <= lo <= hi); {key!r} is not one")
            out[key] = tuple(value)
    return out
