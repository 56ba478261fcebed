"""Replay one manifest against one adapter and compare (vectors.md §5-§7, §11).

The runner is backend-independent. It walks the actions in order, turns each
into adapter calls, and writes exactly one transcript entry per action: the
backend's envelope ``{exit, stdout}``, or one of the runner's events
(``fault-injected``, ``restart``, ``preflight-complete``, ``response-lost``).
It keeps the bookkeeping a backend's storage cannot show (§11.11): the
configuration record, the fault map with its one-shot rules, and the
preflight list. After the last action it exports the durable projection and
compares everything with ``chaos.conform.compare``.

A harness failure during an action (a dead host, an unexpected lost reply,
a parked call that never arrived) becomes an ``{"error": ...}`` transcript
entry, so it shows in the diff at the action where it happened.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

from backends.api import ReplyLost
from backends.contract.records import Reply
from backends.contract.digests import operation_digest
from backends.contract.values import parse_instant
from chaos.conform.adapters.base import Adapter, Parked
from chaos.conform.compare import compare_final, prepare_transcript
from chaos.conform.diff import diff
from chaos.conform.manifest import Case
from chaos.errors import UsageError

#: action operation -> backends.api operation name
PUBLIC_OPS = {
    "work-claim.capabilities": "capabilities",
    "work-claim.read": "read",
    "work-claim.acquire": "acquire",
    "work-claim.renew": "renew",
    "work-claim.release": "release",
    "legacy-transition-v1.commit": "legacy-transition",
    "legacy-create-v1.commit": "legacy-create",
    "ledger-publication.read": "publication-read",
    "work-claim.claim-adopt": "claim-adopt",
}
CLAIM_DECISIONS = ("acquire", "renew", "release")
ONE_SHOT = ("claim-response-loss", "publication-response-loss", "publication-outcome-unknown")
#: When no floor is seeded and no action carries a time, the clock still
#: needs a pinned value; any fixed instant does (nothing consults it).
DEFAULT_PIN_MS = parse_instant("2030-01-11T00:00:00.000Z")


@dataclass
class CaseResult:
    case: str
    status: str                      # pass | fail | error | not-applicable | profile-substituted
    seconds: float
    diff: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    transcript: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"case": self.case, "status": self.status, "seconds": round(self.seconds, 3),
                "diff": self.diff, "notes": self.notes}


def initial_clock_ms(case: Case) -> int:
    """Before any ``physical_now``, pin the clock no later than the lowest
    seeded floor (§11.2); without floors, at the earliest action time."""
    floors = [parse_instant(f["observed_at"]) for f in case.initial["durable"]["clock_floors"]]
    if floors:
        return min(floors)
    times = [parse_instant(a["physical_now"]) for a in case.actions if "physical_now" in a]
    return min(times) if times else DEFAULT_PIN_MS


class CaseRun:
    """The state of one replay: bookkeeping, parked calls, transcript."""

    def __init__(self, case: Case, adapter: Adapter):
        self.case = case
        self.adapter = adapter
        self.backend_config = copy.deepcopy(case.initial["backend"])
        self.faults: dict[str, bool] = dict(case.initial["faults"])
        self.preflights: list[dict] = []
        self.parked: dict[str, Parked] = {}
        self.transcript: list[dict] = []
        self.notes: list[str] = []

    # ----------------------------------------------------------------- actions

    def setup(self) -> None:
        self.adapter.setup(self.case, initial_clock_ms(self.case))

    def run(self) -> None:
        for i, action in enumerate(self.case.actions):
            try:
                entry = self.step(action)
            except UsageError:   # the input (a profile) is wrong: no case result can stand, one line
                raise
            except Exception as e:  # a harness failure: visible at this action
                entry = {"error": f"{type(e).__name__}: {e}"}
                self.notes.append(f"transcript[{i}]: harness failure: {type(e).__name__}: {e}")
            self.transcript.append(entry)

    def step(self, action: dict) -> dict:
        op = action["operation"]
        if "physical_now" in action:
            self.adapter.set_clock(parse_instant(action["physical_now"]))
        if op == "control.inject-fault":
            target = action["target"]
            self.faults[target] = True
            self.adapter.arm_fault(target)
            return {"event": "fault-injected", "target": target}
        if op == "control.restart":
            self.adapter.restart()
            self.preflights.clear()
            self.parked.clear()
            return {"event": "restart"}
        if op == "ledger-publication.preflight":
            return self._preflight(action["request"])
        if op == "ledger-publication.commit":
            return self._commit(action["operation_id"], action["request"])
        return self._public(PUBLIC_OPS[op], action["request"])

    def _public(self, op: str, request: dict) -> dict:
        lose = op in CLAIM_DECISIONS and self.faults.get("claim-response-loss") is True
        try:
            reply = self.adapter.call(op, request)
        except ReplyLost:
            if not lose:
                raise
            self.faults["claim-response-loss"] = False
            return {"event": "response-lost", "namespace": "work-claim", "command": op}
        return _envelope(reply)

    def _preflight(self, request: dict) -> dict:
        got = self.adapter.start_publish(request)
        if isinstance(got, Reply):
            return _envelope(got)  # the call ended before the barrier: no plan
        op_id = request["operation_id"]
        self.parked[op_id] = got
        key = (op_id, request["ledger_namespace"], request["item_id"])
        if not any((p["operation_id"], p["ledger_namespace"], p["item_id"]) == key for p in self.preflights):
            self.preflights.append({"operation_id": op_id, "ledger_namespace": key[1], "item_id": key[2],
                                    "request": copy.deepcopy(request),
                                    "operation_digest": operation_digest(request)})
        return {"event": "preflight-complete", "operation_id": op_id}

    def _commit(self, op_id: str, request: dict) -> dict:
        lose = self.faults.get("publication-response-loss") is True
        unknown = self.faults.get("publication-outcome-unknown") is True
        parked = self.parked.pop(op_id, None)
        try:
            if parked is not None:
                if diff(parked.request, request, limit=1):
                    raise AssertionError(f"commit request differs from the parked preflight of {op_id!r}")
                reply = self.adapter.finish_publish(parked)
            else:  # nothing parked (e.g. after a restart): one complete call
                reply = self.adapter.call("publish", request)
        except ReplyLost:
            if not lose:
                raise
            self.faults["publication-response-loss"] = False
            return {"event": "response-lost", "operation_id": op_id}
        finally:
            if unknown and self.adapter.take_fired("publication-outcome-unknown"):
                self.faults["publication-outcome-unknown"] = False
        return _envelope(reply)

    # ----------------------------------------------------------------- final state

    def final_state(self) -> dict:
        return {"backend": self.backend_config, "faults": self.faults,
                "durable": self.adapter.export(), "process": {"preflights": self.preflights}}


def _envelope(reply: Reply) -> dict:
    return {"exit": reply.exit, "stdout": reply.envelope}


def needs(case: Case) -> list[str]:
    """The backend abilities (``chaos.sut.abilities``) replaying ``case`` takes."""
    from backends.contract import MERGE_WRITE_PATHS, REQUIRED_WRITE_PATHS

    out = []
    if any(case.initial["durable"][k] for k in case.initial["durable"]):
        out.append("seed")
    out.append("export")   # the final durable state is compared
    faults = set(k for k, v in case.initial["faults"].items() if v)
    faults |= {a["target"] for a in case.actions if a["operation"] == "control.inject-fault"}
    if "clock_floor_persist" in faults:
        out.append("floor-fault")
    if "publication-outcome-unknown" in faults:
        out.append("outcome-unknown-fault")
    if any(a["operation"] == "control.restart" for a in case.actions):
        out.append("restart")
    paths = case.initial["backend"]["write_paths"]
    if paths.get("alternate") == "bypass":
        out.append("advisory-setup")
    # the fenced and the merge-coordinated inventories are standard; anything else is custom
    if not any({k: v for k, v in paths.items() if k != "alternate"} == {k: v for k, v in std.items() if k != "alternate"}
               for std in (REQUIRED_WRITE_PATHS, MERGE_WRITE_PATHS)):
        out.append("write-paths")
    if any(a["operation"].startswith("legacy-") for a in case.actions):
        out.append("legacy-writes")
    if any(a["operation"] == "work-claim.claim-adopt" for a in case.actions):
        out.append("claim-adopt")
    return out


def run_case(case: Case, adapter: Adapter, abilities=None, api_version: int | None = None) -> CaseResult:
    """Replay ``case`` on ``adapter`` and compare; never raises for a backend
    or harness failure. With the backend's ``abilities``, a case needing a
    missing one is not applicable (its reason is the ability's), before the
    adapter is asked; so is a case written for another ``api_version``.

    A case whose set-up (provision, seed, faults) or final export fails is an
    ``error``: nothing was compared, which is not the same as a comparison
    that failed (``fail``)."""
    start = time.monotonic()
    if api_version is not None and case.api_version != api_version:
        adapter.close()
        return CaseResult(case.name, "not-applicable", time.monotonic() - start,
                          notes=[f"the case is written for work-claim api_version {case.api_version}; "
                                 f"the backend speaks api_version {api_version}"])
    run = CaseRun(case, adapter)
    expected = copy.deepcopy(case.expected)
    lines: list[str] = []
    substitutions: list[str] = []
    actual_final = None
    error = None
    phase = "check"
    try:
        try:
            reason = abilities.missing(needs(case)) if abilities is not None else None
            reason = reason or adapter.not_applicable(case)
            if reason:  # never run, never counted as a pass
                return CaseResult(case.name, "not-applicable", time.monotonic() - start, notes=[reason])
            substitutions = adapter.adjust_expected(case, expected)
            phase = "set-up"
            run.setup()
            phase = "actions"
            run.run()
            phase = "export"
            actual_final = run.final_state()
        finally:
            adapter.close()  # every process and temp dir of the case goes here
    except UsageError:
        raise
    except Exception as e:
        if phase in ("set-up", "export"):
            error = f"{phase} failed: {type(e).__name__}: {e}"
        lines.append(f"harness: {type(e).__name__}: {e}")
    if error is not None:
        return CaseResult(case.name, "error", time.monotonic() - start, [], [error, *run.notes], run.transcript)
    notes = list(substitutions)
    exp_t, act_t, t_notes = prepare_transcript(case.actions, expected["transcript"], run.transcript,
                                               adapter.profile)
    notes += t_notes + run.notes
    lines = diff(exp_t, act_t, "transcript") + lines
    if actual_final is not None:
        f_lines, f_notes = compare_final(expected["final"], actual_final, adapter.profile)
        lines += f_lines
        notes += f_notes
    notes.append("final.backend/faults/process compare the runner's bookkeeping, not backend evidence")
    if lines:
        status = "fail"
    else:
        status = "profile-substituted" if substitutions else "pass"
    return CaseResult(case.name, status, time.monotonic() - start, lines, notes, run.transcript)
