"""Worker slots: one OS host process per client thread, restarted on demand.

A ``Slot`` owns the worker process of one client thread of the interpreter.
It runs ops in its own thread (so a paused or hung worker never blocks the
others), enforces a deadline per op, classifies replies with
``checkers.history.classify`` and puts the completion on the run's queue. A
crash, timeout or lost reply is ``info``; the slot then kills (SIGKILL + reap)
the host so the retired process can never act again, and the next op starts
a fresh host (the interpreter gives it a new logical process id).

Hosts are ``chaos.host.HostClient`` processes, started by exec with the
preload env, so libfaketime and the fsync shim apply to the worker. An op
with ``clock_ms`` (a lease-boundary probe) is decided by the backend at
exactly that instant (the host pins its backend's clock for the one call);
its completion carries ``clock_ms`` too.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Callable

from checkers.history import classify
from chaos.errors import Indeterminate, SetupFailed
from chaos.faults import procs
from chaos.faults.incall import Rendezvous
from chaos.host import HostClient


SETUP_BACKOFF_S = 0.5  # after a worker host failed to open its backend


def _groups(pids: list[int]) -> set[int]:
    """The process groups of ``pids`` other than the host's and ours (each CLI
    call of an external backend runs in its own session)."""
    mine = os.getpgid(0)
    out = set()
    for pid in pids[1:]:
        try:
            g = os.getpgid(pid)
        except ProcessLookupError:
            continue
        if g != mine and g != pids[0]:
            out.add(g)
    return out


class ReleaseTally:
    """Where a run's write-release freezes landed (``chaos.faults.lockfreeze``).
    The program is one for all slots, so they share one: the first publish
    answered ``ok`` that ended no record-locked write transaction, or a third
    miss of any kind with no landing, shows it takes no POSIX record locks
    (PostgreSQL, a Git journal, a program with lock files), and its frozen
    publishes then freeze at their seeded time point. A publish refused at
    validation wrote nothing, so one miss alone proves nothing."""

    MISSES = 3

    def __init__(self):
        self._lock = threading.Lock()
        self.landed = self.missed = self.missed_commits = 0

    def usable(self) -> bool:
        with self._lock:
            return bool(self.landed) or (self.missed_commits == 0 and self.missed < self.MISSES)

    def count(self, landed: bool, missed: bool, committed: bool) -> None:
        with self._lock:
            self.landed += int(landed)
            self.missed += int(missed)
            self.missed_commits += int(missed and committed)


class Slot:
    """One client thread's worker process and its op thread."""

    def __init__(self, thread: int, spec: dict, env_for: Callable[[int], dict], log_dir: str,
                 completions: "queue.Queue[dict]", op_timeout: float, on_start: Callable[[int], None]):
        self.thread = thread
        self.spec = spec
        self.env_for = env_for
        self.log_dir = log_dir
        self.completions = completions
        self.op_timeout = op_timeout
        self.on_start = on_start
        self.client = None
        self.generation = 0
        self.lock = threading.Lock()
        self.exited_after_commit = 0   # evidence for the lost-reply nemesis
        self.armed_exit: str | None = None  # lost-reply armed for this op class (re-armed on a fresh host)
        self.park_publish_ms: int | None = None  # paused-writer: hold the next publish at the barrier
        self.parked = 0                          # evidence: publishes parked and SIGSTOPped
        self.on_renew = None                     # partition_after renew: called with (slot, op) before a renew
        self.latency_ms = 5.0                    # recent call latency (EWMA)
        self.recent_ms: dict[str, list[float]] = {}  # per op kind, the last calls' latencies (in-call fault scale)
        self.barrier = True                      # the backend parks a publish at the host's barrier hook
        self.black_box = spec.get("backend") == "external"  # the call's work runs in a per-call CLI process
        self.current: str | None = None          # the ``f`` of the op in flight (what a kill lands inside)
        self.publish_kill = None                 # the kill nemesis's kill armed for the next publish (PublishKill)
        self.powered = threading.Event()         # cleared while the power-loss nemesis has the machine off
        self.indeterminate = 0                   # ops of this slot that ended info (partition evidence)
        self.launcher = None                     # callable(generation) -> argv prefix: hosts in containers
        self.release_freeze = None               # chaos.faults.lockfreeze.WriteReleaseFreeze of this slot's processes
        self.release_tally = ReleaseTally()      # shared by a run's slots (one program): where its freezes land
        self.rendezvous = Rendezvous()           # shared by a run's slots: frozen calls and their rivals
        self.powered.set()
        self._inbox: "queue.Queue[dict | None]" = queue.Queue()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"slot-{thread}")
        self._thread.start()

    @property
    def pid(self) -> int | None:
        c = self.client
        return None if c is None else c.pid

    def ensure_started(self):
        while True:
            if self.client is None:
                self.powered.wait()   # a running host keeps running until the power-off kills it
            with self.lock:
                # re-checked under the lock: a power-off clears ``powered`` before it kills,
                # so no host can start between its kill and the power coming back
                if self.client is None and not self.powered.is_set():
                    continue
                return self._start_locked()

    def _start_locked(self):
        if self.client is None:
            self.generation += 1
            log = os.path.join(self.log_dir, f"worker-{self.thread}-{self.generation}.log")
            cls = HostClient
            launcher = self.launcher(self.generation) if self.launcher else None
            self.client = cls(self.spec, env=self.env_for(self.thread), log_path=log, launcher=launcher)
            self.on_start(self.client.pid)
            if self.armed_exit:  # the fault is "this slot's next commit", whatever host serves it
                self.client.exit_after_commit(self.armed_exit)
        return self.client

    def kill(self) -> int | None:
        """SIGKILL + reap the current host *and its descendants* (an external
        backend's CLI child runs in its own session, so a process-group kill
        would miss it); the next op starts a fresh host."""
        with self.lock:
            client, self.client = self.client, None
        if client is None:
            return None
        popen = getattr(client, "proc", None)
        if popen is not None and popen.poll() is None:
            tree = procs.ProcessTree(client.pid, popen=popen)
            groups = _groups(tree.pids())
            tree.kill()
            for pgid in groups:  # a CLI's own session: whatever it forked and detached from the tree too
                try:
                    os.killpg(pgid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
        client.kill()
        return client.pid

    def now(self, timeout: float = 3.0) -> dict | None:
        """The worker's own clocks (``now`` host command), or None when no
        host runs or it does not answer (paused, dead)."""
        client = self.client
        if client is None or not hasattr(client, "now"):
            return None
        try:
            return client.now(timeout=timeout)
        except Exception:
            return None

    def submit(self, op: dict) -> None:
        self._inbox.put(op)

    def stop(self) -> None:
        self._inbox.put(None)

    def _loop(self) -> None:
        while True:
            op = self._inbox.get()
            if op is None:
                return
            done = self.run_op(op)
            if done["type"] == "info":
                self.indeterminate += 1
            self.completions.put(done)

    def run_op(self, op: dict) -> dict:
        self.current = op["f"]
        try:
            return self._run_op(op)
        finally:
            self.current = None
            if op.get("ends_freeze"):  # the frozen call this op is the rival of may go on
                self.rendezvous.rival_done(op["ends_freeze"])

    def _run_op(self, op: dict) -> dict:
        done = {"process": op["process"], "f": op["f"]}
        pin = op.get("clock_ms")
        if pin is not None:  # an exact-time op (a lease-boundary probe): the completion says so too
            done["clock_ms"] = pin
        fault = None
        try:
            client = self.ensure_started()
            if op.get("after_freeze"):  # a rival of a frozen call: sent once the freeze landed (or missed)
                self.rendezvous.wait_frozen(op["after_freeze"], self.op_timeout)
            started = time.monotonic()
            spec, paused_writer = op.get("fault"), False
            if op["f"] == "publish" and not spec and self.publish_kill is not None:
                spec = self.publish_kill.take()   # the kill nemesis aims inside this publish
            if op["f"] == "publish" and self.park_publish_ms and not self.barrier:
                # a paused writer where no barrier hook exists: freeze the publish inside its call
                spec, self.park_publish_ms = {"kind": "freeze", "at": 0.5, "hold_ms": self.park_publish_ms}, None
                paused_writer = True
            if spec:  # freeze or kill the process serving this very call, inside it
                fault = self._in_call_fault(spec, op["f"])
                reply, wall = self._call_under_fault(client, op, fault, pin)
                done["fault"] = dict(fault.settle(replied=True), **({"paused_writer": True} if paused_writer else {}),
                                     **({"by": spec["by"]} if spec.get("by") else {}))
                self.parked += int(paused_writer and done["fault"].get("inside", False))
                done.update(type=classify(reply.exit, reply.envelope), value=reply.to_json())
                self._count_release(done["fault"], done["type"])
                if wall is not None:
                    done["wall_ms"] = wall
                if done["type"] == "info":
                    self.kill()
                return done
            if op["f"] == "publish" and self.park_publish_ms and hasattr(client, "arm_barrier"):
                self._park(client, op["value"]["operation_id"], self.park_publish_ms)
                self.park_publish_ms = None
            if op["f"] == "renew" and self.on_renew is not None:
                self.on_renew(self.thread, op)
            if pin is not None:
                reply, wall = client.call_with_wall(op["f"], op["value"], timeout=self.op_timeout, clock_ms=pin)
            elif hasattr(client, "call_with_wall"):
                reply, wall = client.call_with_wall(op["f"], op["value"], timeout=self.op_timeout)
            else:
                reply, wall = client.call(op["f"], op["value"], timeout=self.op_timeout), None
        except SetupFailed as e:
            # the worker could not even open its backend (e.g. the server is down):
            # back off a little so a down server does not cause a storm of host starts
            self.kill()
            time.sleep(SETUP_BACKOFF_S)
            return dict(done, type="info", error=str(e))
        except Indeterminate as e:
            if fault is not None:
                done["fault"] = dict(fault.settle(replied=False), **({"by": spec["by"]} if spec.get("by") else {}))
                self._count_release(done["fault"], None)
            self._note_exit()
            self.kill()
            evidence = getattr(e, "evidence", None)  # ReplyProtocolViolation: a reply-protocol finding
            return dict(done, type="info", error=str(e), **({"protocol": evidence} if evidence else {}))
        except Exception as e:  # a harness-side failure is indeterminate too
            self.kill()
            return dict(done, type="info", error=f"{type(e).__name__}: {e}")
        done.update(type=classify(reply.exit, reply.envelope), value=reply.to_json())
        if wall is not None:  # the worker's own time.time() at the reply (clock-offset evidence)
            done["wall_ms"] = wall
        took = (time.monotonic() - started) * 1000
        self.latency_ms = 0.8 * self.latency_ms + 0.2 * took
        self.recent_ms[op["f"]] = (self.recent_ms.get(op["f"], []) + [took])[-8:]
        if done["type"] == "info":
            self.kill()
        return done

    def _in_call_fault(self, spec: dict, f: str):
        """``spec``: ``{"kind": "freeze" | "kill", "at": u in [0, 1), "hold_ms"}``
        (drawn by the generator); the point is ``u`` of this slot's fastest
        recent call of the same kind after the send, so it falls inside the work
        of a fast call too (a renew is a fraction of a publish: scaled by the
        slot's publishes, most renew kills found the renew answered)."""
        from chaos.faults.incall import InCallFault

        same = self.recent_ms.get(f) or [x for xs in self.recent_ms.values() for x in xs]
        scale = min(same) if same else self.latency_ms
        tag = ({"tag": spec["tag"], "rival_wait_s": self.op_timeout, "rendezvous": self.rendezvous}
               if spec.get("tag") else {})
        if spec.get("after") == "write-release" and self.release_freeze is not None and self.release_tally.usable():
            # at the end of a write transaction (chaos.faults.lockfreeze), unless the run's program
            # shows it takes no POSIX record locks: then at the seeded time point
            return InCallFault("freeze", 0.0, int(spec.get("hold_ms", 0)), release=self.release_freeze, **tag)
        return InCallFault(spec["kind"], float(spec.get("at", 0.5)) * scale, int(spec.get("hold_ms", 0)), **tag)

    def _count_release(self, ev: dict, reply_type: str | None) -> None:
        if ev.get("at") == "write-release":
            self.release_tally.count(landed=bool(ev.get("pid")), missed=bool(ev.get("unclaimed")),
                                     committed=reply_type == "ok")

    def _call_under_fault(self, client, op: dict, fault, pin):
        from chaos.errors import Indeterminate

        fault.prepare()
        fut = client._call_raw(op["f"], op["value"], pin)
        fault.start(client.pid, self.black_box, fut.done)
        try:
            msg = fut.result(self.op_timeout + fault.longest_hold_s)
        except Exception:
            raise Indeterminate(f"{op['f']}: no reply within {self.op_timeout:g} s after an in-call "
                                f"{fault.kind}") from None
        return client._to_reply(msg), msg.get("wall_ms")

    def _park(self, client, operation_id: str, hold_ms: int) -> None:
        """Paused writer: the call parks after its validation (host barrier); we
        SIGSTOP the worker there, hold it ``hold_ms``, SIGCONT and release it."""
        client.arm_barrier(operation_id)

        def hold() -> None:
            try:
                if client.wait_barrier(operation_id, timeout=5.0):
                    tree = procs.ProcessTree(client.pid)
                    tree.pause()
                    self.parked += 1
                    time.sleep(hold_ms / 1000)
                    tree.resume()
                client.release_barrier(operation_id)
            except Exception:
                pass  # the worker died meanwhile: its op ends info anyway
        threading.Thread(target=hold, daemon=True, name=f"park-{self.thread}").start()

    def _note_exit(self) -> None:
        client = self.client
        proc = getattr(client, "proc", None) or getattr(client, "_proc", None)
        if proc is None:
            return
        try:
            status = proc.wait(timeout=0.5)
        except Exception:
            return
        if self.armed_exit and status == 137:  # os._exit(137) after the commit; a SIGKILL is -9
            self.exited_after_commit += 1
            self.armed_exit = None
