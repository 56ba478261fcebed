"""Known deviations: findings a profile acknowledges, with a reason.

A profile (``known_deviations``) lists what is already known about a
program, so it does not hide everything else::

    - id: eio-exit-1
      anomaly: reply-protocol          # the anomaly type a checker reports
      code: null                       # optional: data.code of the anomaly
      match: {exit: 1, stderr: {contains: "EIO"}}   # optional: data fields
      reason: under fsync EIO the program exits 1 with empty stdout
      reference: docs/wowbagger-findings.md#eio

An anomaly matches when its type equals ``anomaly``, its ``data.code``
equals ``code`` (when given) and every ``match`` entry holds: a plain value
must equal the data field (dotted paths reach into nested objects); ``{contains:
text}`` needs a string field containing the text.

A known finding can cause findings of other checkers that name nothing of it
but its ops (a ``nonlinearizable`` anomaly names only ops). ``within: ID``
acknowledges those, and only those: an anomaly of that type all of whose ops
are ops of findings deviation ``ID`` matched in the same run (``ID`` names a
deviation without ``within``)::

    - id: F4-nonlinearizable
      anomaly: nonlinearizable
      within: F4-killed-publish-conflict

The same type on any other ops is still a finding. A matched anomaly moves from
``anomalies`` to ``known`` (with the deviation's id and reason); a checker
whose every finding is known is valid again (``"known": n``), so a known
finding never by itself makes a run invalid, while any other finding still
does. ``apply`` also reports every deviation with how often it matched: one
that matched nothing is listed as ``unmatched`` (so none rots unnoticed).

A checker that capped its anomaly list (more findings than it listed) stays
invalid: unlisted findings cannot be shown to be known.
"""

from __future__ import annotations

from checkers.compose import merge_valid

_MISSING = object()


def _field(data, path: str):
    node = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def matches(dev: dict, anomaly: dict, known_ops: dict | None = None) -> bool:
    """Does ``dev`` acknowledge ``anomaly``? ``known_ops``: deviation id -> the
    ops of the findings it matched (what a ``within`` deviation needs)."""
    if anomaly.get("type") != dev.get("anomaly"):
        return False
    if dev.get("within") is not None:
        ops = anomaly.get("ops") or []
        if not ops or not set(ops) <= (known_ops or {}).get(dev["within"], set()):
            return False
    data = anomaly.get("data") if isinstance(anomaly.get("data"), dict) else {}
    if dev.get("code") is not None and data.get("code") != dev["code"]:
        return False
    for path, want in (dev.get("match") or {}).items():
        got = _field(data, path)
        if isinstance(want, dict) and set(want) == {"contains"}:
            if not isinstance(got, str) or str(want["contains"]) not in got:
                return False
        elif got is _MISSING or got != want or type(got) is not type(want):
            return False
    return True


def apply(merged: dict, deviations: list[dict] | None) -> dict:
    """``merged`` (``{"valid", "checkers"}``) with acknowledged anomalies moved
    to ``known``; adds ``known_deviations`` (each with ``matched``)."""
    deviations = list(deviations or [])
    if not deviations:
        return merged
    counts = {d["id"]: 0 for d in deviations}
    known_ops: dict = {d["id"]: set() for d in deviations}
    # first the findings' own deviations, then those acknowledging what they caused (``within``)
    for stage in ([d for d in deviations if d.get("within") is None], [d for d in deviations if d.get("within")]):
        if stage:
            _acknowledge(merged, stage, counts, known_ops)
    merged["valid"] = merge_valid(r.get("valid") for r in merged.get("checkers", {}).values())
    merged["known_deviations"] = [
        {"id": d["id"], "anomaly": d["anomaly"], "reason": d.get("reason"), "reference": d.get("reference"),
         **({"within": d["within"]} if d.get("within") else {}),
         "matched": counts[d["id"]], **({"unmatched": True} if counts[d["id"]] == 0 else {})}
        for d in deviations]
    return merged


def _acknowledge(merged: dict, deviations: list[dict], counts: dict, known_ops: dict) -> None:
    """Move the anomalies ``deviations`` match to ``known`` in every checker's result."""
    for result in merged.get("checkers", {}).values():
        anomalies = result.get("anomalies") or []
        keep, known = [], []
        for a in anomalies:
            dev = next((d for d in deviations if matches(d, a, known_ops)), None)
            if dev is None:
                keep.append(a)
                continue
            counts[dev["id"]] += 1
            known_ops[dev["id"]].update(op for op in a.get("ops") or [] if isinstance(op, int))
            known.append({**a, "known": {"id": dev["id"], "reason": dev.get("reason"),
                                         "reference": dev.get("reference")}})
        if not known:
            continue
        result["anomalies"] = keep
        result["known"] = list(result.get("known") or []) + known
        total = (result.get("stats") or {}).get("anomalies_total", len(anomalies))
        capped = isinstance(total, int) and total > len(anomalies) + len(result["known"]) - len(known)
        if result.get("valid") is False and not keep and not capped:
            result["valid"] = "unknown" if result.get("unknown_reasons") else True
