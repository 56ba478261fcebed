"""The seam between the conformance runner and one backend.

The runner (``chaos.conform.runner``) knows what the vectors *mean*: the order
of actions, the fault map, the preflight list, the events. An ``Adapter`` knows
how to make one backend *do* it with real mechanisms (vectors.md §11): seed
storage before serving, pin the backend's clock, park a real publish call at
its pre-commit hook, lose a committed reply, crash and restart, make a floor
write or a commit fail, and export the durable projection from storage.

Adapters are found by convention: ``chaos.conform.adapters.<backend>`` exposes
``make_adapter(options: dict) -> Adapter``. ``options`` carries the command
line's pass-through members (``command``, ``profile``) and ``workdir``.
Adapters are used one case at a time: ``setup(case)`` ... ``close()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from backends.contract.records import Reply


@dataclass
class Profile:
    """What an adapter declares about its backend (vectors.md §11.12).

    ``backend_name`` is the name its capabilities reply reports (substituted
    into the expected capabilities envelope). ``exports_requests`` says whether
    stored outcomes carry the complete request. ``commit_sequence`` says the
    export lists outcomes in commit order (then the order is checked too).
    ``refuses_before_reading``: the advisory ``capability-unavailable`` reply
    omits ``operation_id``. ``scaffolding_ledgers`` are ``(namespace, item)``
    tuples only the adapter created.
    """

    backend_name: str
    exports_requests: bool = True
    commit_sequence: bool = False
    refuses_before_reading: bool = False
    scaffolding_ledgers: set[tuple[str, str]] = field(default_factory=set)


class Parked:
    """A real publish call that reached the pre-commit hook and waits there.
    Adapters subclass it with whatever they need to release it."""

    def __init__(self, request: dict):
        self.request = request


class AdapterError(Exception):
    """A mechanism the adapter needs failed (setup, a fault, an export)."""


class Adapter(Protocol):
    profile: Profile

    def not_applicable(self, case: Any) -> str | None:
        """A reason this backend cannot be put in the case's configuration
        (reported as not-applicable, never as pass), else ``None``."""
        ...

    def adjust_expected(self, case: Any, expected: dict) -> list[str]:
        """Apply declared profile substitutions to ``expected`` (a private
        deep copy) in place; return one note per substitution. Non-empty notes
        make a passing case ``profile-substituted``."""
        ...

    def setup(self, case: Any, clock_ms: int) -> None:
        """Provision from ``initial.backend``, seed ``initial.durable`` through
        the privileged path *before* serving, pin the clock at ``clock_ms``,
        install sticky faults armed in ``initial.faults``."""
        ...

    def set_clock(self, ms: int) -> None: ...

    def call(self, op: str, request: dict) -> Reply:
        """One complete public call (``backends.api.OPERATIONS`` names). Raises
        ``backends.api.ReplyLost`` when an armed response-loss fault ate a
        committed reply."""
        ...

    def start_publish(self, request: dict) -> Reply | Parked:
        """Start a real publish with the barrier armed: a ``Parked`` when the
        call reached the pre-commit hook, else the ``Reply`` it returned."""
        ...

    def finish_publish(self, parked: Parked) -> Reply:
        """Release a parked publish (the clock is already set); its reply."""
        ...

    def arm_fault(self, name: str) -> None:
        """Arm a fault by its manifest name (one-shots fire once)."""
        ...

    def take_fired(self, name: str) -> bool:
        """Whether the one-shot ``name`` fired since the last ask."""
        ...

    def restart(self) -> None:
        """Crash-restart: kill every backend process and parked call, reopen."""
        ...

    def export(self) -> dict:
        """The four durable arrays, read back from real storage."""
        ...

    def close(self) -> None: ...

