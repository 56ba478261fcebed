"""chaos serve: a real HTTP server on 127.0.0.1, real requests, clean stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

from chaos.cli import main
from chaos.commands.serve import start_in_thread
from chaos.reports import write_all
from chaos.testing.synthetic import make_run


def _get(url: str) -> tuple[int, str, bytes]:
    # bounded, not paced: on a loaded machine the first page (imports, run summaries) takes seconds
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


def test_index_lists_runs_and_serves_their_files(tmp_path):
    store = str(tmp_path)
    bad = make_run(store, name="bad", verdict="invalid", seed=5)
    write_all(bad)
    make_run(store, name="good", verdict="valid", seed=6)
    make_run(store, name="crash", crashed=True, seed=8)
    server, url = start_in_thread(store, 0)
    try:
        assert url.startswith("http://127.0.0.1:") and server.server_address[0] == "127.0.0.1"
        status, ctype, body = _get(url)
        page = body.decode()
        assert status == 200 and ctype.startswith("text/html")
        for needle in ("bad", "good", "crash", "invalid", "valid", "incomplete", "sqlite", "pause,clock,kill"):
            assert needle in page
        rel = os.path.relpath(bad, store)
        assert f'href="/{rel}/report.html"' in page
        status, ctype, body = _get(f"{url}{rel}/report.html")
        assert status == 200 and b'id="verdict"' in body
        status, _, body = _get(f"{url}{rel}/results.json")
        assert json.loads(body)["verdict"] == "invalid"
        status, ctype, body = _get(f"{url}{rel}/history.jsonl")
        assert ctype.startswith("text/plain") and body.count(b"\n") > 10
    finally:
        server.shutdown()
        server.server_close()


def test_cli_prints_url_and_stops_on_sigint(tmp_path):
    make_run(str(tmp_path), name="one", verdict="valid")
    proc = subprocess.Popen([sys.executable, "-m", "chaos.cli", "serve", str(tmp_path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        status, _, body = _get(url)
        assert status == 200 and b"one" in body
    finally:
        proc.send_signal(2)  # SIGINT: the command's own clean stop
        assert proc.wait(timeout=60) == 0, proc.stderr.read()   # bounded: it returns as soon as it stopped


def test_missing_store_is_a_usage_error(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nope"), "--port", "0"]) == 254
    assert "no such store directory" in capsys.readouterr().err
