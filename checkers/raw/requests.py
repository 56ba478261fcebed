"""What a backend accepted of one raw request it had to refuse (contract §5, §6
steps 1-5), judged while the history is read (``checkers.history`` calls
``request_problems`` with the raw request in hand); the rules and their
anomaly types are ``checkers.invariants.requests``, which reports them.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
from typing import Any

from backends.contract import Code
from backends.contract.schemas import SCHEMAS, first_invalid_pointer

#: definite publish codes of steps after §6 step 2 (digest) and after step 5 (candidate validation)
AFTER_DIGEST = frozenset(("ledger-namespace-unbound", "idempotency-conflict", "ledger-invalid", "claim-fence-rejected",
                          "ledger-revision-conflict", "clock-floor-persistence-failed"))
AFTER_CANDIDATE = frozenset(("claim-fence-rejected", "ledger-revision-conflict", "clock-floor-persistence-failed"))

#: replies that judge no request: the store could not be reached, nothing was decided, "it is not a
#: statement about the request, which may be perfectly valid" (contract §8); a backend may meet its
#: unreachable store before it reads the request (seen: PostgreSQL, a noncanonical owner_id met during
#: a server restart)
NOT_A_JUDGEMENT = frozenset((Code.INVALID_REQUEST, Code.CLAIM_STORE_UNAVAILABLE))

#: the ops whose raw requests are judged (``checkers.history`` calls ``request_problems`` for these)
CHECKED_OPS = frozenset(("publish", "acquire", "renew", "release"))
#: the members of a complete publish-claimed request (§6)
PUBLISH_MEMBERS = frozenset(("operation_id", "ledger_namespace", "item_id", "expected_revision",
                             "candidate_source_base64", "candidate_sha256", "claim_fence"))


def _decoded(req: dict) -> bytes | None:
    text = req.get("candidate_source_base64")
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def request_problems(exit_code, env, req, f: str = "publish") -> list[tuple[str, dict]]:
    """``[(kind, data)]`` for one reply to op ``f`` and its raw request."""
    if not isinstance(req, dict) or not isinstance(env, dict):
        return []
    code = (env.get("error") or {}).get("code") if isinstance(env.get("error"), dict) else None
    if f != "publish":
        return _noncanonical(f, req, code, _schema_pointer(f, req))
    missing = sorted(PUBLISH_MEMBERS - set(req))
    if missing:
        return [] if code in NOT_A_JUDGEMENT else [("incomplete-request-accepted", {"missing": missing,
                                                                                       "code": code})]
    pointer = _schema_pointer(f, req)
    if pointer is not None:
        return _noncanonical(f, req, code, pointer)
    if exit_code != 0 and code not in AFTER_DIGEST:
        return []
    data = _decoded(req)
    if data is None:
        return []
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != req.get("candidate_sha256"):
        return [("candidate-digest-accepted", {"digest": digest, "candidate_sha256": req.get("candidate_sha256"),
                                               "code": code})]
    if exit_code != 0 and code not in AFTER_CANDIDATE:
        return []
    item = req.get("item_id")
    if isinstance(item, str):
        issues = _candidate_issues(data, item)
        if issues is not None:
            return [("invalid-candidate-accepted", {"item_id": item, "issues": issues, "code": code})]
    return []


def _noncanonical(f: str, req: dict, code, pointer: str | None) -> list[tuple[str, dict]]:
    if pointer is None or code in NOT_A_JUDGEMENT:
        return []
    return [("noncanonical-request-decided", {"op": f, "pointer": pointer, "value": _at(req, pointer), "code": code})]


def _schema_pointer(f: str, req: dict) -> str | None:
    """``first_invalid_pointer(f, req)``. Almost every request is well formed,
    and proving that needs no pointer: ``_well_formed`` asks the schema's own
    rules without building one, remembering their verdicts on repeated values
    (owners, tuples, instants recur from op to op); only a request it does not
    prove well formed goes to ``first_invalid_pointer`` for its pointer."""
    return None if _well_formed(req, SCHEMAS[f]) else first_invalid_pointer(f, req)


#: ``(rule, type, value) -> rule(value)`` for string and integer members: the
#: rules are pure. Bounded (cleared when full) so memory stays flat.
_RULED: dict[tuple, bool] = {}
_RULED_MAX = 8192


def _well_formed(value, schema: dict) -> bool:
    """True only if ``schemas._check_object(value, schema)`` passes: exactly
    the schema's members, each passing its rule (a nested object, a
    ``("nullable", rule)``, or a predicate)."""
    if not isinstance(value, dict) or value.keys() != schema.keys():
        return False
    for key, rule in schema.items():
        member = value[key]
        if type(rule) is tuple:  # ("nullable", rule)
            if member is None:
                continue
            rule = rule[1]
        if type(rule) is dict:
            if not _well_formed(member, rule):
                return False
            continue
        kind = type(member)
        if kind is str or kind is int:
            memo = (rule, kind, member)
            ok = _RULED.get(memo)
            if ok is None:
                if len(_RULED) >= _RULED_MAX:
                    _RULED.clear()
                ok = _RULED[memo] = bool(rule(member))
        else:
            ok = rule(member)
        if not ok:
            return False
    return True


def _at(doc, pointer: str) -> str:
    """The value at ``pointer`` as a short JSON text (a missing member: ``absent``)."""
    node = doc
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or token not in node:
            return "absent"
        node = node[token]
    text = json.dumps(node, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


#: ``ledger_invalid_details`` of candidates already validated: a retry carries
#: the same bytes, and identical bytes get the same verdict. Bounded (cleared
#: when full) so memory stays flat over a long history.
_VERDICTS: dict[tuple[bytes, str], Any] = {}
_VERDICTS_MAX = 8192


def _candidate_issues(data: bytes, item: str) -> Any:
    key = (data, item)
    if key not in _VERDICTS:
        from backends.contract import ledger_invalid_details

        if len(_VERDICTS) >= _VERDICTS_MAX:
            _VERDICTS.clear()
        _VERDICTS[key] = ledger_invalid_details(data, item, b"")
    issues = _VERDICTS[key]
    return None if issues is None else copy.deepcopy(issues)  # each finding owns its details
