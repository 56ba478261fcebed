"""The real Wowbagger 0.1.0-alpha.7 CLI, as a black box (issue 10), whenever
Node >= 20 is here: conformance against its own api_version 2 vectors and a
short ``chaos run``. Every failure must be one documented in
docs/wowbagger-findings.md; the program's folder is never written."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUT = ROOT.parent / "shared" / "sut" / "wowbagger-0.1.0-alpha.7"
PROFILE = ROOT / "profiles" / "wowbagger-0.1.0-alpha.7.yaml"


def _node_major() -> int | None:
    node = shutil.which("node")
    if node is None:
        return None
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"v(\d+)\.", out)
    return int(m.group(1)) if m else None


_MAJOR = _node_major()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SUT / "bin" / "wowbagger.js").is_file(), reason=f"the program is not at {SUT}"),
    pytest.mark.skipif(_MAJOR is None or _MAJOR < 20,
                       reason=f"Wowbagger needs Node >= 20 (found {'no node' if _MAJOR is None else f'v{_MAJOR}'})"),
]
COMMAND = f"node {SUT / 'bin' / 'wowbagger.js'}"

#: the conformance failures docs/wowbagger-findings.md documents (F2, F3), with a line each must show
DOCUMENTED_FAILURES = {
    "clock-floor-persistence-failure": "transcript[0].stdout.error.details.ledger_namespace: expected",
    "publication-outcome-unknown": "transcript[2].exit: expected 2, got 0",
}


def _tree_digest(path: Path) -> dict:
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in path.rglob("*") if p.is_file()}


def test_conformance_against_its_own_v2_vectors_fails_only_as_documented():
    before = _tree_digest(SUT)
    p = subprocess.run([sys.executable, "-m", "chaos.cli", "conform", "--backend", "external", "--profile",
                        str(PROFILE), "--command", COMMAND, "--vectors", str(SUT / "spec" / "fixtures" / "work-claims"),
                        "--json"], capture_output=True, text=True, cwd=ROOT, timeout=1500)
    report = json.loads(p.stdout)
    by = {c["case"]: c for c in report["cases"]}
    failed = {n for n, c in by.items() if c["status"] == "fail"}
    assert failed == set(DOCUMENTED_FAILURES), {n: by[n]["diff"][:4] for n in failed}
    for name, line in DOCUMENTED_FAILURES.items():
        assert any(d.startswith(line) for d in by[name]["diff"]), by[name]["diff"]
    assert p.returncode == 1 and report["errors"] == 0
    ran = [c for c in by.values() if c["status"] in ("pass", "profile-substituted")]
    assert len(ran) >= 10
    assert all(c["notes"] and c["notes"][0] for c in by.values() if c["status"] == "not-applicable")
    assert "epoch" in by["epoch-exhaustion"]["notes"][0] and "legacy" in by["legacy-write-refusals"]["notes"][0]
    assert _tree_digest(SUT) == before   # the program's folder is read-only to the suite


def _completions(history: list[dict]):
    """(its request, the completion) of every client op, in the history's order."""
    sent: dict = {}
    for o in history:
        if o.get("process") == "nemesis":
            continue
        if o["type"] == "invoke":
            sent[o["process"]] = o
        else:
            yield sent.get(o["process"], {}), o


def _is_f10(anomaly: dict, history: list[dict], repo: Path) -> bool:
    """docs/wowbagger-findings.md F10: claim-verify finalized the publication at the commit an agent
    made for another operation id of the same item (the one before it), or at the parent of the commit
    of its bytes (the set-up's seeding commit, when it was the item's first publication), not at the
    commit of its bytes: HEAD resolved before that commit, its bytes read after it."""
    if anomaly.get("type") != "finalized-bytes-differ":
        return False
    named, oid = (anomaly.get("data") or {}).get("commit"), (anomaly.get("data") or {}).get("operation_id")
    commits = {req["value"].get("operation_id"): (((o.get("value") or {}).get("envelope") or {}).get("result") or {})
               .get("git_commit") for req, o in _completions(history) if req.get("f") == "commit" and o["type"] == "ok"}
    if any(other not in (None, oid) and commit == named for other, commit in commits.items()):
        return True
    own = commits.get(oid)
    parent = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"{own}^"],
                            capture_output=True, text=True).stdout.strip() if own else ""
    return bool(named) and parent == named


def _is_f7(anomaly: dict, history: list[dict]) -> bool:
    """docs/wowbagger-findings.md F7: the accepted stale publish is a retry of an operation id an
    earlier attempt of which was answered publication-outcome-unknown (its final record failed)."""
    by_index = {o["index"]: o for o in history}
    publishes = [by_index[i] for i in anomaly.get("ops", []) if by_index.get(i, {}).get("f") == "publish"
                 and by_index[i]["type"] == "invoke"]
    if anomaly.get("type") != "stale-fence-accepted" or not publishes:
        return False
    oid = publishes[-1]["value"].get("operation_id")
    return any(req.get("f") == "publish" and req["value"].get("operation_id") == oid
               and ((((o.get("value") or {}).get("envelope") or {}).get("error")) or {}).get("code")
               == "publication-outcome-unknown" for req, o in _completions(history))


def test_a_short_chaos_run_commits_verifies_and_finds_only_documented_deviations(tmp_path):
    p = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--backend", "external", "--profile", str(PROFILE),
                        "--command", COMMAND, "--nemesis", "kill,fsync", "--time-limit", "25", "--workers", "3",
                        "--scale", "2", "--seed", "5", "--timed", "--store", str(tmp_path / "store")],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    latest = tmp_path / "store" / "latest"
    results = json.loads((latest / "results.json").read_text())
    unacknowledged = {name: [a["type"] for a in r.get("anomalies", [])]
                      for name, r in results["checkers"].items() if r.get("anomalies")}
    known = {d["id"]: d.get("matched", 0) for d in results["known_deviations"]}
    # F4 and F5 also break linearizability there, on their own ops: acknowledged (within), nothing else is
    allowed: dict = {}
    history = [json.loads(line) for line in (latest / "history.jsonl").read_text().splitlines()]
    if all(_is_f7(a, history) for a in results["checkers"]["stale_write"].get("anomalies", [])):
        allowed["stale_write"] = ["stale-fence-accepted"]   # F7: documented, not acknowledged (a real fence finding)
    if all(_is_f10(a, history, latest / "ledgers") for a in results["checkers"]["git_finalization"].get("anomalies", [])):
        allowed["git_finalization"] = ["finalized-bytes-differ"]   # F10: documented, not acknowledged (seen 1 run in 4)
    assert all(set(types) <= set(allowed.get(name, [])) for name, types in unacknowledged.items()), \
        (unacknowledged, results["notes"])
    assert p.returncode == results["exit_code"]
    done = [o for o in history if o["type"] != "invoke" and o.get("process") != "nemesis"]
    # the agents run claim-verify after each commit (contract §6); the final phase's follow its sweep of commits
    agent_verifies = [o for o in history if o["type"] == "invoke" and o.get("intent") == "agent:verify"]
    sweep = max(o["index"] for o in history if o["f"] == "commit" and (o.get("value") or {}).get("all"))
    verifies = [o for o in done if o["f"] == "verify" and o["index"] > sweep]
    assert agent_verifies and len(verifies) >= 2 and all(o["type"] == "ok" for o in verifies)
    assert results["checkers"]["git_finalization"]["valid"] is True or "git_finalization" in allowed
    namespaces = {o["value"]["envelope"]["result"]["ledger_namespace"] for o in verifies}
    assert len(namespaces) == len(verifies)   # one ledger per minted namespace (agents' and racers'), each verified
    assert all(re.fullmatch(r"wbns_[0-9a-f]{32}", ns) for ns in namespaces)   # the program minted them
    assert results["timing"]["scale"] == 2.0 and results["test"]["workers"] == 3
    assert list(known) == ["F1-eio-exit-1", "F2-floor-failure-details", "F3-unknown-outcome-stored",
                           "F3-nonlinearizable", "F4-killed-publish-conflict", "F4-nonlinearizable",
                           "F5-refused-acquire-took-effect", "F5-nonlinearizable", "F5-refused-renew-took-effect",
                           "F5-renew-nonlinearizable", "F5-refused-release-took-effect", "F5-release-nonlinearizable",
                           "F6-unbound-details"]
    assert (latest / "ledgers" / ".git").is_dir()
    assert subprocess.run(["git", "-C", str(latest / "ledgers"), "log", "--oneline"], capture_output=True,
                          text=True).stdout.count("\n") >= 1
