"""The issue-lock stores (SQLite, git-file) through the one engine: the protocol's
paths on real storage, real git worktrees, and real concurrent processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backends.api import FixedClock
from backends.issuelock.contract import builder as B
from backends.issuelock.contract import codes as C
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.fields import IssueKey
from backends.registry import open_backend

NOW = 1_900_000_000_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K7 = IssueKey("gitea", "acme", "widgets", 7)
K8 = IssueKey("gitea", "acme", "widgets", 8)
A1 = {"username": "agent-1", "profile": "author"}


def seed_doc():
    legacy = B.build_legacy_bootstrap_lock(K8, "agent-1/issue-8", "branches/widgets-8", A1)
    return {"config": {"lease_ttl_ms": 2000},
            "identities": [{"token": "t1", **A1}, {"token": "t2", "username": "agent-2", "profile": "author"},
                           {"token": "t3", "username": "agent-3", "profile": None}],
            "repositories": [{"remote": "gitea", "org": "acme", "repo": "widgets"}],
            "bindings": [{**K8.as_request(), "branch_name": "agent-1/issue-8", "worktree_path": "branches/widgets-8",
                          "commits": [{"message": "legacy work", "content": "x", "author": A1}]},
                         {**IssueKey("gitea", "acme", "widgets", 9).as_request(), "branch_name": "agent-1/issue-9",
                          "worktree_path": "branches/widgets-9", "worktree": "other-branch", "commits": []}],
            "locks": [{**K8.as_request(), "lock": legacy}]}


def spec_for(kind, tmp_path):
    if kind == "sqlite":
        return {"protocol": "issue-lock", "backend": "sqlite", "path": str(tmp_path / "locks.db")}
    return {"protocol": "issue-lock", "backend": "gitfile", "root": str(tmp_path / "store")}


@pytest.fixture(params=["sqlite", "gitfile"])
def store(request, tmp_path):
    spec = spec_for(request.param, tmp_path)
    clock = FixedClock(NOW)
    be = open_backend(spec, clock)
    be.store.seed(seed_doc())
    yield request.param, be, clock, spec
    be.close()


def call(be, op, token, key, **members):
    reply = be.call(op, {"agent_token": token, **key.as_request(), **members})
    return reply.exit, reply.envelope


def test_bootstrap_heartbeat_commit_create_pr_and_fencing(store):
    _, be, clock, _ = store
    code, env = call(be, "bootstrap", "t1", K7)
    assert code == 0 and env["implementation_allowed"] is True and env["exact_next_action"]["op"] == "heartbeat"
    lock, s1 = env["lock"], env["task_session_id"]
    assert R.is_canonical(lock) and lock["lock_provenance"]["writer"] == "bootstrap"
    assert env["binding"]["worktree"] == {"exists": True, "registered": True, "branch": lock["branch_name"]}
    assert call(be, "bootstrap", "t2", K7)[1]["reason_code"] == C.HEALTHY_FOREIGN_LOCK
    code, env = call(be, "lock", "t1", K7, branch_name=lock["branch_name"], worktree_path=lock["worktree_path"])
    assert code == 0 and env["lock"]["lock_generation"] == 2
    s2 = env["task_session_id"]
    assert s2 != s1
    assert call(be, "heartbeat", "t1", K7, task_session_id=s1)[1]["reason_code"] == C.STALE_SESSION
    assert call(be, "commit", "t1", K7, task_session_id=s1, message="m", content="c")[1]["reason_code"] \
        == C.STALE_SESSION
    code, env = call(be, "commit", "t1", K7, task_session_id=s2, message="work", content="first")
    assert code == 0 and env["commit"]["parent"] != env["commit"]["head"]
    assert call(be, "lock", "t1", K7, branch_name=lock["branch_name"],
                worktree_path=lock["worktree_path"])[1]["reason_code"] == C.NOT_BASE_EQUIVALENT
    code, env = call(be, "heartbeat", "t1", K7, task_session_id=s2)
    assert code == 0 and env["lock"]["lock_generation"] == 3 and env["lock"]["work_lease"]["heartbeat_count"] == 1
    clock.set(NOW + 5000)
    assert call(be, "heartbeat", "t1", K7, task_session_id=s2)[1]["reason_code"] == C.LEASE_EXPIRED
    assert call(be, "create-pr", "t1", K7, task_session_id=s2)[1]["reason_code"] == C.LEASE_EXPIRED
    code, env = call(be, "renew", "t1", K7, task_session_id=s2)
    assert code == 0 and env["lock"]["lock_generation"] == 4
    assert call(be, "renew", "t1", K7, task_session_id=s2)[1]["reason_code"] == C.LEASE_NOT_EXPIRED
    code, env = call(be, "create-pr", "t1", K7, task_session_id=s2)
    assert code == 0 and env["pull_request"]["lock_generation"] == 4
    assert call(be, "create-pr", "t1", K7, task_session_id=s2)[1]["reason_code"] == C.PR_EXISTS
    clock.set(NOW + 20000)  # expired: a foreign takeover is a new lock on a new branch, the old one kept
    code, env = call(be, "bootstrap", "t2", K7)
    assert code == 0 and env["lock"]["lock_generation"] == 5 and env["prior"]["task_session_id"] == s2
    assert call(be, "heartbeat", "t1", K7, task_session_id=s2)[1]["reason_code"] == C.FOREIGN_CLAIMANT


def test_recovery_of_a_legacy_lock_keeps_the_branch_and_records_both_sides(store):
    _, be, _, _ = store
    code, env = call(be, "inspect", "t1", K8)
    assert code == 0 and env["contract"] == "legacy-bootstrap" and env["expiration_state"] == "missing"
    assert env["recommended_action"] == "recover" and env["claimant_placement"] == "top-level"
    head = env["binding"]["branch_head"]
    assert head != env["binding"]["base_head"]
    code, env = call(be, "bootstrap", "t1", K8)
    assert code == 3 and env["reason_code"] == C.INCOMPLETE and env["implementation_allowed"] is False
    assert env["exact_next_action"]["op"] == "recover" and env["exact_next_action"]["request"]["expected_head"] == head
    binding = {"branch_name": "agent-1/issue-8", "worktree_path": "branches/widgets-8"}
    before = be.store.export_durable()
    assert call(be, "recover", "t1", K8, **binding, expected_head="0" * 40)[1]["refusal_code"] == C.HEAD_MISMATCH
    assert call(be, "recover", "t2", K8, **binding, expected_head=head)[1]["refusal_code"] == C.FOREIGN_CLAIMANT
    assert call(be, "recover", "t3", K8, **binding, expected_head=head)[1]["refusal_code"] == C.IDENTITY_UNRESOLVED
    assert call(be, "recover", "t1", K7, **binding, expected_head=head)[1]["refusal_code"] == C.NO_DURABLE_LOCK
    code, env = call(be, "recover", "t1", K8, **binding, expected_head=head, dry_run=True)
    assert code == 0 and env["decision"] == "would_recover" and env["state"] == "unchanged"
    assert call(be, "inspect", "t1", K8)[0] == 0
    assert be.store.export_durable() == before  # refusals, dry run and inspect wrote nothing
    code, env = call(be, "recover", "t1", K8, **binding, expected_head=head)
    assert code == 0 and env["head_after"] == head and env["prior"]["contract"] == "legacy-bootstrap"
    block = env["lock"]["bootstrap_lock_recovery"]
    assert block["preserved_head"] == head and block["replacement_task_session_id"] == env["task_session_id"]
    assert call(be, "recover", "t1", K8, **binding, expected_head=head)[1]["refusal_code"] == C.ALREADY_CANONICAL
    assert call(be, "heartbeat", "t1", K8, task_session_id=env["task_session_id"])[0] == 0
    assert call(be, "create-pr", "t1", K8, task_session_id=env["task_session_id"])[0] == 0
    after = {b["name"]: b["head"] for b in be.store.export_durable()["branches"]}
    assert after["agent-1/issue-8"] == head


def test_worktree_checked_out_elsewhere_is_worktree_invalid(store):
    _, be, _, _ = store
    k9 = IssueKey("gitea", "acme", "widgets", 9)
    wt = {"branch_name": "agent-1/issue-9", "worktree_path": "branches/widgets-9"}
    env = call(be, "inspect", "t1", k9, **wt)[1]
    assert env["binding"]["worktree"]["branch"] == "agent-1/issue-9-elsewhere"
    assert call(be, "lock", "t1", k9, **wt)[1]["reason_code"] == C.WORKTREE_INVALID


def test_unknown_repository_and_bad_requests(store):
    _, be, _, _ = store
    nowhere = IssueKey("gitea", "acme", "nowhere", 1)
    assert call(be, "bootstrap", "t1", nowhere)[1]["reason_code"] == C.BINDING_MISMATCH
    assert call(be, "recover", "t1", nowhere, branch_name="b", worktree_path="branches/b",
                expected_head="0" * 40)[1]["refusal_code"] == C.NO_DURABLE_LOCK
    assert be.call("whoami", {"agent_token": "t3"}).envelope["reason_code"] == C.IDENTITY_UNRESOLVED
    assert be.call("whoami", {"agent_token": "nobody"}).envelope["reason_code"] == C.IDENTITY_UNRESOLVED
    assert be.call("whoami", {"agent_token": "t1"}).envelope["identity"] == A1
    assert be.call("bootstrap", b'{"agent_token": "t1"').exit == C.EXIT_INVALID


RACE = r"""
import json, sys
from backends.registry import open_backend
spec = json.loads(sys.argv[1])
be = open_backend(spec)
r = be.call("bootstrap", {"agent_token": sys.argv[2], "remote": "gitea", "org": "acme", "repo": "widgets",
                          "issue_number": 7})
print(json.dumps({"exit": r.exit, "code": r.envelope.get("reason_code"), "gen": (r.envelope.get("lock") or {}).get("lock_generation")}))
"""


def test_concurrent_bootstraps_in_separate_processes_make_exactly_one_owner(store):
    kind, be, _, spec = store
    env = {**os.environ, "PYTHONPATH": ROOT}
    procs = [subprocess.Popen([sys.executable, "-c", RACE, json.dumps(spec), tok], stdout=subprocess.PIPE,
                              text=True, env=env) for tok in ("t1", "t2", "t1", "t2")]
    replies = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert sorted(r["exit"] for r in replies) == [0, 3, 3, 3], replies
    assert {r["code"] for r in replies if r["exit"]} <= {C.HEALTHY_FOREIGN_LOCK, C.ALREADY_CANONICAL}
    locks = be.store.export_durable()["locks"]
    assert [e["lock"]["lock_generation"] for e in locks if e["issue_number"] == 7] == [1]


def test_gitfile_removes_git_lock_files_left_by_a_killed_git(tmp_path):
    spec = spec_for("gitfile", tmp_path)
    be = open_backend(spec, FixedClock(NOW))
    be.store.seed(seed_doc())
    env = call(be, "bootstrap", "t1", K7)[1]
    s, wt = env["task_session_id"], env["lock"]["worktree_path"]
    repo = be.store.repo_dir(K7.repository)
    name = os.path.basename(wt)
    stale = os.path.join(repo, ".git", "worktrees", name, "index.lock")
    open(stale, "w").close()  # what a SIGKILLed `git commit` leaves behind
    code, env = call(be, "commit", "t1", K7, task_session_id=s, message="after a crash", content="ok")
    assert code == 0, env
    assert not os.path.exists(stale)
    log = subprocess.run(["git", "-C", os.path.join(repo, wt), "log", "--format=%s %ae", "-1"], capture_output=True,
                         text=True).stdout
    assert log.strip() == "after a crash agent-1@author"
