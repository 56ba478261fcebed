# A standalone reproduction of one finding of a Python-class backend (written by ``chaos repro``).
# It imports only the backend's own factory module and calls it as its users do: the registry
# signature open(spec, clock, hooks), then backend.call(command, request) one call at a time, each
# decided with the clock the run decided it with (its pinned clock, else its reply's observed_at
# when not past the worker's clock), through an instance per client process of the run. No part of
# the claim-chaos harness runs. Exit 0: every reply is the expected one (data.json), which the
# suite's checker judged (these calls alone, in this order) as breaking the rule; 1: a reply differs.
# A call with a "gate" is an interleaving the run had inside a call (a window): it runs in a process
# of its own with $FAULTSHIM preloaded (faultshim.c, built by repro.sh with gcc), which stops it at
# the gate's point (right after its n-th write transaction ended); the calls whose "in_gap" names its
# window run in that gap, one at a time, then it goes on and its reply is compared at its place.
import importlib
import json
import os
import subprocess
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


def open_backend(data, path, clock):
    module, _, fn = data["factory"].partition(":")
    factory = getattr(importlib.import_module(module), fn)
    spec = {"backend": "python", "factory": data["factory"], "path": path, "namespaces": data["namespaces"]}
    return factory(spec, clock, NoHooks())


class GatedCall:
    """The gated call in a process of its own, stopped at its gate until ``finish``."""

    def __init__(self, data, path, call, faultshim):
        at_r, self.at_w = os.pipe()
        self.go_r, go_w = os.pipe()
        g = call["gate"]
        env = dict(os.environ, LD_PRELOAD=faultshim, FAULT_CALL=g["call"], FAULT_MATCH=g["match"],
                   FAULT_NTH=str(g["nth"]), FAULT_ACTION="PAUSE", FAULT_GATE=f"{self.at_w},{self.go_r}")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--one-call"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(self.at_w, self.go_r))
        os.close(self.at_w)
        os.close(self.go_r)
        self.proc.stdin.write(json.dumps({"data": data, "path": path, "call": call}).encode())
        self.proc.stdin.close()
        with os.fdopen(at_r, "rb") as at:
            self.stopped = at.read(1) == b"p"   # end of file: it ended (or died) before its gate
        self.go = os.fdopen(go_w, "wb")

    def finish(self):
        self.go.close()                          # end of file on its gate: go on
        out = self.proc.stdout.read()
        self.proc.wait()
        try:
            reply = json.loads(out)
        except ValueError:
            reply = {"exit": None, "envelope": {"gated call died": self.proc.returncode}}
        return reply["exit"], reply["envelope"]


def one_call():
    """--one-call: the gated call, in this process (its request on stdin, its reply on stdout)."""
    job = json.loads(sys.stdin.read())
    clock = PinnedClock()
    clock.ms = job["call"]["at_ms"]
    backend = open_backend(job["data"], job["path"], clock)
    try:
        reply = backend.call(job["call"]["f"], job["call"]["value"])
    finally:
        backend.close()
    try:
        sys.stdout.write(json.dumps({"exit": reply.exit, "envelope": reply.envelope}))
        sys.stdout.flush()
    except BrokenPipeError:   # the replay that started it is gone (killed): nobody reads the reply
        os._exit(1)


def replay(data, quiet=False, tmp_root=None, faultshim=None, observed=None, state=None):
    """Every call of ``data`` in order on a fresh store (under ``tmp_root``, default $TMPDIR); True
    when every call gets the reply recorded in ``data``: the replies the suite's checker judged, these
    calls alone in this order, as breaking the rule (what ``chaos repro`` verified before it kept this).
    Each client process of the run calls through an instance of its own (as each was served by a
    worker process of its own), all on one store; the store is seeded by one more, opened first.
    ``observed``: a list to which each call's (exit, envelope) is appended (None: a gated call that
    never reached its gate); ``state``: a dict given the store's durable state after the calls (read
    by a fresh instance)."""
    clock = PinnedClock()
    windows = {c["gate"]["window"]: c for c in data["calls"] if c.get("gate")}   # a gated call per window
    # a gated call starts right before the first call of its gap (at its own place when none is left)
    starts = {}   # position -> the window whose gated call starts there
    for n, c in enumerate(data["calls"]):
        w = c["gate"]["window"] if c.get("gate") else c.get("in_gap")
        if w in windows and w not in starts.values():
            starts[n] = w
    with tempfile.TemporaryDirectory(prefix="repro-", dir=tmp_root) as tmp:
        path = os.path.join(tmp, "claims.db")
        seeder = open_backend(data, path, clock)
        try:
            seeder.store.seed(data["seed"])
        finally:
            seeder.close()
        if data.get("seeded_after") and not quiet:
            print(f"the store starts as this class left it after the run's first {data['seeded_after']} calls "
                  "(data.json's seed: its durable state, seeded as the run's initial state was)")
        instances = {}
        running = None
        try:
            shown = True
            for n, call in enumerate(data["calls"], 1):
                if n - 1 in starts:
                    gated = windows[starts[n - 1]]
                    running = GatedCall(data, path, gated, faultshim or os.environ["FAULTSHIM"])
                    if not quiet:
                        g = gated["gate"]
                        print(f"   {gated['f']} of call {data['calls'].index(gated) + 1} started at "
                              f"{gated['at_ms']} ms: " + (f"stopped after its {g['nth']}. {g['call']} of {g['match']}"
                                                          if running.stopped else "it never reached its gate"))
                    if not running.stopped:
                        shown = False
                if call.get("gate"):
                    reached = running.stopped
                    code, envelope = running.finish()
                    running = None
                    if observed is not None and not reached:
                        code = envelope = None
                else:
                    process = call.get("process", 0)
                    if process not in instances:
                        instances[process] = open_backend(data, path, clock)
                    clock.ms = call["at_ms"]
                    reply = instances[process].call(call["f"], call["value"])
                    code, envelope = reply.exit, reply.envelope
                if observed is not None:
                    observed.append(None if code is None else (code, envelope))
                same = code == call["exit"] and envelope == call["envelope"]
                if not quiet:
                    mark = (" <- as expected" if same else " <- NOT as expected") + (" (cited)" if call["cited"] else "")
                    where = (" (let go: it ends here)" if call.get("gate") else
                             " (in the gap)" if call.get("in_gap") else "")
                    print(f"{n}. {call['f']} by process {call.get('process', 0)}{where} "
                          f"{json.dumps(call['value'], sort_keys=True)}\n"
                          f"   -> exit {code} {json.dumps(envelope, sort_keys=True)}{mark}")
                if not same:
                    shown = False
        finally:
            if running:
                running.finish()
            for backend in instances.values():
                backend.close()
        if state is not None or data.get("final") is not None:
            reader = open_backend(data, path, clock)
            try:
                exported = reader.store.export_durable()
            finally:
                reader.close()
            if state is not None:
                state.update(exported)
            if data.get("final") is not None:   # the finding cites the durable state the calls leave
                same = json.loads(json.dumps(exported)) == data["final"]
                if not quiet:
                    print(f"final durable state (store.export_durable of a fresh instance): "
                          f"{json.dumps(exported.get('clock_floors'), sort_keys=True)} (clock floors)"
                          + (" <- as expected" if same else " <- NOT as expected (data.json's final)"))
                if not same:
                    shown = False
    return shown


if __name__ == "__main__" and sys.argv[1:] == ["--one-call"]:
    one_call()
elif __name__ == "__main__":
    DATA = json.loads(sys.stdin.read())
    if replay(DATA):
        print(f"SHOWN ({DATA['finding']}): {DATA['explanation']}")
        sys.exit(0)
    print(f"NOT SHOWN ({DATA['finding']}): a reply, or the final state, differs from the expected one")
    sys.exit(1)
