"""What a workload sees of a reply: the envelope with its members of the
contract's types, whatever the program printed.

A workload plans its next call from the last reply (``result.claim``,
``read_back.active.expires_at``, ``error.details``, a publication read's
``outcome.stdout``); a program may print any JSON. The history keeps the reply
exactly as printed (the envelopes checker judges it); the workload gets a view
in which a member that must be an object (or null) but is not reads as null,
and a member that must be a string but is not reads as null: a malformed reply
then leads the agent where an empty one would, never into a crash of the
suite. A contract-shaped reply is passed through untouched (the same object).
"""

from __future__ import annotations

#: members the contract makes objects (or null) wherever they appear in a reply
OBJECT_MEMBERS = frozenset(("result", "error", "details", "claim", "read_back", "active", "outcome", "stdout",
                            "backend", "operations", "work_claim"))
#: members the workloads parse or compare as strings
STRING_MEMBERS = frozenset(("committed_revision", "actual_revision", "expires_at", "observed_at", "code"))


def _fits(key, value) -> bool:
    if key in OBJECT_MEMBERS:
        return value is None or isinstance(value, dict)
    if key in STRING_MEMBERS:
        return value is None or isinstance(value, str)
    return True


def _shaped(doc):
    """``doc`` with every ill-typed member nulled (``doc`` itself when none is)."""
    if isinstance(doc, list):
        items = [_shaped(v) for v in doc]
        return doc if all(a is b for a, b in zip(items, doc)) else items
    if not isinstance(doc, dict):
        return doc
    out = None
    for key, value in doc.items():
        fixed = _shaped(value) if _fits(key, value) else None
        if fixed is not value:
            out = dict(doc) if out is None else out
            out[key] = fixed
    return doc if out is None else out


def workload_view(event: dict) -> dict:
    """``event`` as a workload may read it (the module docstring)."""
    value = event.get("value") if isinstance(event, dict) else None
    if not isinstance(value, dict) or "envelope" not in value:
        return event
    envelope = value["envelope"]
    shaped = _shaped(envelope) if isinstance(envelope, dict) else {}
    if shaped is envelope:
        return event
    return dict(event, value=dict(value, envelope=shaped))


def capabilities_problem(envelope) -> str | None:
    """Why a capabilities reply cannot be planned with (``None``: it can). The
    run is planned from it (mode, namespaces, write paths), so one that is not
    an object of the contract's member types is a set-up failure, one line."""
    if envelope is None:
        return None
    if not isinstance(envelope, dict):
        return f"the capabilities reply is a {type(envelope).__name__}, not an object"
    bad = _first_misfit(envelope, "")
    return f"the capabilities reply's {bad} is not of the contract's type" if bad else None


def _first_misfit(doc, where: str) -> str | None:
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        path = f"{where}/{key}"
        if not _fits(key, value):
            return path
        found = _first_misfit(value, path)
        if found:
            return found
    return None
