"""The privileged seed of an issue-lock store (test scaffolding, never a write path).

One ``durable`` object seeds every store the same way::

    {"config": {"lease_ttl_ms": 2000},
     "identities": [{"token", "username", "profile"}],          # what the server resolves
     "repositories": [{"remote", "org", "repo", "files": {path: text}}],   # one base commit each
     "bindings": [{"remote", "org", "repo", "issue_number", "branch_name", "worktree_path",
                   "commits": [{"message", "content", "author": {"username", "profile"}}],
                   "worktree": "ok" | "missing" | "unregistered" | "other-branch"}],
     "locks": [{"remote", "org", "repo", "issue_number", "lock": {...}}]}

Bindings are made exactly as bootstrap makes them (a branch at the base head,
a registered worktree under ``branches/``), then carry their committed work,
then are damaged as asked (the recovery refusals need a missing, an
unregistered and a wrongly checked-out worktree). Locks are stored as given:
the legacy thin locks come from ``contract.builder.build_legacy_bootstrap_lock``.
A store supplies a seeder with ``config``, ``identity``, ``repository``,
``binding``, ``commit``, ``damage_worktree`` and ``lock``.
"""

from __future__ import annotations

from backends.issuelock.contract.fields import IssueKey

WORKTREE_STATES = ("ok", "missing", "unregistered", "other-branch")


def other_branch_of(branch_name: str) -> str:
    return f"{branch_name}-elsewhere"


def apply_seed(seeder, durable: dict) -> dict:
    """Seed through ``seeder``; returns ``{repo_key: base_head}``."""
    seeder.config(int((durable.get("config") or {}).get("lease_ttl_ms", 2000)))
    for ident in durable.get("identities") or []:
        seeder.identity(ident["token"], ident.get("username"), ident.get("profile"))
    bases = {}
    for repo in durable.get("repositories") or []:
        repo_key = (repo["remote"], repo["org"], repo["repo"])
        bases[repo_key] = seeder.repository(repo_key, dict(repo.get("files") or {"README.md": "base\n"}))
    for b in durable.get("bindings") or []:
        key = IssueKey.of(b)
        seeder.binding(key, b["branch_name"], b["worktree_path"], bases[key.repository])
        for c in b.get("commits") or []:
            seeder.commit(key, b["branch_name"], b["worktree_path"], c["message"], c["content"], c["author"])
        how = b.get("worktree", "ok")
        if how not in WORKTREE_STATES:
            raise ValueError(f"worktree state {how!r} (known: {', '.join(WORKTREE_STATES)})")
        if how != "ok":  # other-branch: the store makes that branch at the base head and checks it out there
            seeder.damage_worktree(key, b["worktree_path"], how, other_branch_of(b["branch_name"]),
                                   bases[key.repository])
    for entry in durable.get("locks") or []:
        seeder.lock(IssueKey.of(entry), entry["lock"])
    return bases
