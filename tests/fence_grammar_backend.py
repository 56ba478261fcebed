"""A backend that checks a publish fence's owner_id and epoch only for their
type, the way Wowbagger 0.1.0-alpha.7 does (``validatePublicationRequest``: a
non-empty string; an epoch pattern that admits 2^64 .. 18446744699999999999):
such a fence goes on to the fence check and is refused there, as
claim-fence-rejected, instead of exit 2 invalid-request
(``tests/test_noncanonical_requests.py``)."""

import json

from backends.api import EPOCH_MAX
from backends.contract.values import is_epoch, is_owner_id
from backends.sqlite import SqliteBackend


class FenceGrammarUnchecked(SqliteBackend):
    def call(self, op, request):
        if op == "publish" and isinstance(request, (bytes, bytearray)):   # the contract CLI's stdin
            try:
                request = json.loads(bytes(request))
            except ValueError:
                pass
        fence = request.get("claim_fence") if op == "publish" and isinstance(request, dict) else None
        if isinstance(fence, dict):
            owner, epoch = fence.get("owner_id"), fence.get("epoch")
            if isinstance(owner, str) and owner and not is_owner_id(owner):
                fence = dict(fence, owner_id="owner-as-sent")   # compared, so it mismatches
            if isinstance(epoch, str) and epoch.isdigit() and not is_epoch(epoch, active=True):
                fence = dict(fence, epoch=str(EPOCH_MAX))        # compared, so it mismatches
            request = dict(request, claim_fence=fence)
        return super().call(op, request)


def open_backend(spec, clock, hooks):
    return FenceGrammarUnchecked(spec, clock, hooks)
