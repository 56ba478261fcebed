"""Black-box conformance: set a case up and read it back with only what a
program's users have (its public commands, its documented files, Git).

Used by the external adapter when the profile declares no ``admin seed``:

* **namespaces**: the case's namespaces are bound by writing the profile's
  documented ``namespace_file`` into each ledger (what cloning a repository
  provisioned elsewhere gives a user) and then calling ``provision``, which
  must adopt it (idempotent provision); a program that only mints its own
  namespace cannot run the vectors (their requests name fixed namespaces);
* **items**: written as files where the docs place them (``items.path``) and
  committed with the namespace file when the ledger is Git-backed;
* **claims and floors** (``replay_plan``): reached through the program's own
  decisions, each at a pinned clock (libfaketime absolute time): a claim at
  ``last_epoch N`` is ``N - 1`` acquire+release pairs at 2 s steps before the
  floor, then the last acquire (with the seeded owner, ``issued_at`` and lease)
  or acquire+release; a floor with no claim to carry it is one refused release
  of an untouched tuple at the floor. Beyond ``MAX_REPLAY`` epochs, or with
  seeded publication outcomes, a case is not applicable (that state has no
  public path);
* **export** (``observed_export``): claims by ``read`` of every tuple the case
  names, outcomes by ``publication-read`` of every operation id it uses (the
  digest and envelope: no request), item bytes from the files. Clock floors are
  not observable through public reads and are not compared (a note says so);
  the transcript's ``observed_at`` values still pin them.
"""

from __future__ import annotations

import base64
import os

from backends.contract.values import format_instant, parse_instant

MAX_REPLAY = 64
STEP_MS = 2000


def replay_reason(case) -> str | None:
    """Why the seeded state has no public path, else None."""
    d = case.initial["durable"]
    for led in d["ledgers"]:
        if led.get("adoptions") or led.get("authorized_revision", led.get("committed_revision", led["revision"])) \
                != led.get("committed_revision", led["revision"]):
            return "black-box set-up cannot seed an authorized revision that differs from HEAD (it takes an adoption)"
    if d["publication_outcomes"]:
        return "black-box set-up cannot seed publication outcomes (no privileged seed command)"
    for c in d["claims"]:
        if int(c["last_epoch"]) > MAX_REPLAY:
            return (f"black-box set-up would need {c['last_epoch']} acquisitions to reach last_epoch "
                    f"{c['last_epoch']} (no privileged seed command)")
    floors = {f["ledger_namespace"]: parse_instant(f["observed_at"]) for f in d["clock_floors"]}
    for c in d["claims"]:
        a = c["active"]
        if a and floors.get(c["ledger_namespace"]) is not None and parse_instant(a["issued_at"]) > floors[c["ledger_namespace"]]:
            return "black-box set-up cannot seed an active claim issued after its namespace's floor"
    return None


def replay_plan(case) -> list[tuple[int, str, dict]]:
    """``(clock_ms, op, request)`` calls that reach the seeded claims and floors."""
    d = case.initial["durable"]
    floors = {f["ledger_namespace"]: parse_instant(f["observed_at"]) for f in d["clock_floors"]}
    calls: list[tuple[int, str, dict]] = []
    carried: set[str] = set()
    for c in d["claims"]:
        ns, n, active = c["ledger_namespace"], int(c["last_epoch"]), c["active"]
        tup = {"ledger_namespace": ns, "item_id": c["item_id"]}
        floor = floors.get(ns)
        end = parse_instant(active["issued_at"]) if active else (floor if floor is not None else None)
        if n == 0:
            continue
        if end is None:
            end = parse_instant("2030-01-11T00:00:00.000Z")
        for i in range(1, n + (0 if active else 1)):
            at = end - (n - i) * STEP_MS if active else end - (n - i) * STEP_MS
            owner = f"seed-replay-{i}"
            calls.append((at, "acquire", dict(tup, owner_id=owner, lease_duration_ms=STEP_MS // 2,
                                              expected={"last_epoch": str(i - 1), "active": None})))
            calls.append((at, "release", dict(tup, owner_id=owner, epoch=str(i),
                                              expected_expires_at=format_instant(at + STEP_MS // 2))))
        if active:
            lease = parse_instant(active["expires_at"]) - parse_instant(active["issued_at"])
            calls.append((parse_instant(active["issued_at"]), "acquire",
                          dict(tup, owner_id=active["owner_id"], lease_duration_ms=lease,
                               expected={"last_epoch": str(n - 1), "active": None})))
        last = calls[-1][0]
        if floor is not None and last == floor:
            carried.add(ns)
    for ns, floor in floors.items():
        if ns in carried:
            continue
        # a refused release of an untouched tuple: a decision that persists the floor, changes no claim
        item = next((c["item_id"] for c in d["claims"] if c["ledger_namespace"] == ns),
                    "wb_01Q4837BM01W70T30B184GG1R6")
        calls.append((floor, "release", {"ledger_namespace": ns, "item_id": item, "owner_id": "seed-replay-floor",
                                         "epoch": "1", "expected_expires_at": format_instant(floor + 1)}))
    return sorted(calls, key=lambda c: c[0])


def write_items(case, ledgers: dict[str, str], item_path: str, committed: bool) -> None:
    """Item files: ``committed`` -> the bytes Git ``HEAD`` must hold (api v2
    ``committed_revision``, default the working ``revision``), else the
    working-tree bytes."""
    sources = {}
    for src in case.manifest.get("source_files") or []:
        sources[src["sha256"]] = base64.b64decode(src["source_base64"])
    for led in case.initial["durable"]["ledgers"]:
        data = base64.b64decode(led["source_base64"])
        if committed and led.get("committed_revision", led["revision"]) != led["revision"]:
            data = sources[led["committed_revision"]]
        path = os.path.join(ledgers[led["ledger_namespace"]], item_path.replace("{item_id}", led["item_id"]))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def tuples_of(case) -> set[tuple[str, str]]:
    out = set()
    for part in (case.initial["durable"], case.expected["final"]["durable"]):
        for key in ("claims", "ledgers"):
            out |= {(r["ledger_namespace"], r["item_id"]) for r in part[key]}
    for a in case.actions:
        req = a.get("request") or {}
        if isinstance(req.get("ledger_namespace"), str) and isinstance(req.get("item_id"), str):
            out.add((req["ledger_namespace"], req["item_id"]))
    return out


def operation_ids(case) -> set[tuple[str, str, str]]:
    out = set()
    for a in case.actions:
        req = a.get("request") or {}
        if a["operation"].startswith("ledger-publication") and isinstance(req.get("operation_id"), str):
            out.add((req["operation_id"], req.get("ledger_namespace"), req.get("item_id")))
    for o in case.expected["final"]["durable"]["publication_outcomes"]:
        out.add((o["operation_id"], o["ledger_namespace"], o["item_id"]))
    return out


def observed_export(case, call, ledgers: dict[str, str], item_path: str) -> dict:
    """The durable projection as public reads and the item files show it."""
    from backends.contract.values import encode_base64
    from backends.external.git import revision

    claims, outcomes, items = [], [], []
    for ns, item in sorted(tuples_of(case)):
        if ns not in ledgers:
            continue
        r = call("read", {"ledger_namespace": ns, "item_id": item})
        rb = (r.envelope.get("result") or {}).get("read_back") if r.exit == 0 else None
        if not isinstance(rb, dict):
            raise RuntimeError(f"read of {ns}/{item} for the export answered exit {r.exit}: {str(r.envelope)[:200]}")
        claims.append({"ledger_namespace": ns, "item_id": item, "last_epoch": rb.get("last_epoch"),
                       "active": rb.get("active")})
        path = os.path.join(ledgers[ns], item_path.replace("{item_id}", item)) if item_path else None
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            items.append({"ledger_namespace": ns, "item_id": item, "revision": revision(data),
                          "source_base64": encode_base64(data)})
    for op_id, ns, item in sorted(operation_ids(case), key=str):
        if ns not in ledgers:
            continue
        r = call("publication-read", {"operation_id": op_id, "ledger_namespace": ns, "item_id": item})
        if r.exit != 0:
            continue
        res = r.envelope.get("result") or {}
        outcomes.append({"operation_id": op_id, "ledger_namespace": ns, "item_id": item,
                         "operation_digest": res.get("operation_digest"), "envelope": res.get("outcome")})
    return {"claims": claims, "ledgers": items, "publication_outcomes": outcomes}
