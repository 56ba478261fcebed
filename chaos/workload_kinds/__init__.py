"""The workloads ``chaos run`` can run: ``WORKLOADS`` is the one list.

    kind = workload_kind(cfg)     # a ``chaos.workload_kinds.base.WorkloadKind``

Each kind answers the runner's questions (``base``: build, target, prepare,
adapt, plan, notes, final phase, checker context, verdict, coverage) for its
own protocol, as a backend's ``Sut`` (``chaos.sut``) brings its own target:
``claims`` (``claims.py``) tests the work-claim contract, ``issue-lock``
(``chaos.issuelock.run``) the issue-lock contract. A new kind is a subclass
of ``WorkloadKind`` and one entry here; the runner names none of them.
"""

from __future__ import annotations

from chaos.errors import UsageError
from chaos.workload_kinds.claims import ClaimsKind


def _issue_lock():
    from chaos.issuelock.run import IssueLockKind

    return IssueLockKind()


#: name -> a factory of its ``WorkloadKind``
WORKLOADS = {"claims": ClaimsKind, "issue-lock": _issue_lock}


def workload_kind(name_or_cfg):
    name = getattr(name_or_cfg, "workload", name_or_cfg)
    if name not in WORKLOADS:
        raise UsageError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})")
    return WORKLOADS[name]()
