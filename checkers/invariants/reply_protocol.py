"""Reply protocol: every call answers with a contract exit code and exactly one
JSON object followed by LF (contract preamble: "a CLI prints exactly one
compact JSON object followed by LF"; §9 exit codes 0, 2-6).

A process that exited ON ITS OWN with a non-contract exit code, or printed
anything else, is a ``reply-protocol`` finding naming the call, the exit and
excerpts of stdout and stderr (the worker records them as the completion's
``protocol`` member). The call's effect on state stays indeterminate (the
op is ``info`` for every other checker). A process the suite killed (a
nemesis kill, a timeout, a lost reply) carries no ``protocol`` member: it is
plain ``info`` and never a finding here.
"""

from __future__ import annotations

from ._common import Findings, obj, prepare


def check(history, ctx: dict | None = None) -> dict:
    h = prepare(history)
    out = Findings()
    # the reader kept each failed completion's ``protocol`` member (History.protocol, by op number)
    ops = h.ops
    suspects = [(n, ops[n]) for n in sorted(h.protocol) if ops[n].type == "info" and ops[n].error]
    seen = 0
    for n, op in suspects:
        evidence = obj(h.protocol[n])
        if not evidence:
            continue
        seen += 1
        out.add(
            "reply-protocol",
            f"{op.f} by process {op.process} exited {evidence.get('exit')} on its own without a contract reply "
            f"({evidence.get('problem', 'not one JSON object + LF')}); stdout {str(evidence.get('stdout', ''))[:120]!r}, "
            f"stderr {str(evidence.get('stderr', ''))[-200:]!r}. Every call must answer with a contract exit code "
            "and exactly one JSON object + LF; its state effect is unknown.",
            op.indices, f=op.f, exit=evidence.get("exit"), problem=evidence.get("problem"),
            stdout=evidence.get("stdout"), stderr=evidence.get("stderr"), argv=evidence.get("argv"),
        )
    return out.result({"protocol_violations": seen})
