"""Porcupine's linearizability checker (P-compositional), its models, and the claim model.

Entry points:

* ``check_operations(model, ops, timeout=None, verbose=False) -> LinearizabilityResult``
* ``check_events(model, events, timeout=None, verbose=False) -> LinearizabilityResult``
* ``check(history, ctx) -> {"valid": True | False | "unknown", ...}``: the
  claim-chaos checker (one register per ``(ledger_namespace, item_id)``).
"""

from .checker import ILLEGAL, OK, UNKNOWN_RESULT, LinearizabilityResult, PartitionResult, check_events, check_operations
from .model import (
    CALL, INF, KEEPS, READS, RETURN, UNKNOWN, WRITES, Event, Model, NondeterministicModel, Operation, fill_defaults,
)

__all__ = [
    "CALL", "RETURN", "INF", "UNKNOWN", "OK", "ILLEGAL", "UNKNOWN_RESULT", "READS", "WRITES", "KEEPS",
    "Event", "Operation", "Model", "NondeterministicModel", "fill_defaults",
    "LinearizabilityResult", "PartitionResult", "check_operations", "check_events", "check",
]


def check(history: list[dict], ctx: dict | None = None) -> dict:
    """The claim-chaos linearizability checker (see ``claims.py``)."""
    from .claims import check as _check

    return _check(history, ctx or {})
