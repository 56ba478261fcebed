"""The issue-lock contract module: builder -> reader round trips, the legacy
placement, expiration_state, every gate and every refusal code of the spec."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings, strategies as st

from backends.contract.jsonstrict import canonical_json
from backends.contract.values import format_instant
from backends.issuelock.contract import builder as B
from backends.issuelock.contract import codes as C
from backends.issuelock.contract import fields as F
from backends.issuelock.contract import gates as G
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.schemas import Request, parse_request

NOW = 1_900_000_000_000
KEY = F.IssueKey("gitea", "acme", "widgets", 7)
ME = {"username": "agent-1", "profile": "author"}
YOU = {"username": "agent-2", "profile": "author"}
BASE, WORK = "a" * 40, "b" * 40


def canonical(claimant=ME, ttl=2000, now=NOW, gen=1, writer="bootstrap"):
    return B.build_canonical_issue_lock(KEY, "agent-1/issue-7", "branches/widgets-7", claimant, ttl, now, gen, writer)


def thin(claimant=ME, generation=1):
    return B.build_legacy_bootstrap_lock(KEY, "agent-1/issue-7", "branches/widgets-7", claimant, generation)


def observed(head=WORK, exists=True, registered=True, branch="agent-1/issue-7", issue=KEY.path):
    return {"branch_head": head, "base_head": BASE, "branch_issue": issue,
            "worktree": {"exists": exists, "registered": registered, "branch": branch}}


names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)


@settings(max_examples=150, deadline=None)
@given(remote=names, org=names, repo=names, issue=st.integers(1, F.ISSUE_MAX), user=names, profile=names,
       ttl=st.integers(F.TTL_MIN_MS, F.TTL_MAX_MS), now=st.integers(0, 200_000_000_000_000),
       gen=st.integers(1, 2**40), writer=st.sampled_from(F.WRITERS))
def test_every_built_lock_round_trips_through_the_reader_and_passes_every_gate(remote, org, repo, issue, user, profile,
                                                                               ttl, now, gen, writer):
    key = F.IssueKey(remote, org, repo, issue)
    who = {"username": user, "profile": profile}
    lock = B.build_canonical_issue_lock(key, f"{user}/issue-{issue}", f"branches/{repo}-{issue}", who, ttl, now,
                                        gen, writer)
    back = R.parse_lock(canonical_json(lock))
    assert back == lock
    assert R.missing_fields(back) == [] and R.lock_contract(back) == F.CONTRACT_CANONICAL
    assert R.lock_claimant(back) == who and R.claimant_placement(back) == "work_lease"
    assert R.expiration_state(back) == F.EXPIRY_RECORDED and R.expires_at_ms(back) == now + ttl
    assert R.lock_generation(back) == gen and F.full(F.SESSION_RE, R.task_session_id(back))
    assert R.is_live(back, now) and not R.is_live(back, now + ttl)
    session = R.task_session_id(back)
    assert G.assess_heartbeat(back, who, session, now) is None
    assert G.assess_renew(back, who, session, now + ttl) is None
    assert G.assess_lock_file_for_create_pr(back) is None
    nxt = B.next_lease_write(back, now + 1)
    assert R.lock_generation(nxt) == gen + 1 and nxt["work_lease"]["heartbeat_count"] == 1
    assert R.expires_at_ms(nxt) == now + 1 + ttl and R.task_session_id(nxt) == session


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_removing_or_nulling_any_required_field_is_named_and_never_canonical(data):
    lock = canonical()
    paths = list(F.REQUIRED_LOCK_FIELDS) + [f"work_lease.{f}" for f in F.REQUIRED_WORK_LEASE_FIELDS] + \
        [f"work_lease.claimant.{f}" for f in F.REQUIRED_CLAIMANT_FIELDS] + \
        [f"lock_provenance.{f}" for f in F.REQUIRED_PROVENANCE_FIELDS]
    path = data.draw(st.sampled_from(paths))
    how = data.draw(st.sampled_from(["delete", "null"]))
    broken = copy.deepcopy(lock)
    node, parts = broken, path.split(".")
    for p in parts[:-1]:
        node = node[p]
    if how == "delete":
        del node[parts[-1]]
    else:
        node[parts[-1]] = None
    assert path in R.missing_fields(broken)
    assert not R.is_canonical(broken) and not R.is_live(broken, NOW)
    assert R.lock_contract(broken) in (F.CONTRACT_LEGACY, F.CONTRACT_INCOMPLETE)
    refusal = G.assess_heartbeat(broken, ME, R.task_session_id(lock), NOW)
    assert refusal.code == C.INCOMPLETE and path in refusal.details["missing_fields"]


def test_the_thin_shape_is_legacy_and_its_claimant_is_read_from_the_top_level():
    lock = thin()
    assert R.lock_contract(lock) == F.CONTRACT_LEGACY
    assert R.missing_fields(lock) == ["work_lease", "lock_provenance"]
    assert R.lock_claimant(lock) == ME and R.claimant_placement(lock) == "top-level"
    assert R.expiration_state(lock) == F.EXPIRY_MISSING
    assert lock["lease_id"] is None and R.task_session_id(lock) is None
    assert G.assess_lock_file_for_create_pr(lock).code == C.CREATE_PR_GUARD
    assert G.assess_heartbeat(lock, ME, "ts_" + "0" * 32, NOW).code == C.INCOMPLETE


def test_when_both_placements_are_present_the_work_lease_copy_wins():
    lock = canonical(claimant=ME)
    lock["claimant"] = dict(YOU)  # a stale top-level copy after an upgrade
    assert R.lock_claimant(lock) == ME
    assert G.recovery_decision(lock, YOU, KEY, lock["branch_name"], lock["worktree_path"], WORK, NOW,
                               observed()).code == C.HEALTHY_FOREIGN_LOCK
    half = thin(claimant=YOU)
    half["work_lease"] = {"claimant": dict(ME)}  # a partial upgrade: lease claimant, no expiry
    assert R.lock_claimant(half) == ME and R.claimant_placement(half) == "work_lease"


@pytest.mark.parametrize("value,state", [
    (None, F.EXPIRY_MISSING), ("soon", F.EXPIRY_UNPARSEABLE), (123, F.EXPIRY_UNPARSEABLE),
    ("2030-02-30T00:00:00.000Z", F.EXPIRY_UNPARSEABLE), ("2030-01-01T00:00:00Z", F.EXPIRY_UNPARSEABLE),
    (format_instant(NOW), F.EXPIRY_RECORDED)])
def test_expiration_state_names_the_real_fact(value, state):
    lock = canonical()
    lock["work_lease"]["expires_at"] = value
    assert R.expiration_state(lock) == state
    if state != F.EXPIRY_RECORDED:
        # never "not yet expired": never live, never blocking, eligible for its owner's recovery
        assert not R.is_live(lock, 0) and R.expires_at_ms(lock) is None
        assert G.assess_bootstrap(lock, YOU, NOW, observed()) is None
        assert G.recommended_action(lock, ME, NOW, observed()) == C.NEXT_RECOVER
        assert G.recovery_decision(lock, ME, KEY, lock["branch_name"], lock["worktree_path"], WORK, NOW,
                                   observed()) is None


def test_missing_expiry_is_eligible_for_recovery_and_not_renewal():
    lock = canonical()
    del lock["work_lease"]["expires_at"]
    refusal = G.assess_renew(lock, ME, R.task_session_id(lock), NOW + 10**9)
    assert refusal.code == C.INCOMPLETE and "work_lease.expires_at" in refusal.details["missing_fields"]
    assert G.recovery_decision(lock, ME, KEY, lock["branch_name"], lock["worktree_path"], WORK, NOW,
                               observed()) is None


def _case(code):
    """(lock, identity, key, branch, worktree, expected_head, observed) producing ``code``."""
    b, w = "agent-1/issue-7", "branches/widgets-7"
    other_repo = thin()
    other_repo["repo"] = "gadgets"
    wrong_profile = {"username": "agent-1", "profile": "reviewer"}
    return {
        C.NO_DURABLE_LOCK: (None, ME, KEY, b, w, WORK, observed()),
        C.ALREADY_CANONICAL: (canonical(), ME, KEY, b, w, WORK, observed()),
        C.FOREIGN_CLAIMANT: (thin(), wrong_profile, KEY, b, w, WORK, observed()),
        C.HEALTHY_FOREIGN_LOCK: (canonical(), YOU, KEY, b, w, WORK, observed()),
        C.IDENTITY_UNRESOLVED: (thin(), None, KEY, b, w, WORK, observed()),
        C.BINDING_MISMATCH: (other_repo, ME, KEY, b, w, WORK, observed()),
        C.WORKTREE_INVALID: (thin(), ME, KEY, b, w, WORK, observed(branch="agent-1/elsewhere")),
        C.HEAD_MISMATCH: (thin(), ME, KEY, b, w, BASE, observed()),
    }[code]


@pytest.mark.parametrize("code", C.REFUSAL_CODES)
def test_every_refusal_code_of_the_spec_table(code):
    lock, ident, key, b, w, head, obs = _case(code)
    assert G.recovery_decision(lock, ident, key, b, w, head, NOW, obs).code == code


@pytest.mark.parametrize("obs,code", [
    (observed(exists=False), C.WORKTREE_INVALID), (observed(registered=False), C.WORKTREE_INVALID),
    (observed(), None)])
def test_worktree_validity_and_a_successful_decision(obs, code):
    got = G.recovery_decision(thin(), ME, KEY, "agent-1/issue-7", "branches/widgets-7", WORK, NOW, obs)
    assert (got.code if got else None) == code
    wrong_branch = G.recovery_decision(thin(), ME, KEY, "agent-1/other", "branches/widgets-7", WORK, NOW, obs)
    assert wrong_branch.code == C.BINDING_MISMATCH


def test_an_expired_canonical_foreign_lock_is_a_foreign_claimant_not_a_healthy_one():
    lock = canonical(claimant=YOU)
    got = G.recovery_decision(lock, ME, KEY, lock["branch_name"], lock["worktree_path"], WORK, NOW + 10**6,
                              observed())
    assert got.code == C.FOREIGN_CLAIMANT


def test_session_gates_fence_on_the_task_session_id():
    lock = canonical()
    s = R.task_session_id(lock)
    stale = "ts_" + "f" * 32
    assert G.assess_heartbeat(lock, ME, stale, NOW).code == C.STALE_SESSION
    assert G.assess_heartbeat(lock, YOU, s, NOW).code == C.FOREIGN_CLAIMANT
    assert G.assess_heartbeat(lock, None, s, NOW).code == C.IDENTITY_UNRESOLVED
    assert G.assess_heartbeat(None, ME, s, NOW).code == C.NO_DURABLE_LOCK
    assert G.assess_heartbeat(lock, ME, s, NOW + 2000).code == C.LEASE_EXPIRED
    assert G.assess_renew(lock, ME, s, NOW).code == C.LEASE_NOT_EXPIRED
    assert G.assess_create_pr(lock, ME, s, NOW, observed(head=BASE)).code == C.NOTHING_TO_PROPOSE
    assert G.assess_create_pr(lock, ME, s, NOW, observed()) is None
    unsanctioned = copy.deepcopy(lock)
    unsanctioned["lock_provenance"]["source"] = "gitea_bootstrap_author_issue_worktree"
    assert G.assess_create_pr(unsanctioned, ME, s, NOW, observed()).code == C.CREATE_PR_GUARD


def test_relock_only_while_base_equivalent_and_never_over_a_live_foreign_lock():
    b, w = "agent-1/issue-7", "branches/widgets-7"
    assert G.assess_relock(canonical(), ME, KEY, b, w, NOW, observed(head=BASE)) is None
    assert G.assess_relock(canonical(), ME, KEY, b, w, NOW, observed()).code == C.NOT_BASE_EQUIVALENT
    assert G.assess_relock(canonical(), YOU, KEY, b, w, NOW, observed(head=BASE)).code == C.HEALTHY_FOREIGN_LOCK
    assert G.assess_relock(canonical(), YOU, KEY, b, w, NOW + 5000, observed(head=BASE)) is None
    assert G.assess_relock(None, ME, KEY, b, w, NOW, observed(head=BASE, issue="gitea/acme/widgets/9")).code \
        == C.BINDING_MISMATCH


@pytest.mark.parametrize("success,code,obs,action", [
    (True, None, observed(head=BASE), C.NEXT_HEARTBEAT),
    (False, C.INCOMPLETE, observed(), C.NEXT_RECOVER),
    (False, C.INCOMPLETE, observed(head=BASE), C.NEXT_LOCK),
    (False, C.ALREADY_CANONICAL, observed(head=BASE), C.NEXT_LOCK),
    (False, C.ALREADY_CANONICAL, observed(), C.NEXT_NONE),
    (False, C.HEALTHY_FOREIGN_LOCK, observed(), C.NEXT_NONE),
    (False, C.IDENTITY_UNRESOLVED, None, C.NEXT_WHOAMI)])
def test_bootstrap_next_action_matches_the_state_it_returned(success, code, obs, action):
    assert G.bootstrap_next_action(success, code, obs) == action


def test_bootstrap_gate():
    assert G.assess_bootstrap(None, ME, NOW, None) is None
    assert G.assess_bootstrap(canonical(), YOU, NOW, observed()).code == C.HEALTHY_FOREIGN_LOCK
    assert G.assess_bootstrap(canonical(), ME, NOW, observed()).code == C.ALREADY_CANONICAL
    assert G.assess_bootstrap(canonical(), YOU, NOW + 2000, observed()) is None
    assert G.assess_bootstrap(thin(), ME, NOW, observed()).code == C.INCOMPLETE
    assert G.assess_bootstrap(thin(), YOU, NOW, observed()) is None  # takeover: no live recorded expiry
    assert G.assess_bootstrap(None, None, NOW, None).code == C.IDENTITY_UNRESOLVED


def test_recovered_lock_records_both_sides_and_is_canonical():
    prior = thin(generation=4)
    new = B.build_recovered_lock(prior, ME, 2000, NOW, WORK)
    assert R.is_canonical(new) and R.lock_generation(new) == 5
    block = new[F.RECOVERY_BLOCK]
    assert set(block) == set(F.RECOVERY_FIELDS)
    assert block["prior_contract"] == F.CONTRACT_LEGACY and block["prior_generation"] == 4
    assert block["prior_missing_fields"] == ["work_lease", "lock_provenance"]
    assert block["prior_owning_session"] is None and block["prior_claimant_placement"] == "top-level"
    assert block["replacement_task_session_id"] == R.task_session_id(new) and block["preserved_head"] == WORK
    assert new["lock_provenance"] == {"source": F.SOURCE_LOCK_ISSUE, "writer": "recover",
                                      "minted_at": format_instant(NOW)}
    assert "claimant" not in new and new["branch_name"] == prior["branch_name"]
    assert B.build_recovered_lock(thin(generation=None), ME, 2000, NOW, WORK)["lock_generation"] == 1


@pytest.mark.parametrize("extra", [{"lock_provenance": {"source": F.SOURCE_LOCK_ISSUE}}, {"authorized": True},
                                   {"task_session_id": "ts_" + "0" * 32}, {"lock_generation": 9}])
def test_recovery_accepts_no_caller_supplied_provenance_or_authorization(extra):
    req = {"agent_token": "t1", **KEY.as_request(), "branch_name": "b", "worktree_path": "branches/b",
           "expected_head": WORK, **extra}
    reply = parse_request("recover", canonical_json(req))
    assert reply.exit == C.EXIT_INVALID and reply.envelope["reason_code"] == C.INVALID_REQUEST
    assert reply.envelope["details"]["member"] == next(iter(extra))


def test_requests_are_strict_and_task_session_id_is_never_null():
    ok = parse_request("heartbeat", canonical_json({"agent_token": "t", **KEY.as_request(),
                                                     "task_session_id": "ts_" + "1" * 32}))
    assert isinstance(ok, Request) and ok.key == KEY
    null = parse_request("heartbeat", canonical_json({"agent_token": "t", **KEY.as_request(), "task_session_id": None}))
    assert null.exit == C.EXIT_INVALID and null.envelope["details"]["member"] == "task_session_id"
    dup = parse_request("whoami", b'{"agent_token":"a","agent_token":"b"}')
    assert dup.exit == C.EXIT_INVALID
    assert parse_request("recover", canonical_json({"agent_token": "t", **KEY.as_request(), "branch_name": "b",
                                                    "worktree_path": "branches/b", "expected_head": WORK})).get(
        "dry_run") is False


def test_codes_messages_and_the_spec_table_are_complete():
    assert len(C.REFUSAL_CODES) == 8 and len(set(C.REFUSAL_CODES)) == 8
    for code in (*C.REFUSAL_CODES, *C.GATE_CODES, C.INCOMPLETE, C.INVALID_REQUEST, C.STORE_UNAVAILABLE,
                 C.OUTCOME_UNKNOWN):
        assert C.MESSAGE[code]
    assert not set(C.REFUSAL_CODES) & set(C.GATE_CODES)
