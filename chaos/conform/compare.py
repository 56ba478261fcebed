"""What to compare, with the explicit rules of vectors.md §11.12.

Everything not named here is compared exactly and type-strictly
(``chaos.conform.diff``). The rules, each applied to *both* sides:

* capabilities ``result.backend.name``: the expected label is replaced by the
  name the adapter declares (``Profile.backend_name``), then compared exactly;
* advisory ``capability-unavailable``: ``operation_id`` is excluded only when
  the adapter declares that it refuses before reading input;
* claim records ``{last_epoch: "0", active: null}`` are dropped;
* ``claims``, ``ledgers`` and ``publication_outcomes`` are sorted by
  ``(namespace, item[, operation_id])``; when the adapter exports a commit
  sequence, the outcomes' order is also checked against the expected order;
* an outcome's ``request`` is compared when the adapter exports it; otherwise
  the expected request must digest to the expected ``operation_digest`` (the
  loader already checks that) and only digest and envelope are compared;
* ledgers the adapter declares as scaffolding are dropped from the export.
"""

from __future__ import annotations

import copy

from chaos.conform.adapters.base import Profile
from chaos.conform.diff import diff

CAPABILITIES = "work-claim.capabilities"


def prepare_transcript(actions: list[dict], expected: list[dict], actual: list[dict],
                       profile: Profile) -> tuple[list[dict], list[dict], list[str]]:
    """Copies of both transcripts with the name and refuse-before-reading
    rules applied; plus a note per rule used."""
    exp, act = copy.deepcopy(expected), copy.deepcopy(actual)
    notes: list[str] = []
    for i, action in enumerate(actions):
        e = exp[i] if i < len(exp) else None
        if not isinstance(e, dict) or "stdout" not in e:
            continue
        stdout = e["stdout"]
        if action["operation"] == CAPABILITIES and e.get("exit") == 0:
            backend = stdout.get("result", {}).get("backend")
            if isinstance(backend, dict) and backend.get("name") != profile.backend_name:
                notes.append(f"transcript[{i}]: capabilities name {backend.get('name')!r} "
                             f"substituted by the backend's own {profile.backend_name!r}")
                backend["name"] = profile.backend_name
        if profile.refuses_before_reading and stdout.get("error", {}).get("code") == "capability-unavailable":
            stdout.pop("operation_id", None)
            a = act[i] if i < len(act) else None
            if isinstance(a, dict) and isinstance(a.get("stdout"), dict):
                a["stdout"].pop("operation_id", None)
            notes.append(f"transcript[{i}]: operation_id excluded (backend refuses before reading input)")
    return exp, act, notes


def _is_zero_claim(rec: dict) -> bool:
    return rec.get("last_epoch") == "0" and rec.get("active", ...) is None


def _tuple(rec: dict) -> tuple:
    return (str(rec.get("ledger_namespace")), str(rec.get("item_id")))


def prepare_durable(expected: dict, actual: dict, profile: Profile) -> tuple[dict, dict, list[str], list[str]]:
    """Normalised copies of the expected and exported durable projections,
    extra mismatch lines (commit order), and notes."""
    exp, act = copy.deepcopy(expected), copy.deepcopy(actual)
    notes: list[str] = []
    problems: list[str] = []
    if not isinstance(act, dict):
        return exp, act, [f"durable: export is not an object: {act!r}"], notes
    for side in (exp, act):
        if isinstance(side.get("clock_floors"), list):
            side["clock_floors"].sort(key=lambda f: str(f.get("ledger_namespace")))
        if isinstance(side.get("claims"), list):
            side["claims"] = sorted((c for c in side["claims"] if not _is_zero_claim(c)), key=_tuple)
        if isinstance(side.get("ledgers"), list):
            side["ledgers"].sort(key=_tuple)
    if profile.scaffolding_ledgers and isinstance(act.get("ledgers"), list):
        act["ledgers"] = [led for led in act["ledgers"] if _tuple(led) not in profile.scaffolding_ledgers]
        notes.append(f"durable.ledgers: declared scaffolding ledgers dropped: {sorted(profile.scaffolding_ledgers)}")
    exp_out, act_out = exp.get("publication_outcomes"), act.get("publication_outcomes")
    if isinstance(exp_out, list) and isinstance(act_out, list):
        key = lambda o: _tuple(o) + (str(o.get("operation_id")),)  # noqa: E731
        if profile.commit_sequence:
            exp_order = [key(o) for o in exp_out]
            act_order = [key(o) for o in act_out]
            if sorted(exp_order) == sorted(act_order) and exp_order != act_order:
                problems.append(f"durable.publication_outcomes: commit order expected {exp_order}, got {act_order}")
        exp_out.sort(key=key)
        act_out.sort(key=key)
        if not profile.exports_requests:
            for o in exp_out:
                o.pop("request", None)
            for o in act_out:
                o.pop("request", None)
            if exp_out:
                notes.append("durable.publication_outcomes: request not exported; "
                             "compared operation_digest (bound to the expected request) and envelope")
    return exp, act, problems, notes


def compare_final(expected_final: dict, actual_final: dict, profile: Profile) -> tuple[list[str], list[str]]:
    """Diff lines and notes for the final state. ``actual_final`` holds the
    exported ``durable`` and the runner's own ``backend``/``faults``/``process``."""
    lines: list[str] = []
    exp_d, act_d, problems, notes = prepare_durable(expected_final["durable"], actual_final["durable"], profile)
    lines += problems
    lines += diff(exp_d, act_d, "final.durable")
    for part in ("backend", "faults", "process"):
        lines += diff(expected_final[part], actual_final[part], f"final.{part}")
    return lines, notes
