"""Nothing is written outside the store, and ``latest`` / ``chaos serve`` never
lead outside it (issue 13: ``--name ../..`` and a matrix ``name:`` escaped)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request

import pytest
import yaml

from chaos import cli
from chaos.commands.serve import start_in_thread
from chaos.errors import UsageError
from chaos.store import RunDir, check_name
from chaos.testing.synthetic import make_run

ESCAPES = ["../..", "..", ".", "/tmp/elsewhere", "a/b", "latest", "", "-x", "a\x00b", "x" * 121, "ca\nfe"]


@pytest.mark.parametrize("name", ESCAPES)
def test_run_name_that_is_not_one_plain_component_is_refused(capsys, tmp_path, name):
    store = tmp_path / "deep" / "store"
    code = cli.main(["run", "--store", str(store), "--name", name, "--workers", "1", "--time-limit", "1",
                     "--nemesis", "none"])
    err = capsys.readouterr().err
    assert code == 254 and "Traceback" not in err and "--name" in err
    assert sorted(os.listdir(tmp_path)) == []  # nothing made anywhere, not even the store


@pytest.mark.parametrize("name", ["../../escape", "/abs", "a/b"])
def test_matrix_name_that_would_escape_is_refused(capsys, tmp_path, name):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"name": name, "backends": ["sqlite"], "seeds": [1]}))
    code = cli.main(["test-all", "--matrix", str(path), "--store", str(tmp_path / "store"), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 254 and "name" in err and "Traceback" not in err


def test_good_names_pass():
    for name in ("claims-sqlite", "smoke-sqlite-kill-pause", "a.b_c-1", "X"):
        assert check_name(name) == name


def test_run_dir_is_never_made_through_a_symlinked_name(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    store = tmp_path / "store"
    store.mkdir()
    (store / "t").symlink_to(outside)
    with pytest.raises(UsageError, match="symlink"):
        RunDir(str(store), "t")
    assert list(outside.iterdir()) == []


def test_latest_is_relative_and_inside_the_store(tmp_path):
    run = RunDir(str(tmp_path / "store"), "t")
    run.link_latest()
    link = tmp_path / "store" / "latest"
    assert not os.path.isabs(os.readlink(link))
    assert os.path.realpath(link) == os.path.realpath(run.path)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_serve_never_serves_a_path_outside_the_store(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    store = tmp_path / "store"
    run_dir = make_run(str(store), name="one", verdict="valid")
    (store / "escape").symlink_to(outside)
    os.symlink(str(outside), os.path.join(run_dir, "logs", "up"))
    os.symlink(os.path.relpath(run_dir, store), store / "latest")
    server, url = start_in_thread(str(store), 0)
    try:
        assert _status(f"{url}latest/results.json") == 200           # a link inside the store is fine
        assert _status(f"{url}escape/secret.txt") == 404
        assert _status(f"{url}{os.path.relpath(run_dir, store)}/logs/up/secret.txt") == 404
        assert _status(f"{url}..%2f..%2f{outside.name}/secret.txt") == 404
    finally:
        server.shutdown()
        server.server_close()


def test_serve_index_links_are_url_encoded(tmp_path):
    store = tmp_path / "store"
    make_run(str(store), name="odd name#1?%", verdict="valid")   # made by hand, not by chaos run
    server, url = start_in_thread(str(store), 0)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            page = r.read().decode()
        assert 'href="/odd%20name%231%3F%25/' in page
        href = page.split('href="/odd%20name%231%3F%25/', 1)[1].split('"', 1)[0]
        assert _status(f"{url}odd%20name%231%3F%25/{href}") == 200
    finally:
        server.shutdown()
        server.server_close()


def test_runs_started_in_the_same_millisecond_get_a_directory_each_and_keep_their_tmp(tmp_path, monkeypatch):
    # a campaign starts many runs in one store at once: each must own its directory, and one
    # run's sweep of dead runs' tmp/ must never take a live run's tmp/ (it did: exit 255)
    from chaos.store import clean_stale_tmp

    monkeypatch.setattr("time.time", lambda: 1_800_000_000.123)   # one stamp for both
    first, second = RunDir(str(tmp_path), "t"), RunDir(str(tmp_path), "t")
    # the stamp is of one clock read: seconds from another read (time.gmtime()) put today's date here
    assert first.path.endswith("/t/20270115T080000.123Z"), first.path
    assert first.path != second.path and second.path.endswith("-2")
    for run in (first, second):
        assert open(os.path.join(run.tmp, ".owner")).read() == str(os.getpid())
    dead = tmp_path / "t" / "19700101T000000.000Z"
    (dead / "tmp").mkdir(parents=True)                 # a killed run's leftover, no owner alive
    (dead / "tmp.new.999999999").mkdir()               # one killed while it made its tmp/
    removed = clean_stale_tmp(str(tmp_path))
    assert sorted(removed) == sorted([str(dead / "tmp"), str(dead / "tmp.new.999999999")])
    assert os.path.isdir(first.tmp) and os.path.isdir(second.tmp)


def test_a_deterministic_runs_tmp_is_never_ownerless_while_another_run_sweeps(tmp_path, monkeypatch):
    # two crash-point runs at once in one store (explore --parallel): the deterministic run wrote its
    # tmp/.owner a second time, truncating it, and a sweep that read it empty in that moment removed
    # the live run's tmp/ (FileNotFoundError: tmp/pids, in CI). Here the other run's sweep comes at
    # every write of an owner file in a live tmp/, the worst moment it could.
    import builtins

    from chaos.deterministic import run as det_run
    from chaos.explore.seeds import run_config
    from chaos.store import clean_stale_tmp

    store = tmp_path / "store"
    real_open, swept = builtins.open, []

    def open_then_sweep(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if isinstance(file, str) and file.endswith(os.sep + os.path.join("tmp", ".owner")) and "w" in mode:
            swept.extend(clean_stale_tmp(str(store)))
        return f

    monkeypatch.setattr(builtins, "open", open_then_sweep)
    cfg = run_config({"name": "sweep", "backend": "sqlite", "nemesis": [], "workers": 1, "time_limit": 0.2,
                      "seed": 1, "store": str(store), "namespaces": 1, "items": 1, "depth": 2})
    det_run.run(cfg, report=False)
    monkeypatch.setattr(builtins, "open", real_open)
    assert swept == []
    (run,) = [d for d in (store / "sweep").iterdir() if d.name != "latest"]
    assert (run / "results.json").is_file() and (run / "history.jsonl").is_file()
