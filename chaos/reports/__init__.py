"""Reports of a run: ``report.html`` for people, ``junit.xml`` for CI.

``write_all(run_dir) -> {"report.html": path, "junit.xml": path}`` reads the
run directory (``results.json``, ``history.jsonl``, ``test.yaml``; any may be
missing or torn after a crash) and writes both files next to them,
atomically (temp file + rename). The runner calls it at the end of
``chaos run``; ``chaos check`` and ``chaos test-all`` may call it again.

Modules: ``load`` (tolerant reading), ``analysis`` (derived series),
``plots`` (matplotlib Agg -> PNG), ``html`` (the page), ``junit`` (XML),
``results_schema`` (the versioned ``results.json`` schema and
``validate_results``).
"""

from __future__ import annotations

import os

from chaos.reports.load import RunData, load_run


def _write(path: str, text: str) -> str:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def write_html(run: RunData) -> str:
    from chaos.reports import html

    return _write(os.path.join(run.run_dir, "report.html"), html.render(run))


def write_junit(run: RunData) -> str:
    from chaos.reports import junit

    return _write(os.path.join(run.run_dir, "junit.xml"), junit.run_junit(run))


def write_all(run_dir: str) -> dict:
    """Write ``report.html`` and ``junit.xml`` into ``run_dir``; their paths by name."""
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"{run_dir}: no such run directory")
    run = load_run(run_dir)
    return {"junit.xml": write_junit(run), "report.html": write_html(run)}


__all__ = ["write_all", "write_html", "write_junit", "load_run", "RunData"]
