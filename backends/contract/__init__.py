"""The canonical work-claim contract: the one place that defines strict JSON,
value formats, request schemas and precedence, codes and messages, envelopes,
digests and capabilities. Backends build every reply from here.

Names re-exported below are the stable public API other modules import.
"""

from backends.contract.capabilities import (
    FENCED_SCOPE, MERGE_SCOPE, MERGE_WRITE_PATHS, REQUIRED_WRITE_PATHS, capabilities_reply, is_fenced,
    is_merge_coordinated, publication_capable,
)
from backends.contract.candidate import display_path, ledger_invalid_details
from backends.contract.codes import (
    EXIT, MESSAGE, MSG_NOT_CANONICAL_BASE64, MSG_NOT_STRICT_JSON, MSG_RETRY_INCOMPLETE, STATE, Code,
    exit_for, message_for, schema_message, state_for,
)
from backends.contract.digests import operation_digest, revision, sha256_ref
from backends.contract.envelopes import (
    CONTRACT_VERSION, NS_CLAIM, NS_LEGACY, NS_PUBLICATION, SURFACE, capabilities_envelope, claim_error,
    claim_json, claim_record_json, claim_success, empty_record, error, legacy_error, legacy_success,
    publication_error, publication_read_error, publication_read_success, publication_success, read_back,
    success, surface_error,
)
from backends.contract.jsonstrict import StrictJSONError, canonical_json, compact_json, loads_reply_line, loads_strict
from backends.contract.schemas import (
    AcquireRequest, CapabilitiesRequest, PublicationReadRequest, PublishRequest, RenewRequest,
    TupleRequest, check_binding, check_candidate, decode_request, parse_request,
)
from backends.contract.values import (
    CANDIDATE_MAX_BYTES, LEASE_MAX_MS, LEASE_MIN_MS, REQUEST_MAX_BYTES, decode_canonical_base64,
    encode_base64, format_epoch, format_instant, is_epoch, is_instant, is_item_id, is_lease_duration,
    is_namespace, is_operation_id, is_owner_id, is_sha256_ref, parse_epoch, parse_instant,
)

#: the ledger item (YAML front matter): imported on first use, so a claim call, which parses no item,
#: does not load PyYAML (a per-call contract CLI pays every import on every call)
_LEDGER_ITEM = ("LedgerParseError", "parse_item", "render_item", "validate_candidate")


def __getattr__(name: str):
    if name in _LEDGER_ITEM:
        from backends.contract import ledger_item

        return getattr(ledger_item, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [name for name in dir() if not name.startswith("_")] + list(_LEDGER_ITEM)
