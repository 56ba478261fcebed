"""Planted bugs in the issue-lock protocol: the red team of ``checkers.issuelock``.

Each is the real SQLite issue-lock store (``backends.issuelock.sqlite``: real
file, ``BEGIN IMMEDIATE``, fsync) under the one engine with ONE rule broken at
an engine override point, the way it was (or could plausibly be) broken. They
plug in as outside Python stores, so worker hosts load them by module path::

    chaos run --workload issue-lock --backend python --factory chaos.testing.issuelock_bugs:open_thin_bootstrap

``BUGS`` maps each name to (factory, the checker that must name it, what it breaks).
The historical one comes first: bootstrap writing the pre-#953 thin shape
(claimant at top level, ``lease_id: null``, no ``work_lease``, no provenance,
no expiry) and reporting success without verifying the read-back.
"""

from __future__ import annotations

from backends.issuelock.contract import builder as B
from backends.issuelock.contract import codes as C
from backends.issuelock.contract import fields as F
from backends.issuelock.contract import gates as G
from backends.issuelock.contract import reader as R
from backends.issuelock.engine import LockEngine
from backends.issuelock.sqlite import BUSY_TIMEOUT_S, SqliteLockStore

FAR_FUTURE_MS = 253_402_300_799_000  # 9999-12-31: every recorded expiry looks past


class ThinBootstrap(LockEngine):
    """#953: bootstrap builds the thin legacy record and trusts it without reading it back."""

    def _build_bootstrap_lock(self, key, branch, worktree, ident, ttl, now, generation, session) -> dict:
        return B.build_legacy_bootstrap_lock(key, branch, worktree, ident, generation)

    def _verify_written(self, lock):
        return []


class HeartbeatKeepsGeneration(LockEngine):
    """Lease writes rewrite the record in place: ``lock_generation`` never advances on a heartbeat."""

    def _lease_successor(self, lock, now):
        out = super()._lease_successor(lock, now)
        out["lock_generation"] = R.lock_generation(lock)
        return out


class HeartbeatIgnoresSession(LockEngine):
    """Heartbeat (and every fenced write) checks the claimant but not the task_session_id."""

    def _gate(self, name, *args):
        if name == "heartbeat":
            lock, identity, _session, now = args
            return G.assess_heartbeat(lock, identity, R.task_session_id(lock), now)
        return super()._gate(name, *args)


class TakeoverIgnoresExpiry(LockEngine):
    """Bootstrap takes over any foreign lock, live or not ("it is probably abandoned")."""

    def _gate(self, name, *args):
        if name == "bootstrap":
            lock, identity, _now, observed = args
            return G.assess_bootstrap(lock, identity, FAR_FUTURE_MS, observed)
        return super()._gate(name, *args)


class MissingExpiryNeverExpires(LockEngine):
    """The old ``is_lease_expired``: no recorded expiry means "not yet expired"."""

    def _gate(self, name, *args):
        if name == "bootstrap":
            lock, identity, _now, _observed = args
            if lock is not None and R.expiration_state(lock) != F.EXPIRY_RECORDED and identity is not None \
                    and not R.same_identity(R.lock_claimant(lock), identity):
                return G.Refusal(C.HEALTHY_FOREIGN_LOCK)
        return super()._gate(name, *args)

    def _inspect_view(self, lock, ident, now, observed):
        view = super()._inspect_view(lock, ident, now, observed)
        if lock is not None and R.expiration_state(lock) == F.EXPIRY_MISSING:
            view["live"] = True
        return view


class RecoveryUsernameOnly(LockEngine):
    """Recovery accepts a claimant whose username matches, whatever its profile."""

    def _recovery_refusal(self, lock, identity, *rest):
        if lock is not None and identity is not None:
            claimant = R.lock_claimant(lock) or {}
            if claimant.get("username") == identity["username"] and not R.is_canonical(lock):
                lock = dict(lock, claimant=dict(identity))
                lock.pop("work_lease", None)
        return super()._recovery_refusal(lock, identity, *rest)


class RecoveryResetsBranch(LockEngine):
    """Recovery "cleans up" by resetting the branch to its base before writing the lock."""

    def _recover(self, req):
        if not req.get("dry_run"):
            with self.store.transaction(write=True) as txn:
                repo = txn.repository(req.key.repository)
                lock = txn.get_lock(req.key)
                if repo is not None and lock is not None and not R.is_canonical(lock):
                    txn._exec("UPDATE branches SET head = ? WHERE remote=? AND org=? AND repo=? AND name=?",
                              (repo["base_head"], *req.key.repository, req.get("branch_name")))
        return super()._recover(req)


class InspectRefreshesLease(LockEngine):
    """Inspect "helpfully" refreshes the liveness evidence of a canonical lock it reads."""

    def _inspect(self, req):
        with self.store.transaction(write=True) as txn:
            lock = txn.get_lock(req.key)
            if lock is not None and R.is_canonical(lock):
                txn.put_lock(req.key, B.next_lease_write(lock, self._now()))
        return super()._inspect(req)


class NextActionAlwaysHeartbeat(LockEngine):
    """Bootstrap's next action is hard-wired to the happy path."""

    def _next_action(self, success, code, observed):
        return C.NEXT_HEARTBEAT


def _factory(cls):
    def open_backend(spec: dict, clock, hooks):
        store = SqliteLockStore(spec["path"], busy_timeout_s=float(spec.get("busy_timeout_s", BUSY_TIMEOUT_S)))
        return cls(store, clock, hooks, name=f"issuelock-bug-{cls.__name__}")
    open_backend.__name__ = f"open_{cls.__name__}"
    return open_backend


open_thin_bootstrap = _factory(ThinBootstrap)
open_heartbeat_keeps_generation = _factory(HeartbeatKeepsGeneration)
open_heartbeat_ignores_session = _factory(HeartbeatIgnoresSession)
open_takeover_ignores_expiry = _factory(TakeoverIgnoresExpiry)
open_missing_expiry_never_expires = _factory(MissingExpiryNeverExpires)
open_recovery_username_only = _factory(RecoveryUsernameOnly)
open_recovery_resets_branch = _factory(RecoveryResetsBranch)
open_inspect_refreshes_lease = _factory(InspectRefreshesLease)
open_next_action_always_heartbeat = _factory(NextActionAlwaysHeartbeat)

#: name -> (factory "module:function", the checker that must name it, what it breaks)
BUGS = {
    "thin-bootstrap": ("open_thin_bootstrap", "shape_agreement",
                       "bootstrap writes the thin pre-#953 shape and reports success (the historical bug)"),
    "heartbeat-keeps-generation": ("open_heartbeat_keeps_generation", "lock_generation",
                                   "a heartbeat rewrites the lock without advancing lock_generation"),
    "heartbeat-ignores-session": ("open_heartbeat_ignores_session", "session_fencing",
                                  "heartbeat and commit check the claimant, not the task_session_id"),
    "takeover-ignores-expiry": ("open_takeover_ignores_expiry", "single_owner",
                                "bootstrap takes over a live foreign lock"),
    "missing-expiry-never-expires": ("open_missing_expiry_never_expires", "explicit_expiry",
                                     "a lock without a recorded expiry is treated as not yet expired"),
    "recovery-username-only": ("open_recovery_username_only", "sanctioned_recovery",
                               "recovery accepts a matching username with another profile"),
    "recovery-resets-branch": ("open_recovery_resets_branch", "sanctioned_recovery",
                               "recovery resets the branch to its base (committed work lost)"),
    "inspect-refreshes-lease": ("open_inspect_refreshes_lease", "read_only",
                                "inspect writes: it refreshes the lease of the lock it reads"),
    "next-action-always-heartbeat": ("open_next_action_always_heartbeat", "next_action",
                                     "bootstrap names heartbeat as the next action whatever state it returned"),
}


def factory_ref(name: str) -> str:
    return f"{__name__}:{BUGS[name][0]}"
