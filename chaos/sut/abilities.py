"""What a backend can let the harness do to it, declared once per backend.

Jepsen's DB protocol has optional Kill / Pause / Primary abilities; ours are
the rows of ``ABILITIES``. A backend (``chaos.sut.<name>``) answers
``abilities(options) -> Abilities``; every ability is present or missing,
always with one line saying how it is done or why it cannot be. ``via`` names
the mechanism, and a nemesis picks its implementation by it (a ``kill`` with
``via="server"`` kills the PostgreSQL server, with ``via="workers"`` the worker
processes).

Consumers ask, they never guess: ``chaos run`` refuses a nemesis whose ability
is missing (exit 254, the reason in one line), ``chaos conform`` reports a case
that needs one as ``not applicable: <reason>``, ``chaos doctor --backend NAME``
prints the whole matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

#: ability -> what it means (the matrix rows, in this order)
ABILITIES: dict[str, str] = {
    "seed": "put an initial durable state (claims, floors, items, outcomes) in storage before serving",
    "export": "read the whole durable state back at the end of a run or case",
    "barrier": "park a real publish after its validation, before its commit",
    "clock-hook": "set the service's clock directly (else libfaketime moves the process clock)",
    "floor-fault": "make the durable clock-floor write fail with a definite rollback",
    "outcome-unknown-fault": "make a publish commit end with an unknown outcome",
    "restart": "drop a worker's process state and reopen storage",
    "kill": "SIGKILL what decides, mid-operation",
    "pause": "SIGSTOP what decides, then SIGCONT",
    "freeze-call": "SIGSTOP the process serving one call at a point inside its work, then SIGCONT",
    "kill-call": "SIGKILL the process serving one call at a point inside its work",
    "clock": "skew the wall clock of the process that decides",
    "fsync": "make fsync fail with EIO where decisions become durable",
    "lost-reply": "lose the reply of a call that committed",
    "power-loss": "cut the power: every write no completed fsync covers is lost (or torn), then restart",
    "partition": "cut some workers off from the store they reach over the network while the rest go on",
    "advisory-setup": "set up an advisory endpoint (a real uncoordinated writer)",
    "write-paths": "provision a custom write-path inventory",
    "legacy-writes": "the legacy write commands (transition-v1, create-v1)",
    "claim-verify": "the Git reconciliation command (merge-coordinated ledgers)",
    "claim-adopt": "operator adoption of a committed out-of-protocol revision (api_version 2)",
    "commit": "ledger items live in a git work tree a cooperating agent commits",
    "deterministic": "run every process that touches the store under one scheduler on a virtual clock "
                     "(chaos run --deterministic: same seed, same history)",
}


@dataclass(frozen=True)
class Ability:
    name: str
    ok: bool
    how: str                 # how it is done here, or why it cannot be
    via: str | None = None   # the mechanism (a nemesis picks its implementation by it)


def can(how: str, via: str | None = None) -> tuple:
    return (True, how, via)


def cannot(why: str) -> tuple:
    return (False, why, None)


class Abilities(Mapping[str, Ability]):
    """One backend's answer for every row of ``ABILITIES`` (unknown rows are
    missing: a backend that says nothing about an ability does not have it)."""

    def __init__(self, backend: str, rows: dict[str, tuple]):
        unknown = set(rows) - set(ABILITIES)
        if unknown:
            raise ValueError(f"backend {backend}: undeclared abilities {sorted(unknown)}")
        self.backend = backend
        self._rows = {name: Ability(name, *rows.get(name, cannot(f"{backend} declares no way to {meaning}")))
                      for name, meaning in ABILITIES.items()}

    def __getitem__(self, name: str) -> Ability:
        return self._rows[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def has(self, name: str, via: str | None = None) -> bool:
        a = self._rows[name]
        return a.ok and (via is None or a.via == via)

    def missing(self, needs: Iterable[str]) -> str | None:
        """The first unmet need as one line, else None. A need is ``ability``
        or ``ability=via`` (that ability through that mechanism only;
        ``ability=a|b``: through either)."""
        for need in needs:
            name, _, via = need.partition("=")
            a = self._rows[name]
            if not a.ok:
                return f"needs {name}: {a.how}"
            if via and a.via not in via.split("|"):
                return f"needs {name} by {' or '.join(via.split('|'))}; {self.backend} offers it by {a.via} ({a.how})"
        return None

    def to_json(self) -> dict:
        return {n: {"ok": a.ok, "how": a.how, **({"via": a.via} if a.via else {})} for n, a in self._rows.items()}
