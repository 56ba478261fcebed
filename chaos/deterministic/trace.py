"""The scheduler's trace kept beside a run (``schedule.trace.gz``): one line per scheduling point, in
the order points were granted (``<virtual ns> <thread> <call> <index> <arg> <path>``), the lines
``results.json``'s ``trace_sha256`` digests. Two runs of one seed that should have made one schedule
and did not are told apart by their first differing line: which thread stopped where, at what
virtual time, and what the other run did there instead.

Its content's sha256 (``zcat schedule.trace.gz | sha256sum``) is ``trace_sha256``, and its bytes depend
only on the lines (a gzip header without a name or a time), so two runs with one schedule write one file."""

from __future__ import annotations

import gzip
import os
from itertools import zip_longest

NAME = "schedule.trace.gz"
#: lines of context shown before the first difference
CONTEXT = 3


def write(run_dir: str, lines: list[str]) -> str:
    path = os.path.join(run_dir, NAME)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as f:
        f.write("\n".join(lines).encode())   # no newline after the last: its sha256 is trace_sha256
    return path


def read(run_dir: str) -> list[str] | None:
    """A run's trace lines, or None when it kept none (a timed run, or one from before the trace was kept)."""
    try:
        with gzip.open(os.path.join(run_dir, NAME), "rt") as f:
            return f.read().splitlines()
    except (OSError, EOFError):
        return None


def first_difference(a: list[str], b: list[str]) -> str | None:
    """Where two schedules part, as a few lines of text (None: they are one schedule)."""
    for n, (x, y) in enumerate(zip_longest(a, b), 1):
        if x != y:
            start = max(1, n - CONTEXT)
            shared = [f"    {k}  {line}" for k, line in enumerate(a[start - 1:n - 1], start)]
            return "\n".join([f"the schedules part at line {n} of their traces ({len(a)} and {len(b)} lines):", *shared,
                              f"  - {n}  {x if x is not None else '(the first run ended here)'}",
                              f"  + {n}  {y if y is not None else '(the second run ended here)'}"])
    return None


def compare_runs(first_dir: str, second_dir: str) -> str:
    """What to say about two runs' schedules: where they part, that they are one, or why it is not known."""
    a, b = read(first_dir), read(second_dir)
    if a is None or b is None:
        return f"no {NAME} in {first_dir if a is None else second_dir}: the schedules cannot be compared"
    return first_difference(a, b) or f"one schedule ({len(a)} lines): the difference is not in the order of points"
