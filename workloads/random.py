"""Seeded, purely functional randomness for generators and workloads (canonical home;
``chaos.random`` re-exports it so imports keep pointing ``chaos -> workloads``).

Every random draw in a test comes from here, seeded by the test's seed, so a
run's operation and fault *schedule* is a pure function of ``(seed, config)``.

A ``Stream`` is an immutable value ``(seed, path, n)``. Drawing returns the
value *and the next stream*; the same stream always yields the same value. The
value is a hash of ``(seed, path, n)`` (counter-based, like SplitMix), so
independent parts of a test (one per worker slot, one per combinator position)
draw from independent streams that never interleave: a worker that runs more
or fewer operations than in another run does not shift anybody else's draws.

    s = Stream(42, ("nemesis",))
    x, s = s.random()          # float in [0, 1)
    k, s = s.randint(1, 6)     # int in [1, 6]
    w = s.child("worker", 3)   # an independent stream

``Rng`` is a small stateful wrapper for code that draws a sequence in one place
(planning a schedule, seeding a store) and does not need to be pure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence, TypeVar

T = TypeVar("T")
_MASK = (1 << 64) - 1


@lru_cache(maxsize=4096)
def _key(seed: int, path: tuple) -> int:
    digest = hashlib.blake2b(repr((seed, path)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


@dataclass(frozen=True)
class Stream:
    """An immutable random stream: the ``n``-th draw of ``(seed, path)``."""

    seed: int
    path: tuple = ()
    n: int = 0

    def bits64(self) -> tuple[int, "Stream"]:
        value = _splitmix64(_key(self.seed, self.path) ^ _splitmix64(self.n))
        return value, Stream(self.seed, self.path, self.n + 1)

    def random(self) -> tuple[float, "Stream"]:
        """A float in ``[0, 1)``."""
        bits, nxt = self.bits64()
        return (bits >> 11) / float(1 << 53), nxt

    def randint(self, lo: int, hi: int) -> tuple[int, "Stream"]:
        """An int in ``[lo, hi]`` (both inclusive)."""
        if hi < lo:
            raise ValueError(f"empty range [{lo}, {hi}]")
        bits, nxt = self.bits64()
        return lo + bits % (hi - lo + 1), nxt

    def uniform(self, lo: float, hi: float) -> tuple[float, "Stream"]:
        x, nxt = self.random()
        return lo + (hi - lo) * x, nxt

    def choice(self, seq: Sequence[T]) -> tuple[T, "Stream"]:
        if not seq:
            raise ValueError("choice from an empty sequence")
        i, nxt = self.randint(0, len(seq) - 1)
        return seq[i], nxt

    def weighted(self, weights: Sequence[float]) -> tuple[int, "Stream"]:
        """An index drawn with probability proportional to ``weights[i]``."""
        total = float(sum(weights))
        if total <= 0:
            raise ValueError("weights must have a positive sum")
        x, nxt = self.random()
        acc = 0.0
        for i, w in enumerate(weights):
            acc += w / total
            if x < acc:
                return i, nxt
        return len(weights) - 1, nxt

    def hex(self, digits: int) -> tuple[str, "Stream"]:
        out, s = [], self
        while len(out) * 16 < digits:
            bits, s = s.bits64()
            out.append(f"{bits:016x}")
        return "".join(out)[:digits], s

    def child(self, *labels) -> "Stream":
        """An independent stream below this one (counter reset to 0)."""
        return Stream(self.seed, self.path + tuple(labels), 0)


class Rng:
    """A stateful convenience over ``Stream`` for one-place sequential draws."""

    def __init__(self, seed: int, *path):
        self.stream = Stream(seed, tuple(path))

    def random(self) -> float:
        x, self.stream = self.stream.random()
        return x

    def randint(self, lo: int, hi: int) -> int:
        x, self.stream = self.stream.randint(lo, hi)
        return x

    def uniform(self, lo: float, hi: float) -> float:
        x, self.stream = self.stream.uniform(lo, hi)
        return x

    def choice(self, seq: Sequence[T]) -> T:
        x, self.stream = self.stream.choice(seq)
        return x

    def hex(self, digits: int) -> str:
        x, self.stream = self.stream.hex(digits)
        return x


def fresh_seed() -> int:
    """A seed for a run whose user gave none (recorded in test.yaml to replay it)."""
    import secrets

    return secrets.randbelow(2**31)
