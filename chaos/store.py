"""The run directory: ``store/<name>/<UTC timestamp>/`` and ``store/latest``.

Layout (docs/architecture.md): ``test.yaml`` (resolved config, seed and the
command that replays it), ``schedule.jsonl`` (the planned operation and fault
schedule, a pure function of seed + config), ``history.jsonl``,
``results.json``, ``report.html``/``junit.xml`` (chaos.reports), ``logs/``
(worker and server output) and ``tmp/`` (preload control files, sockets;
removed at the end of the run, and by the watchdog if the run is killed).
"""

from __future__ import annotations

import json
import os
import time

import yaml


class RunDir:
    def __init__(self, root: str, name: str):
        self.root = os.path.abspath(root)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        self.path = os.path.join(self.root, name, stamp)
        os.makedirs(os.path.join(self.path, "logs"), exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)

    @property
    def tmp(self) -> str:
        return os.path.join(self.path, "tmp")

    def file(self, *parts: str) -> str:
        return os.path.join(self.path, *parts)

    def write_yaml(self, name: str, data: dict) -> None:
        with open(self.file(name), "w") as f:
            yaml.safe_dump(data, f, sort_keys=False, allow_unicode=True)

    def write_json(self, name: str, data: dict) -> None:
        tmp = self.file(name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
        os.replace(tmp, self.file(name))

    def write_jsonl(self, name: str, rows) -> None:
        with open(self.file(name), "w") as f:
            for row in rows:
                f.write(json.dumps(row, separators=(",", ":"), sort_keys=True) + "\n")

    def link_latest(self) -> None:
        """Point ``<root>/latest`` at this run (atomically, relative link)."""
        link = os.path.join(self.root, "latest")
        tmp = f"{link}.tmp.{os.getpid()}"
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        os.symlink(os.path.relpath(self.path, self.root), tmp)
        os.replace(tmp, link)


def clean_stale_tmp(root: str) -> list[str]:
    """Remove ``tmp/`` dirs left under ``root`` by runs that were killed
    (their watchdog normally does it; this is the next start's sweep)."""
    import shutil

    removed = []
    if not os.path.isdir(root):
        return removed
    for name in os.listdir(root):
        base = os.path.join(root, name)
        if name == "latest" or not os.path.isdir(base) or os.path.islink(base):
            continue
        for run in os.listdir(base):
            tmp = os.path.join(base, run, "tmp")
            owner = os.path.join(base, run, "tmp", ".owner")
            if os.path.isdir(tmp) and not _owner_alive(owner):
                shutil.rmtree(tmp, ignore_errors=True)
                removed.append(tmp)
    return removed


def _owner_alive(owner_file: str) -> bool:
    try:
        pid = int(open(owner_file).read().strip())
    except (OSError, ValueError):
        return False
    return os.path.exists(f"/proc/{pid}")
