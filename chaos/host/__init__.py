"""Host (worker) processes: one OS process serving one backend over JSON lines.

``chaos.host.server`` is the process (``python -m chaos.host``);
``chaos.host.client.HostClient`` starts and drives one.
"""

from chaos.host.client import HostClient
from chaos.host.server import CLAIM_OPS, EXIT_AFTER_COMMIT_STATUS, OP_CLASSES, CallAbandoned, op_class

__all__ = ["HostClient", "CLAIM_OPS", "EXIT_AFTER_COMMIT_STATUS", "OP_CLASSES", "CallAbandoned", "op_class"]
