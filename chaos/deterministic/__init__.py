"""Same seed, same history: the deterministic mode (docs/deterministic.md).

``sched.c`` (the preload shim) + ``shim`` (its build and environment),
``scheduler`` (PCT over real processes, virtual time, exact faults), ``worker``
(a single-threaded worker process), ``run`` (``chaos run --deterministic``).
``why_not(backend, opts)`` is the one list of backends the mode does not
control yet and why (their ``deterministic`` ability, ``chaos doctor``);
``programs`` says it of a black-box program, from the program file.
"""

from __future__ import annotations

#: backend -> why the scheduler cannot make its runs deterministic (yet)
NOT_CONTROLLED = {
    "postgres": "the PostgreSQL server is a multi-process server with its own shared-memory locks, latches and "
                "background writers; the shim cannot serialize it, and a store reached over a socket is outside "
                "the scheduler",
    "reference": "an in-memory model, not a run target",
}
#: Python-class factories not over SqliteStore known to keep all their state in files beside the
#: spec's path (under the run dir) and to decide in the calling thread: the scheduler controls them
#: the check-then-act mutants (``chaos.testing.cta_mutants``, ``open_split_<decision>[_<shape>]``): the
#: SQLite backend with its SqliteStore behind a view that splits one decision into two transactions;
#: their state is only the SQLite file, decided in the calling thread (the -sleep gap is a virtual sleep)
SPLIT_FACTORIES = frozenset(f"chaos.testing.mutants:open_split_{decision}{shape}"
                            for decision in ("acquire", "renew", "release", "publish", "legacy_transition")
                            for shape in ("", "_sleep", "_reread"))
FILE_FACTORIES = frozenset({"chaos.testing.filestore:open_backend",
                            "chaos.testing.filestore:open_unlocked"}) | SPLIT_FACTORIES
#: planted bugs of ``chaos.testing.mutants``: the SQLite backend behind a store view (so not seen as
#: over SqliteStore) whose only other state is the serving process's memory (the outcome cache of
#: ``outcome-in-memory``, the epoch high-water mark of ``epoch-reuse-after-restart``,
#: ``non-idempotent-publish``'s per-thread flag; none for ``namespace-blind``): deterministic, as that
#: process runs under the scheduler and decides in the calling thread; the memory is lost with the
#: process, which is the bug two of them plant
MEMORY_FACTORIES = frozenset(f"chaos.testing.mutants:open_{name}" for name in (
    "outcome_in_memory", "non_idempotent_publish", "epoch_reuse_after_restart", "namespace_blind"))


def why_not(backend: str, opts: dict) -> str:
    """The one-line reason a backend has no deterministic mode."""
    if opts.get("nodes") == "docker":
        return "--nodes docker: the workers run in containers, outside the scheduler"
    return NOT_CONTROLLED.get(backend, f"not built yet: {backend}'s processes are not driven by the scheduler")
