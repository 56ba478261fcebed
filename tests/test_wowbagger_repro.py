"""The plain-CLI reproductions of the Wowbagger findings (docs/wowbagger-repro/,
docs/wowbagger-findings.md) still show each finding against the real program:
a finding whose script no longer reproduces it is either fixed upstream or a
broken script, and the findings document must say which."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from test_wowbagger import pytestmark as _needs_wowbagger

ROOT = Path(__file__).resolve().parents[1]
REPRO = ROOT / "docs" / "wowbagger-repro"

pytestmark = [*_needs_wowbagger, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("gcc") is None, reason="the preloads are compiled with gcc")]


def _run(script: str, **env: str) -> tuple[str, list[dict]]:
    p = subprocess.run(["bash", str(REPRO / script)], cwd=ROOT, capture_output=True, text=True, timeout=240,
                       env={**os.environ, **env})
    replies = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            try:
                replies.append(json.loads(line))
            except ValueError:   # a reply the script cut short for display
                continue
    return p.stdout + p.stderr, replies


def _code(reply: dict) -> str | None:
    return (reply.get("error") or {}).get("code")


def test_f1_a_failed_fsync_exits_1_with_no_reply():
    out, _ = _run("f1-eio-exit-1.sh")
    assert re.search(r"^exit=1 stdout_bytes=0 ", out, re.M), out


def test_f2_floor_failure_has_empty_details():
    out, replies = _run("f2-floor-failure-details.sh")
    assert [(_code(r), r["error"]["details"]) for r in replies] == [("clock-floor-persistence-failed", {})], out


def test_f3_an_unknown_outcome_is_stored_and_answered_forever():
    out, replies = _run("f3-unknown-stored-forever.sh")
    assert "item bytes unchanged: yes" in out, out
    publish, read, retry = replies[:3]
    assert _code(publish) == "publication-outcome-unknown" and read["state"] == "committed"
    assert read["result"]["outcome"]["stdout"]["state"] == "unknown" and _code(retry) == "publication-outcome-unknown"


def test_f4_a_killed_publish_is_refused_with_swapped_revisions():
    out, replies = _run("f4-killed-publish-conflict.sh")
    read, retry = replies[:2]
    candidate = re.search(r"request candidate_sha256=(\S+)", out).group(1)
    expected = re.search(r"request expected_revision=(\S+)", out).group(1)
    assert _code(read) == "operation-not-found" and _code(retry) == "ledger-revision-conflict", out
    assert retry["error"]["details"]["expected_revision"] == candidate
    assert retry["error"]["details"]["actual_revision"] == expected


def test_f5_a_refused_acquire_took_effect():
    out, replies = _run("f5-refused-acquire-took-effect.sh")
    refused, read, rival = replies[:3]
    assert _code(refused) == "clock-floor-persistence-failed" and refused["state"] == "unchanged", out
    assert read["result"]["read_back"]["active"]["owner_id"] == "agent-1"
    assert _code(rival) == "claim-conflict"


def test_f6_unbound_claim_details_differ_from_the_publication_read():
    out, replies = _run("f6-unbound-details.sh")
    claim, publication = replies[:2]
    assert _code(claim) == _code(publication) == "ledger-namespace-unbound", out
    assert set(claim["error"]["details"]) == {"requested_namespace", "provisioned_namespace"}
    assert set(publication["error"]["details"]) == {"ledger_namespace", "item_id"}


def test_f7_an_unknown_publish_is_completed_after_its_lease_expired():
    for lease_s in (4, 12, 36):  # a loaded machine may take the whole lease to start the publish's node
        out, replies = _run("f7-unknown-publish-completed-after-expiry.sh", LEASE_MS=str(lease_s * 1000))
        publish, read, retry = replies[:3]
        if (publish.get("error") or {}).get("details", {}).get("reason") != "claim-expired":
            break
    assert _code(publish) == "publication-outcome-unknown" and _code(read) == "operation-not-found", out
    assert "journal: publish-intent 1, publish-final 0; item holds the candidate: yes" in out
    assert retry["ok"] is True and retry["state"] == "committed"
    active = retry["claim_read_back.active"]
    assert retry["claim_read_back.observed_at"] > active["expires_at"]   # same format, UTC: ordered as text


def test_f8_a_noncanonical_fence_is_decided_and_one_fills_the_journal():
    out, replies = _run("f8-noncanonical-fence-decided.sh")
    owner, read, epoch, acquire, renew, other = replies[:6]
    assert _code(owner) == _code(epoch) == "claim-fence-rejected", out
    assert read["state"] == "committed" and read["result"]["outcome"]["exit"] == 4   # the refusal was stored
    assert _code(acquire) == "invalid-request"            # the claim commands know the owner grammar
    assert _code(renew) == _code(other) == "clock-floor-persistence-failed"


def test_f9_a_publish_refused_as_ledger_invalid_moves_the_floor():
    out, _ = _run("f9-refusal-moves-floor.sh")
    seen = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in re.findall(r"^observed_at (\S+)$", out, re.M)]
    assert len(seen) == 3 and '"code":"ledger-invalid"' in out, out
    now, after_invalid, after_digest = seen
    assert after_invalid - now > timedelta(hours=23), out   # the day-ahead refusal's instant became the floor
    assert after_digest == after_invalid, out               # a wrong digest, refused before the floor, did not
