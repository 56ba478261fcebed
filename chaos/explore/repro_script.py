# A standalone reproduction of one finding of a Python-class backend (written by ``chaos repro``).
# It imports only the backend's own factory module and calls it as its users do: the registry
# signature open(spec, clock, hooks), then backend.call(command, request) one call at a time, each
# decided at the pinned instant the run's reply says it was decided (its observed_at). No part of
# the claim-chaos harness runs. Exit 0: every reply is the run's, which the suite's checker judged
# (these calls alone, in this order) as breaking the rule; 1: a reply differs.
import importlib
import json
import os
import sys
import tempfile


class PinnedClock:
    """The backend's clock, pinned per call (the registry's clock protocol: now_ms)."""

    def __init__(self):
        self.ms = 0

    def now_ms(self):
        return self.ms


class NoHooks:
    """The registry's hooks, doing nothing (no test hook is installed)."""

    def before_commit(self, request):
        pass

    def after_commit(self, op, request, reply):
        pass

    def __getattr__(self, name):
        return lambda *a, **k: None


def replay(data, quiet=False, tmp_root=None):
    """Every call of ``data`` in order on a fresh store (under ``tmp_root``, default $TMPDIR); True
    when every call gets the reply the run recorded: the replies the suite's checker judged, these
    calls alone in this order, as breaking the rule (what ``chaos repro`` verified before it kept this)."""
    module, _, fn = data["factory"].partition(":")
    factory = getattr(importlib.import_module(module), fn)
    clock = PinnedClock()
    with tempfile.TemporaryDirectory(prefix="repro-", dir=tmp_root) as tmp:
        spec = {"backend": "python", "factory": data["factory"], "path": os.path.join(tmp, "claims.db"),
                "namespaces": data["namespaces"]}
        backend = factory(spec, clock, NoHooks())
        try:
            backend.store.seed(data["seed"])
            shown = True
            for n, call in enumerate(data["calls"], 1):
                clock.ms = call["at_ms"]
                reply = backend.call(call["f"], call["value"])
                same = reply.exit == call["exit"] and reply.envelope == call["envelope"]
                if not quiet:
                    mark = (" <- as in the run" if same else " <- NOT as in the run") + (" (cited)" if call["cited"] else "")
                    print(f"{n}. {call['f']} {json.dumps(call['value'], sort_keys=True)}\n"
                          f"   -> exit {reply.exit} {json.dumps(reply.envelope, sort_keys=True)}{mark}")
                if not same:
                    shown = False
        finally:
            backend.close()
    return shown


if __name__ == "__main__":
    DATA = json.loads(sys.stdin.read())
    if replay(DATA):
        print(f"SHOWN ({DATA['finding']}): {DATA['explanation']}")
        sys.exit(0)
    print(f"NOT SHOWN ({DATA['finding']}): a reply differs from the run's")
    sys.exit(1)
