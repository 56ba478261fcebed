"""``chaos explore``: search on purpose with the deterministic scheduler (issue #31, docs/explore.md).

``seeds`` runs N PCT schedules of a short workload per depth (``explore_one``:
one seed's work as a picklable function of plain data, so a cluster fan-out
can run it) and keeps every failing seed; ``crashpoints`` records the
scheduling points of one call of each mutating command kind and kills the
call at each of them in turn, the other workers contending in the recovery.
"""
