"""The ``results.json`` schema, version 1 (documented in docs/results-schema.md).

``results.json`` is the machine-readable outcome of one run. It is stable:
fields are only ever added within a version; a removal or a change of meaning
bumps ``schema_version``. Readers must ignore members they do not know.

``validate_results(obj) -> list[str]`` returns the problems found (empty: the
object conforms). It is hand-written rather than JSON-Schema so the suite
needs no extra dependency, and so each message can say what is wrong in
plain words with the path of the member (``checkers.dual_ownership.valid``).
"""

from __future__ import annotations

SCHEMA_VERSION = 1

VERDICT_EXIT = {"valid": 0, "invalid": 1, "unknown": 2}

#: top-level member -> (required, allowed Python types, meaning)
TOP_LEVEL = {
    "schema_version": (True, (int,), "always 1 for this layout"),
    "test": (True, (dict,), "what ran: name, backend, workload, nemesis, workers, time_limit, seed, command"),
    "capabilities": (True, (dict, type(None)), "the backend's capabilities envelope, null if it never answered"),
    "verdict": (True, (str,), "valid | invalid | unknown, the merged verdict of all checkers and coverage"),
    "exit_code": (True, (int,), "the process exit code: 0 valid, 1 invalid, 2 unknown"),
    "checkers": (True, (dict,), "checker name -> checker result"),
    "fault_coverage": (True, (dict,), "fault name -> {requested, fired, took_effect}"),
    "workload_coverage": (False, (dict,), "contract path -> {requested, attempted, completed}"),
    "stats": (True, (dict,), "ops, ok, fail, info, duration_s"),
    "started_at": (False, (str, type(None)), "UTC ISO-8601 start of the run"),
    "finished_at": (False, (str, type(None)), "UTC ISO-8601 end of the run"),
    "run_dir": (False, (str, type(None)), "absolute path of the run directory"),
    "notes": (False, (list,), "plain-language reasons for an unknown verdict, setup problems"),
    "known_deviations": (False, (list,), "the profile's acknowledged findings: id, anomaly, reason, reference, "
                                          "within (what a known finding caused), "
                                          "matched (0: the acknowledgement matched nothing)"),
    "timing": (False, (dict, type(None)), "measured call latency and the lease/work/deadline scale chosen from it"),
    "evidence": (False, (dict,), "how much the verdict rests on (chaos.reports.evidence): replies, store_unavailable "
                                 "and its share, stalls_s, paths_exercised of paths_known, thin (one sentence each)"),
    "history_sha256": (False, (str,), "deterministic mode: the sha256 of history.jsonl (same seed, same digest)"),
    "deterministic": (False, (dict,), "deterministic mode: the scheduler's seed, PCT depth, scheduling points, "
                                      "change points, virtual time, trace digest and every exact fault's point"),
    "reproduced": (False, (dict,), "deterministic mode re-run of a stored test.yaml: {of: its history_sha256, "
                                   "same_history: bool}"),
}

TEST = {
    "name": (True, (str,)),
    "backend": (True, (str,)),
    "workload": (False, (str, type(None))),
    "nemesis": (True, (list,)),
    "workers": (False, (int, type(None))),
    "time_limit": (False, (int, float, type(None))),
    "seed": (True, (int,)),
    "command": (True, (str, list)),
}

ANOMALY = {
    "type": (True, (str,)),
    "explanation": (True, (str,)),
    "ops": (True, (list,)),
    "data": (False, (dict,)),
}

COVERAGE_ROW = {"requested": (True, (bool,)), "fired": (True, (int,)), "took_effect": (True, (int,))}
WORKLOAD_ROW = {"requested": (True, (bool,)), "attempted": (True, (int,)), "completed": (True, (int,))}
STATS = {"ops": (True, (int,)), "ok": (True, (int,)), "fail": (True, (int,)), "info": (True, (int,)),
         "duration_s": (True, (int, float))}


def _typename(types) -> str:
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def _members(obj: dict, spec: dict, path: str, out: list[str]) -> None:
    for key, entry in spec.items():
        required, types = entry[0], entry[1]
        if key not in obj:
            if required:
                out.append(f"{path}{key}: missing")
            continue
        value = obj[key]
        if isinstance(value, bool) and bool not in types:
            out.append(f"{path}{key}: expected {_typename(types)}, got a boolean")
        elif not isinstance(value, types):
            out.append(f"{path}{key}: expected {_typename(types)}, got {type(value).__name__}")


def validate_results(obj) -> list[str]:
    """Every way ``obj`` departs from schema version 1 (empty list: it conforms)."""
    out: list[str] = []
    if not isinstance(obj, dict):
        return [f"results: expected an object, got {type(obj).__name__}"]
    _members(obj, TOP_LEVEL, "", out)
    if obj.get("schema_version") not in (None, SCHEMA_VERSION) and isinstance(obj.get("schema_version"), int):
        out.append(f"schema_version: {obj['schema_version']} is not supported (this reader knows {SCHEMA_VERSION})")
    verdict = obj.get("verdict")
    if isinstance(verdict, str) and verdict not in VERDICT_EXIT:
        out.append(f"verdict: {verdict!r} is not one of valid, invalid, unknown")
    if verdict in VERDICT_EXIT and isinstance(obj.get("exit_code"), int) and obj["exit_code"] != VERDICT_EXIT[verdict]:
        out.append(f"exit_code: {obj['exit_code']} does not match verdict {verdict!r} "
                   f"(expected {VERDICT_EXIT[verdict]})")
    if isinstance(obj.get("test"), dict):
        _members(obj["test"], TEST, "test.", out)
        nem = obj["test"].get("nemesis")
        if isinstance(nem, list) and not all(isinstance(n, str) for n in nem):
            out.append("test.nemesis: expected a list of fault names")
    for name, result in (obj.get("checkers") or {}).items() if isinstance(obj.get("checkers"), dict) else ():
        _checker(name, result, out)
    if isinstance(obj.get("fault_coverage"), dict):
        for fault, row in obj["fault_coverage"].items():
            if not isinstance(row, dict):
                out.append(f"fault_coverage.{fault}: expected an object")
                continue
            _members(row, COVERAGE_ROW, f"fault_coverage.{fault}.", out)
    if isinstance(obj.get("workload_coverage"), dict):
        for path, row in obj["workload_coverage"].items():
            if not isinstance(row, dict):
                out.append(f"workload_coverage.{path}: expected an object")
                continue
            _members(row, WORKLOAD_ROW, f"workload_coverage.{path}.", out)
    if isinstance(obj.get("stats"), dict):
        _members(obj["stats"], STATS, "stats.", out)
    return out


def _checker(name: str, result, out: list[str]) -> None:
    path = f"checkers.{name}."
    if not isinstance(result, dict):
        out.append(f"checkers.{name}: expected an object")
        return
    if "valid" not in result:
        out.append(f"{path}valid: missing")
    elif result["valid"] not in (True, False, "unknown"):
        out.append(f"{path}valid: expected true, false or \"unknown\", got {result['valid']!r}")
    anomalies = result.get("anomalies", [])
    if not isinstance(anomalies, list):
        out.append(f"{path}anomalies: expected a list")
        return
    if result.get("valid") is False and not anomalies:
        out.append(f"{path}anomalies: an invalid result must carry at least one anomaly")
    for i, a in enumerate(anomalies):
        if not isinstance(a, dict):
            out.append(f"{path}anomalies[{i}]: expected an object")
            continue
        _members(a, ANOMALY, f"{path}anomalies[{i}].", out)
        if isinstance(a.get("ops"), list) and not all(isinstance(x, int) and not isinstance(x, bool) for x in a["ops"]):
            out.append(f"{path}anomalies[{i}].ops: expected history indices (integers)")
    if "stats" in result and not isinstance(result["stats"], dict):
        out.append(f"{path}stats: expected an object")
