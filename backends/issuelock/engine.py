"""The decision logic of the issue-lock protocol, written once over a ``LockStore``.

Every issue-lock store (SQLite, git-file) runs this engine; a store supplies
durable storage and its serialized transaction, and never decides or formats
anything (all gates and replies come from ``backends.issuelock.contract``).

One decision = one ``store.transaction(write=...)``: the engine reads the
backend's own clock INSIDE it (after the serialization point, so a caller that
waited for the lock never decides with a time from before the wait), reads the
lock through the one reader, asks the contract's gate, and writes the record
the contract's builder made. Both writers read the lock back and verify it
structurally before reporting success; a partial lock fails closed with the
missing fields named and never says ``implementation_allowed: true``.

Store failures: ``StoreUnavailable`` -> exit 6 ``store_unavailable`` (nothing
was decided); ``CommitOutcomeUnknown`` -> exit 6 ``outcome_unknown``.

Override points (the suite's planted bugs subclass the engine here, and only
here): ``_build_bootstrap_lock``, ``_verify_written``, ``_gate``,
``_recovery_refusal``, ``_lease_successor``, ``_next_action``, ``_inspect_view``.

The ``LockStore`` protocol (see ``backends/issuelock/sqlite.py`` and
``gitfile/store.py``): ``transaction(write)`` yields a txn with
``identity(token)``, ``repository(repo_key)``, ``ttl_ms()``, ``get_lock(key)``,
``put_lock(key, lock)``, ``branch(repo_key, name)``, ``worktree(repo_key, path)``,
``create_binding(key, branch, worktree, at_head)``, ``commit(repo_key, branch,
worktree, message, content, author)``, ``get_pr(key)``, ``put_pr(key, pr)``;
the store itself has ``seed(durable)``, ``export_durable()``, ``reopen()``,
``close()``.
"""

from __future__ import annotations

from backends.api import CommitOutcomeUnknown, Hooks, StoreUnavailable
from backends.contract.records import Reply
from backends.contract.jsonstrict import compact_json
from backends.contract.values import format_instant
from backends.issuelock.contract import builder as B
from backends.issuelock.contract import codes as C
from backends.issuelock.contract import envelopes as E
from backends.issuelock.contract import gates as G
from backends.issuelock.contract import reader as R
from backends.issuelock.contract.fields import IssueKey
from backends.issuelock.contract.schemas import Request, parse_request

_HANDLERS = {"whoami": "_whoami", "bootstrap": "_bootstrap", "lock": "_lock", "heartbeat": "_heartbeat",
             "renew": "_renew", "commit": "_commit", "create-pr": "_create_pr", "inspect": "_inspect",
             "recover": "_recover"}


class _Done(Exception):
    """Leaves a transaction early with a refusal (nothing was written)."""

    def __init__(self, reply: Reply):
        self.reply = reply


class LockEngine:
    """The protocol's decisions over one ``LockStore``; a ``Backend``."""

    protocol = "issue-lock"

    def __init__(self, store, clock, hooks: Hooks | None = None, name: str = "issuelock"):
        self.store = store
        self.clock = clock
        self.hooks = hooks if hooks is not None else Hooks()
        self.name = name

    # ------------------------------------------------------------------ Backend protocol

    def call(self, op: str, request: bytes | dict) -> Reply:
        name = _HANDLERS.get(op)
        if name is None:
            raise ValueError(f"operation {op!r} is not an issue-lock operation")
        raw = bytes(request) if isinstance(request, (bytes, bytearray, memoryview)) else compact_json(request)
        parsed = parse_request(op, raw)
        if isinstance(parsed, Reply):
            return parsed
        try:
            reply = getattr(self, name)(parsed)
        except StoreUnavailable as e:
            return E.store_failure(op, C.STORE_UNAVAILABLE, e.reason)
        except CommitOutcomeUnknown as e:
            return E.store_failure(op, C.OUTCOME_UNKNOWN, str(e)[:300])
        if reply.exit == 0 and reply.envelope.get("state") == "changed":
            self.hooks.after_commit(op, parsed.members, reply)
        return reply

    def close(self) -> None:
        self.store.close()

    def restart(self) -> None:
        """Drop process state: the engine keeps none; the store reopens."""
        self.store.reopen()

    # ------------------------------------------------------------------ helpers

    def _now(self) -> int:
        return self.clock.now_ms()

    @staticmethod
    def _identity(txn, token: str) -> dict | None:
        ident = txn.identity(token)
        if not ident or not ident.get("username") or not ident.get("profile"):
            return None
        return {"username": ident["username"], "profile": ident["profile"]}

    def _begin(self, txn, op: str, req: Request, refuse_unknown: bool = True) -> tuple:
        """``(repository, now, identity, lock)`` of one decision: the repository
        first (looking it up takes the store's serialization lock), then the
        decision time, read after any wait for that lock, then the caller's
        server-resolved identity and the issue's lock (None without one)."""
        repo = txn.repository(req.key.repository)
        now = self._now()
        if repo is None and refuse_unknown:
            raise _Done(E.refusal(op, C.BINDING_MISMATCH, now, {"field": "repository"}))
        ident = self._identity(txn, req.agent_token)
        return repo, now, ident, (txn.get_lock(req.key) if repo is not None else None)

    @staticmethod
    def _observed(txn, key: IssueKey, repo: dict, branch_name: str | None, worktree_path: str | None) -> dict:
        branch = txn.branch(key.repository, branch_name) if branch_name else None
        wt = txn.worktree(key.repository, worktree_path) if worktree_path else None
        return {"branch_name": branch_name, "worktree_path": worktree_path,
                "branch_head": branch["head"] if branch else None, "branch_issue": branch["issue"] if branch else None,
                "base_head": repo["base_head"],
                "worktree": wt or {"exists": False, "registered": False, "branch": None}}

    def _refuse(self, op: str, refusal: G.Refusal, now: int, **members) -> Reply:
        return E.refusal(op, refusal.code, now, refusal.details, **members)

    def _write_verified(self, txn, op: str, key: IssueKey, lock: dict, now: int) -> tuple[dict | None, Reply | None]:
        """Write ``lock``, read it back through the one reader and verify it:
        ``(what is stored, None)``, or the fail-closed reply naming the missing fields."""
        txn.put_lock(key, lock)
        back = txn.get_lock(key)
        missing = self._verify_written(back)
        if missing:
            return back, E.failed_after_write(op, C.INCOMPLETE, now, {"missing_fields": missing},
                                              implementation_allowed=False, lock=back)
        return back, None

    def _run(self, write: bool, body) -> Reply:
        try:
            with self.store.transaction(write=write) as txn:
                return body(txn)
        except _Done as done:
            return done.reply

    # ------------------------------------------------------------------ override points

    def _gate(self, name: str, *args) -> G.Refusal | None:
        """One gate of the contract by name (``assess_<name>``)."""
        return getattr(G, f"assess_{name}")(*args)

    def _recovery_refusal(self, *args) -> G.Refusal | None:
        return G.recovery_decision(*args)

    def _build_bootstrap_lock(self, key, branch, worktree, ident, ttl, now, generation, session) -> dict:
        return B.build_canonical_issue_lock(key, branch, worktree, ident, ttl, now, generation, "bootstrap", session)

    def _verify_written(self, lock: dict | None) -> list[str]:
        """Read-back verification: the missing fields of what is now stored."""
        return R.missing_fields(lock)

    def _lease_successor(self, lock: dict, now: int) -> dict:
        return B.next_lease_write(lock, now)

    def _next_action(self, success: bool, code: str | None, observed: dict | None) -> str:
        return G.bootstrap_next_action(success, code, observed)

    def _inspect_view(self, lock, ident, now, observed) -> dict:
        return {"contract": R.lock_contract(lock), "missing_fields": R.missing_fields(lock) if lock else [],
                "expiration_state": R.expiration_state(lock) if lock else None,
                "live": R.is_live(lock, now), "recommended_action": G.recommended_action(lock, ident, now, observed)}

    # ------------------------------------------------------------------ operations

    def _whoami(self, req: Request) -> Reply:
        def body(txn):
            now = self._now()
            ident = self._identity(txn, req.agent_token)
            if ident is None:
                return E.refusal("whoami", C.IDENTITY_UNRESOLVED, now)
            return E.success("whoami", now, False, identity=ident)
        return self._run(False, body)

    def _next(self, key, success, code, lock, observed, session=None) -> dict:
        action = self._next_action(success, code, observed)
        return {"op": action, "request": G.next_action_request(action, key, lock, observed, session)}

    def _bootstrap(self, req: Request) -> Reply:
        key = req.key

        def body(txn):
            repo, now, ident, lock = self._begin(txn, "bootstrap", req)
            observed = self._observed(txn, key, repo, lock.get("branch_name"), lock.get("worktree_path")) \
                if lock else None
            refusal = self._gate("bootstrap", lock, ident, now, observed)
            if refusal is not None:
                return self._refuse("bootstrap", refusal, now, implementation_allowed=False,
                                    lock=R.summary(lock), binding=observed,
                                    exact_next_action=self._next(key, False, refusal.code, lock, observed))
            generation = R.lock_generation(lock) + 1
            session = B.mint_session_id()
            tag = f"g{generation}-{session[3:11]}"
            branch = f"{ident['username']}/issue-{key.issue_number}-{tag}"
            worktree = f"branches/{key.repo}-{key.issue_number}-{tag}"
            txn.create_binding(key, branch, worktree, repo["base_head"])
            back, failed = self._write_verified(txn, "bootstrap", key, self._build_bootstrap_lock(
                key, branch, worktree, ident, txn.ttl_ms(), now, generation, session), now)
            new_binding = self._observed(txn, key, repo, branch, worktree)
            if failed is not None:
                failed.envelope.update(binding=new_binding,
                                       exact_next_action=self._next(key, False, C.INCOMPLETE, back, new_binding))
                return failed
            return E.success("bootstrap", now, True, lock=back, task_session_id=R.task_session_id(back),
                             implementation_allowed=True, prior=R.summary(lock), binding=new_binding,
                             exact_next_action=self._next(key, True, None, back, new_binding, R.task_session_id(back)))
        return self._run(True, body)

    def _lock(self, req: Request) -> Reply:
        key, branch, worktree = req.key, req.get("branch_name"), req.get("worktree_path")

        def body(txn):
            repo, now, ident, lock = self._begin(txn, "lock", req)
            observed = self._observed(txn, key, repo, branch, worktree)
            refusal = self._gate("relock", lock, ident, key, branch, worktree, now, observed)
            if refusal is not None:
                return self._refuse("lock", refusal, now, lock=R.summary(lock), binding=observed)
            new = B.build_canonical_issue_lock(key, branch, worktree, ident, txn.ttl_ms(), now,
                                               R.lock_generation(lock) + 1, "lock")
            back, failed = self._write_verified(txn, "lock", key, new, now)
            if failed is not None:
                return failed
            return E.success("lock", now, True, lock=back, task_session_id=R.task_session_id(back),
                             implementation_allowed=True, prior=R.summary(lock), binding=observed)
        return self._run(True, body)

    def _lease_write(self, op: str, req: Request) -> Reply:
        key, session = req.key, req.get("task_session_id")

        def body(txn):
            _, now, ident, lock = self._begin(txn, op, req)
            refusal = self._gate("heartbeat" if op == "heartbeat" else "renew", lock, ident, session, now)
            if refusal is not None:
                return self._refuse(op, refusal, now, lock=R.summary(lock))
            new = self._lease_successor(lock, now)
            txn.put_lock(key, new)
            return E.success(op, now, True, lock=new, prior=R.summary(lock))
        return self._run(True, body)

    def _heartbeat(self, req: Request) -> Reply:
        return self._lease_write("heartbeat", req)

    def _renew(self, req: Request) -> Reply:
        return self._lease_write("renew", req)

    def _commit(self, req: Request) -> Reply:
        key, session = req.key, req.get("task_session_id")

        def body(txn):
            _, now, ident, lock = self._begin(txn, "commit", req)
            refusal = self._gate("heartbeat", lock, ident, session, now)  # a fenced write: the heartbeat gate
            if refusal is not None:
                return self._refuse("commit", refusal, now, lock=R.summary(lock))
            done = txn.commit(key.repository, lock["branch_name"], lock["worktree_path"], req.get("message"),
                              req.get("content"), ident)
            return E.success("commit", now, True, commit=done, branch_name=lock["branch_name"],
                             lock=R.summary(lock))
        return self._run(True, body)

    def _create_pr(self, req: Request) -> Reply:
        key, session = req.key, req.get("task_session_id")

        def body(txn):
            repo, now, ident, lock = self._begin(txn, "create-pr", req)
            observed = self._observed(txn, key, repo, (lock or {}).get("branch_name"),
                                      (lock or {}).get("worktree_path"))
            refusal = self._gate("create_pr", lock, ident, session, now, observed)
            if refusal is None and txn.get_pr(key) is not None:
                refusal = G.Refusal(C.PR_EXISTS)
            if refusal is not None:
                return self._refuse("create-pr", refusal, now, lock=R.summary(lock))
            pr = {"number": key.issue_number, "branch_name": lock["branch_name"], "head": observed["branch_head"],
                  "base_head": observed["base_head"], "author": ident, "task_session_id": session,
                  "lock_generation": R.lock_generation(lock), "created_at": format_instant(now)}
            txn.put_pr(key, pr)
            return E.success("create-pr", now, True, pull_request=pr, lock=R.summary(lock))
        return self._run(True, body)

    def _inspect(self, req: Request) -> Reply:
        """Strictly read-only: a read transaction, nothing written."""
        key = req.key

        def body(txn):
            repo, now, ident, lock = self._begin(txn, "inspect", req)
            branch = req.get("branch_name") or (lock or {}).get("branch_name")
            worktree = req.get("worktree_path") or (lock or {}).get("worktree_path")
            observed = self._observed(txn, key, repo, branch, worktree)
            return E.success("inspect", now, False, lock=lock, claimant=R.lock_claimant(lock),
                             claimant_placement=R.claimant_placement(lock), identity=ident,
                             owned_by_caller=R.same_identity(R.lock_claimant(lock), ident), binding=observed,
                             **self._inspect_view(lock, ident, now, observed))
        return self._run(False, body)

    def _recover(self, req: Request) -> Reply:
        key, dry = req.key, req.get("dry_run")
        branch, worktree, expected = req.get("branch_name"), req.get("worktree_path"), req.get("expected_head")

        def body(txn):
            repo, now, ident, lock = self._begin(txn, "recover", req, refuse_unknown=False)
            observed = self._observed(txn, key, repo, branch, worktree) if repo is not None else None
            refusal = self._recovery_refusal(lock, ident, key, branch, worktree, expected, now, observed)
            # the full lock the decision saw: recovery's evidence, re-decided by the checkers
            if refusal is not None:
                return self._refuse("recover", refusal, now, dry_run=dry, lock=lock, binding=observed)
            if dry:
                return E.success("recover", now, False, dry_run=True, decision="would_recover", lock=lock,
                                 binding=observed)
            new = B.build_recovered_lock(lock, ident, txn.ttl_ms(), now, observed["branch_head"])
            back, failed = self._write_verified(txn, "recover", key, new, now)
            if failed is not None:
                return failed
            after = txn.branch(key.repository, branch)
            return E.success("recover", now, True, dry_run=False, decision="recovered", lock=back,
                             task_session_id=R.task_session_id(back), prior=R.summary(lock), prior_lock=lock,
                             head_after=after["head"] if after else None, binding=observed)
        return self._run(not dry, body)
