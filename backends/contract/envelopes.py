"""Builders for every reply shape of vectors.md §9.

Every envelope the suite emits is built here. Key order follows the vectors
(``ok, namespace, command, contract_version, state, operation_id?,
result|error``) so CLI output reads naturally; comparisons are structural.
"""

from __future__ import annotations

from backends.contract.records import Active, ClaimRecord, Reply
from backends.contract.codes import exit_for, message_for, state_for
from backends.contract.values import format_epoch, format_instant

CONTRACT_VERSION = 1

NS_CLAIM = "work-claim"
NS_PUBLICATION = "ledger-publication"
NS_LEGACY = "ledger-mutation"

CMD_PUBLISH = "publish-claimed"
CMD_PUBLICATION_READ = "read"
CMD_LEGACY_TRANSITION = "transition-v1"
CMD_LEGACY_CREATE = "create-v1"

#: public op name (backends.api.OPERATIONS) -> (envelope namespace, command)
SURFACE: dict[str, tuple[str, str]] = {
    "capabilities": (NS_CLAIM, "capabilities"),
    "read": (NS_CLAIM, "read"),
    "acquire": (NS_CLAIM, "acquire"),
    "renew": (NS_CLAIM, "renew"),
    "release": (NS_CLAIM, "release"),
    "publish": (NS_PUBLICATION, CMD_PUBLISH),
    "publication-read": (NS_PUBLICATION, CMD_PUBLICATION_READ),
    "legacy-transition": (NS_LEGACY, CMD_LEGACY_TRANSITION),
    "legacy-create": (NS_LEGACY, CMD_LEGACY_CREATE),
}


# --------------------------------------------------------------------------- record shapes


def claim_json(active: Active) -> dict:
    """The four-member claim object ``{owner_id, epoch, issued_at, expires_at}``."""
    return {
        "owner_id": active.owner_id,
        "epoch": format_epoch(active.epoch),
        "issued_at": format_instant(active.issued_at),
        "expires_at": format_instant(active.expires_at),
    }


def read_back(record: ClaimRecord, observed_ms: int) -> dict:
    """Exactly the five read-back members."""
    return {
        "ledger_namespace": record.ledger_namespace,
        "item_id": record.item_id,
        "observed_at": format_instant(observed_ms),
        "last_epoch": format_epoch(record.last_epoch),
        "active": claim_json(record.active) if record.active is not None else None,
    }


def claim_record_json(record: ClaimRecord) -> dict:
    """The durable claim record of contract §4 (manifest ``durable.claims``)."""
    return {
        "ledger_namespace": record.ledger_namespace,
        "item_id": record.item_id,
        "last_epoch": format_epoch(record.last_epoch),
        "active": claim_json(record.active) if record.active is not None else None,
    }


def empty_record(ns: str, item_id: str) -> ClaimRecord:
    """An untouched tuple: ``last_epoch`` 0, no active claim."""
    return ClaimRecord(ns, item_id, 0, None)


# --------------------------------------------------------------------------- generic builders


def success(namespace: str, command: str, result: dict, *, operation_id: str | None = None) -> Reply:
    env: dict = {"ok": True, "namespace": namespace, "command": command,
                 "contract_version": CONTRACT_VERSION, "state": "committed"}
    if operation_id is not None:
        env["operation_id"] = operation_id
    env["result"] = result
    return Reply(0, env)


def error(namespace: str, command: str, code: str, details, *, message: str | None = None,
          operation_id: str | None = None) -> Reply:
    """An error envelope; exit, state and (unless given) message come from ``codes``."""
    env: dict = {"ok": False, "namespace": namespace, "command": command,
                 "contract_version": CONTRACT_VERSION, "state": state_for(code)}
    if operation_id is not None:
        env["operation_id"] = operation_id
    env["error"] = {"code": code, "message": message if message is not None else message_for(code, command),
                    "details": details}
    return Reply(exit_for(code), env)


# --------------------------------------------------------------------------- per-surface helpers


def claim_success(command: str, result: dict) -> Reply:
    return success(NS_CLAIM, command, result)


def claim_error(command: str, code: str, details: dict, *, message: str | None = None) -> Reply:
    return error(NS_CLAIM, command, code, details, message=message)


def publication_success(operation_id: str, result: dict) -> Reply:
    return success(NS_PUBLICATION, CMD_PUBLISH, result, operation_id=operation_id)


def publication_error(code: str, details, *, operation_id: str | None = None,
                      message: str | None = None) -> Reply:
    return error(NS_PUBLICATION, CMD_PUBLISH, code, details, message=message, operation_id=operation_id)


def publication_read_success(operation_id: str, ns: str, item_id: str, digest: str,
                             outcome_exit: int, outcome_envelope: dict) -> Reply:
    result = {"operation_id": operation_id, "ledger_namespace": ns, "item_id": item_id,
              "operation_digest": digest, "outcome": {"exit": outcome_exit, "stdout": outcome_envelope}}
    return success(NS_PUBLICATION, CMD_PUBLICATION_READ, result, operation_id=operation_id)


def publication_read_error(code: str, details, *, operation_id: str | None = None,
                           message: str | None = None) -> Reply:
    return error(NS_PUBLICATION, CMD_PUBLICATION_READ, code, details, message=message,
                 operation_id=operation_id)


def legacy_error(command: str, code: str, details: dict) -> Reply:
    """A legacy write refusal (``ledger-mutation``, ``transition-v1``/``create-v1``)."""
    return error(NS_LEGACY, command, code, details)


def legacy_success(command: str, result: dict) -> Reply:
    return success(NS_LEGACY, command, result)


def capabilities_envelope(result: dict) -> Reply:
    """The capability reply: exit 0 and, unlike every other reply, no ``state``."""
    return Reply(0, {"ok": True, "namespace": NS_CLAIM, "command": "capabilities",
                     "contract_version": CONTRACT_VERSION, "result": result})


def surface_error(op: str, code: str, details, *, message: str | None = None,
                  operation_id: str | None = None) -> Reply:
    """An error for public op ``op`` (names of ``backends.api.OPERATIONS``)."""
    namespace, command = SURFACE[op]
    return error(namespace, command, code, details, message=message, operation_id=operation_id)
