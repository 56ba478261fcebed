"""The append-only history file: one JSON object per line, written as it happens.

``HistoryWriter.append(op)`` assigns ``index``, serialises the op compactly,
writes the line and flushes it (``fsync=True`` also fsyncs each line), all
under one lock, so concurrent writers never interleave a line and a crash of
the suite leaves every line written so far on disk (a torn last line is
skipped by ``checkers.history.read_history``). Records are kept in memory
too, for the checkers at the end of the run.
"""

from __future__ import annotations

import json
import os
import threading


class HistoryWriter:
    def __init__(self, path: str, fsync: bool = False):
        self.path = path
        self._f = open(path, "ab", buffering=0)
        self._fsync = fsync
        self._lock = threading.Lock()
        self.ops: list[dict] = []

    def append(self, op: dict) -> dict:
        with self._lock:
            rec = {"index": len(self.ops)}
            rec.update((k, v) for k, v in op.items() if k != "index")
            line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n"
            self._f.write(line)
            if self._fsync:
                os.fsync(self._f.fileno())
            self.ops.append(rec)
            return rec

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.ops)

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.close()
