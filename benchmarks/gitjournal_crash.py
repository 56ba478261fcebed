"""kill -9 of the Git-journal CLI during ``publish-claimed``, then
``claim-verify`` + a read + an identical retry; and concurrent acquires from
two worktrees of one repository.

    python benchmarks/gitjournal_crash.py [--trials 300] [--rounds 50] [--seed 1]

Each trial spawns ``chaos backend gitjournal publish-claimed`` and kills it
with SIGKILL either at an exact step (``CLAIM_CHAOS_GITJOURNAL_CRASH_AT``:
after the lock, the floor, the intent, the item temp file, the rename, the
final) or after a random delay. Then it recovers in one of two orders:
``verify-first`` (``claim-verify``, then the publication read, then the
identical retry) or ``read-first`` (a caller that lost the reply: the read,
the retry, and only then ``claim-verify``). It checks: the item is exactly
the old or the new bytes; ``claim-verify`` is clean (exit 0); the stored
outcome agrees with the bytes (found <=> new bytes: no false success, no
false "not found"); no temp file is left; the identical retry answers exit 0
and leaves the new bytes (a dead owner's lock never blocks it), and a retry
after a found success is its stored envelope verbatim. Prints the count of
each outcome. The test suite runs a reduced count (tests/test_gitjournal_crash.py).
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from backends.api import Hooks, SystemClock
from backends.contract import revision
from backends.gitjournal import open_backend, provision

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT.parent / "shared" / "vectors" / "work-claims" / "ledger"
ITEM = "wb_01Q4837BM01W70T30B184GG1R6"
CRASH_POINTS = ("after-lock", "after-floor", "after-intent", "after-item-tmp", "after-item-rename", "after-final")
RECOVERY_ORDERS = ("verify-first", "read-first")
CLI = [sys.executable, "-m", "chaos.cli", "backend", "gitjournal"]


def cli(args: list[str], stdin: bytes = b"", env: dict | None = None, timeout: float = 60) -> tuple[int, dict]:
    res = subprocess.run(CLI + args, input=stdin, capture_output=True, timeout=timeout, cwd=ROOT,
                         env={**os.environ, **(env or {})})
    return res.returncode, json.loads(res.stdout) if res.stdout.strip() else {}


class Rig:
    """A repository with a provisioned ledger, one item and a long claim."""

    def __init__(self, base: str):
        self.base = base
        self.repo = os.path.join(base, "repo")
        subprocess.run(["git", "init", "-q", self.repo], check=True)
        self.ledger_dir = os.path.join(self.repo, "ledger")
        self.ns = provision(self.ledger_dir).namespace
        self.sources = [(SOURCES / "before.md").read_bytes(), (SOURCES / "after.md").read_bytes()]
        Path(self.ledger_dir, f"{ITEM}.md").write_bytes(self.sources[0])
        subprocess.run(["git", "-C", self.repo, "add", "-A"], check=True)
        subprocess.run(["git", "-C", self.repo, "commit", "-qm", "item"], check=True)
        backend = self.backend()
        reply = backend.call("acquire", {"ledger_namespace": self.ns, "item_id": ITEM, "owner_id": "crash-owner",
                                         "lease_duration_ms": 86_400_000,
                                         "expected": {"last_epoch": "0", "active": None}})
        assert reply.exit == 0, reply.envelope
        self.epoch = reply.envelope["result"]["claim"]["epoch"]

    def backend(self):
        return open_backend({"ledger": self.ledger_dir}, SystemClock(), Hooks())

    def item(self) -> bytes:
        return Path(self.ledger_dir, f"{ITEM}.md").read_bytes()

    def request(self, op_id: str, old: bytes, new: bytes) -> dict:
        return {"operation_id": op_id, "ledger_namespace": self.ns, "item_id": ITEM,
                "expected_revision": revision(old), "candidate_source_base64": base64.b64encode(new).decode(),
                "candidate_sha256": revision(new),
                "claim_fence": {"ledger_namespace": self.ns, "item_id": ITEM, "owner_id": "crash-owner",
                                "epoch": self.epoch}}


def trial(rig: Rig, i: int, rng: random.Random) -> dict:
    """One kill -9 trial at a random step or moment (raises AssertionError on a violation)."""
    order = rng.choice(RECOVERY_ORDERS)
    if rng.random() < 0.5:
        return trial_at(rig, i, rng.choice(CRASH_POINTS), order=order)
    return trial_at(rig, i, "random-delay", rng.uniform(0.05, 0.6), order=order)


def trial_at(rig: Rig, i: int, mode: str, delay: float | None = None, order: str = "verify-first") -> dict:
    """Kill the publish at crash point ``mode``, or after ``delay`` seconds,
    then recover in ``order``."""
    old = rig.item()
    new = rig.sources[1] if old == rig.sources[0] else rig.sources[0]
    req = rig.request(f"crash-{i}", old, new)
    raw = json.dumps(req).encode()
    env = dict(os.environ)
    if delay is None:
        env["CLAIM_CHAOS_GITJOURNAL_CRASH_AT"] = mode
    proc = subprocess.Popen(CLI + ["publish-claimed", "--ledger", rig.ledger_dir, "--input", "-", "--json"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    proc.stdin.write(raw)
    proc.stdin.close()
    if delay is not None:
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)  # our own child
    rc = proc.wait(60)
    proc.stdout.close()
    killed = rc < 0
    lock_left = os.path.exists(os.path.join(rig.backend().store.ledger.ns_dir, "lock"))
    after_crash = rig.item()
    assert after_crash in (old, new), "item is neither the old nor the new bytes"
    backend = rig.backend()
    findings = _verify(backend) if order == "verify-first" else None
    read = backend.call("publication-read", {"operation_id": req["operation_id"], "ledger_namespace": rig.ns,
                                             "item_id": ITEM})
    found = read.exit == 0
    assert found or read.envelope["error"]["code"] == "operation-not-found", read.envelope
    assert found == (rig.item() == new), f"stored outcome (found={found}) disagrees with the bytes ({order})"
    if found:
        assert read.envelope["result"]["outcome"]["exit"] == 0, "a stored outcome that is not the success"
    assert not any(n.startswith(".wb-tmp-") for n in os.listdir(rig.ledger_dir)), "temp file left"
    retry = backend.call("publish", req)
    assert retry.exit == 0, f"identical retry refused ({order}): {retry.envelope}"
    if found:
        assert retry.envelope == read.envelope["result"]["outcome"]["stdout"], "retry is not the stored envelope"
    assert rig.item() == new
    if findings is None:
        findings = _verify(backend)
    return {"mode": mode, "order": order, "killed": killed, "bytes": "new" if after_crash == new else "old",
            "lock_left": lock_left, "findings": findings}


def _verify(backend) -> list[str]:
    verify = backend.call("verify", b"")
    assert verify.exit == 0, verify.envelope
    return [f"{f['finding']}:{f.get('resolution', '')}" for f in verify.envelope["result"]["findings"]]


def contention(rig: Rig, rounds: int) -> collections.Counter:
    """Concurrent acquires from two worktrees on one tuple: never two winners per epoch."""
    wt = os.path.join(rig.base, "wt2")
    subprocess.run(["git", "-C", rig.repo, "worktree", "add", "-q", wt], check=True)
    ledgers = [rig.ledger_dir, os.path.join(wt, "ledger")]
    item = "wb_01Q4837BM01W70T30B184GG1R7"
    backend = rig.backend()
    counts: collections.Counter = collections.Counter()
    epoch = 0
    for r in range(rounds):
        body = {"ledger_namespace": rig.ns, "item_id": item, "lease_duration_ms": 600_000,
                "expected": {"last_epoch": str(epoch), "active": None}}
        procs = [subprocess.Popen(CLI + ["claim", "acquire", "--ledger", led, "--input", "-", "--json"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
                 for led in ledgers]
        outs = [p.communicate(json.dumps({**body, "owner_id": f"wt{k}-r{r}"}).encode(), timeout=60)[0]
                for k, p in enumerate(procs)]
        replies = [(p.returncode, json.loads(o)) for p, o in zip(procs, outs)]
        winners = [env for rc, env in replies if rc == 0]
        assert len(winners) <= 1, f"round {r}: both worktrees acquired epoch {epoch + 1}"
        counts["one-winner" if winners else "no-winner"] += 1
        for rc, env in replies:
            counts[f"exit-{rc}:{env.get('error', {}).get('code', 'ok')}"] += 1
        if winners:
            claim = winners[0]["result"]["claim"]
            assert claim["epoch"] == str(epoch + 1)
            rel = backend.call("release", {"ledger_namespace": rig.ns, "item_id": item, "owner_id": claim["owner_id"],
                                           "epoch": claim["epoch"], "expected_expires_at": claim["expires_at"]})
            assert rel.exit == 0, rel.envelope
            epoch += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    base = tempfile.mkdtemp(prefix="gj-crash-")
    try:
        rig = Rig(base)
        stats: collections.Counter = collections.Counter()
        start = time.monotonic()
        for i in range(args.trials):
            t = trial(rig, i, rng)
            stats[f"bytes-after-kill={t['bytes']}"] += 1
            stats[f"killed={t['killed']}"] += 1
            stats[f"mode={t['mode']}/bytes={t['bytes']}"] += 1
            stats[f"recovery={t['order']}"] += 1
            stats[f"lock-left-by-dead-owner={t['lock_left']}"] += 1
            for f in t["findings"] or ["(no finding)"]:
                stats[f"verify:{f}"] += 1
        took = time.monotonic() - start
        print(f"{args.trials} kill -9 trials in {took:.1f} s, 0 violations")
        for k in sorted(stats):
            print(f"  {k:<50} {stats[k]}")
        counts = contention(rig, args.rounds)
        print(f"{args.rounds} contention rounds across two worktrees, never two winners:")
        for k in sorted(counts):
            print(f"  {k:<50} {counts[k]}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
