"""``chaos serve [STORE]``: browse stored runs on 127.0.0.1.

An index page lists every run under ``STORE`` (default ``./store``), newest
first, with its verdict, backend, seed, nemeses and start time, and links to
its ``report.html``, ``history.jsonl`` and ``results.json``. Everything else
is served as static files from ``STORE`` (``http.server``), so a report's
relative links (``history.jsonl``, ``logs/``) work, but never outside the
store: a path that resolves (symlinks followed) outside it is a 404. Index
links are URL-encoded. Binds 127.0.0.1 only; ``--port 0`` picks a free port. The URL is printed on the first line of
stdout (flushed) so a script can read it.
"""

from __future__ import annotations

import argparse
import functools
import html
import os
import signal
import sys
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

from backends import safeload
from chaos.errors import UsageError
from chaos.store import inside

HOST = "127.0.0.1"


EXIT_CODES = """exit codes:
  0    done
  254  bad arguments: one line on stderr
  255  the suite itself crashed: a traceback on stderr (please report it)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", nargs="?", default="store", metavar="STORE", help="the store directory (default ./store)")
    parser.add_argument("--port", type=int, default=8080, help="TCP port on 127.0.0.1 (0 picks a free one; default 8080)")


def find_runs(store: str) -> list[dict]:
    """Every ``<name>/<stamp>/`` holding a history or results, newest first."""
    runs = []
    for name in sorted(os.listdir(store)):
        base = os.path.join(store, name)
        if name == "latest" or os.path.islink(base) or not os.path.isdir(base):
            continue
        for stamp in os.listdir(base):
            d = os.path.join(base, stamp)
            if os.path.islink(d) or not os.path.isdir(d) or not any(os.path.exists(os.path.join(d, f)) for f in ("history.jsonl", "results.json")):
                continue
            runs.append(_summary(store, name, stamp, d))
    runs.sort(key=lambda r: r["stamp"], reverse=True)
    return runs


def _summary(store: str, name: str, stamp: str, d: str) -> dict:
    from chaos.reports.load import well_typed

    results = {}
    try:
        results = safeload.json_file(os.path.join(d, "results.json"), safeload.RESULTS, "results")
    except safeload.LoadError:
        pass
    results = well_typed(results, []) if isinstance(results, dict) else {}
    test = results.get("test") or {}
    legacy = results.get("valid")
    verdict = results.get("verdict") or ({True: "valid", False: "invalid"}[legacy] if isinstance(legacy, bool)
                                         else "unknown")
    if verdict not in _COLORS:
        verdict = "unknown"
    if not results:
        verdict = "incomplete"
    nemesis = test.get("nemesis") or []
    return {"name": name, "stamp": stamp, "rel": os.path.relpath(d, store), "verdict": verdict,
            "backend": test.get("backend", "?"), "seed": test.get("seed", "?"),
            "nemesis": ",".join(str(n) for n in nemesis), "started_at": results.get("started_at") or stamp,
            "files": [f for f in ("report.html", "history.jsonl", "results.json", "junit.xml")
                      if os.path.exists(os.path.join(d, f))]}


_COLORS = {"valid": "#1b7f3b", "invalid": "#c62828", "unknown": "#b26a00", "incomplete": "#777"}


def index_page(store: str) -> str:
    rows = []
    for r in find_runs(store):
        e = {k: html.escape(str(v)) for k, v in r.items() if k != "files"}
        href = urllib.parse.quote(r["rel"])
        links = " ".join(f'<a href="/{html.escape(href)}/{f}">{f}</a>' for f in r["files"])
        rows.append(f'<tr><td>{e["name"]}</td><td style="color:{_COLORS.get(r["verdict"], "#000")};font-weight:600">'
                    f'{e["verdict"]}</td><td>{e["backend"]}</td><td>{e["nemesis"]}</td><td>{e["seed"]}</td>'
                    f'<td>{e["started_at"]}</td><td>{links}</td></tr>')
    body = "".join(rows) or '<tr><td colspan="7">no runs stored yet</td></tr>'
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>claim-chaos runs</title><style>"
            "body{font-family:system-ui,sans-serif;margin:16px 24px}table{border-collapse:collapse}"
            "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f4f4f4}</style></head>"
            f"<body><h1>claim-chaos runs in <code>{html.escape(os.path.abspath(store))}</code></h1>"
            "<table id=\"runs\"><tr><th>test</th><th>verdict</th><th>backend</th><th>nemesis</th><th>seed</th>"
            f"<th>started</th><th>files</th></tr>{body}</table></body></html>")


class _Handler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".jsonl": "text/plain; charset=utf-8",
                      ".json": "application/json", ".yaml": "text/plain; charset=utf-8",
                      ".log": "text/plain; charset=utf-8", ".xml": "application/xml"}

    def do_GET(self):
        if self.path in ("/", "/index.html"):
            data = index_page(self.directory).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self._outside():
            return
        super().do_GET()

    def do_HEAD(self):
        if self._outside():
            return
        super().do_HEAD()

    def _outside(self) -> bool:
        """400 for a path no file can have (a NUL byte: ``/%00``), 404 for one
        that resolves outside the store (a symlink out of it): always an answer."""
        try:
            path = self.translate_path(self.path)
            if "\x00" in path:
                raise ValueError("embedded NUL")
            if inside(self.directory, path):
                return False
        except (ValueError, OSError):
            self.send_error(400, "not a path in this store")
            return True
        self.send_error(404, "not in this store")
        return True

    def log_message(self, fmt, *args):  # quiet: one line per request on stderr is noise for a viewer
        pass


def make_server(store: str, port: int = 0) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1 serving ``store`` (not yet serving: call ``serve_forever``)."""
    if not os.path.isdir(store):
        raise UsageError(f"chaos serve: {store}: no such store directory")
    handler = functools.partial(_Handler, directory=os.path.abspath(store))
    try:
        return ThreadingHTTPServer((HOST, port), handler)
    except OSError as e:
        raise UsageError(f"chaos serve: cannot listen on {HOST}:{port}: {e.strerror or e}") from None


def start_in_thread(store: str, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start serving in a daemon thread; returns (server, url). Stop with ``server.shutdown(); server.server_close()``."""
    server = make_server(store, port)
    threading.Thread(target=server.serve_forever, daemon=True, name="chaos-serve").start()
    return server, f"http://{HOST}:{server.server_address[1]}/"


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"chaos serve: --port {args.port} is not a TCP port")
    server = make_server(args.store, args.port)
    signal.signal(signal.SIGTERM, _interrupt)   # a service manager's stop is a clean stop too
    signal.signal(signal.SIGINT, _interrupt)    # also when started in the background (SIGINT inherited ignored)
    print(f"serving {os.path.abspath(args.store)} at http://{HOST}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
