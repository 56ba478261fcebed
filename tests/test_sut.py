"""One backend, one object: ``chaos.sut`` is the list of backends, each
declares every ability with a reason, and run / conform / the nemeses / doctor
all ask it (a missing ability is refused up front, in one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chaos import sut
from chaos.errors import UsageError
from chaos.nemesis import NEMESES, NemesisRefused, build, support
from chaos.sut.abilities import ABILITIES, Abilities, can, cannot

ROOT = os.path.join(os.path.dirname(__file__), "..")
PROFILES = os.path.join(ROOT, "profiles")
#: a black-box profile that can do nothing privileged and binds no namespace file
BARE = os.path.join(os.path.dirname(__file__), "data", "bare-profile.yaml")
ALPHA = BARE


def chaos(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_the_backend_list_is_the_sut_package():
    modules = {f[:-3] for f in os.listdir(os.path.join(ROOT, "chaos", "sut"))
               if f.endswith(".py") and f not in ("__init__.py", "abilities.py", "base.py")}
    assert set(sut.names()) == modules
    assert set(sut.names(runs=True)) == modules - {"reference"}
    assert set(sut.names(cli=True)) == {"reference", "sqlite", "postgres", "gitjournal", "python"}


@pytest.mark.parametrize("name", sut.names())
def test_every_backend_answers_every_ability_with_a_reason(name):
    opts = {"profile": ALPHA} if name == "external" else {}
    table = sut.get(name).abilities(opts)
    assert list(table) == list(ABILITIES)
    for ability in table.values():
        assert isinstance(ability.ok, bool) and ability.how.strip() and "\n" not in ability.how


def test_missing_names_the_first_unmet_need_and_its_mechanism():
    table = Abilities("demo", {"kill": can("worker processes", "workers"), "seed": cannot("no admin seed")})
    assert table.missing(["kill"]) is None
    assert table.missing(["kill", "seed"]) == "needs seed: no admin seed"
    assert "by hook; demo offers it by workers" in table.missing(["kill=hook"])
    assert table.missing(["barrier"]).startswith("needs barrier: demo declares no way to")
    with pytest.raises(ValueError, match="undeclared"):
        Abilities("demo", {"teleport": can("yes")})


def test_a_nemesis_takes_its_mechanism_from_the_backend():
    assert build("kill", {"workers": 1, "backend": "postgres"}).targets == "server"
    assert build("kill", {"workers": 1, "backend": "sqlite"}).targets == "workers"
    assert NEMESES["kill"]({"workers": 1}).targets == "workers"  # default backend: sqlite
    with pytest.raises(NemesisRefused, match="never faults a --dsn server"):
        build("kill", {"workers": 1, "backend": "postgres", "dsn": "host=127.0.0.1"})
    ok, why = support("postgres", {"dsn": "host=127.0.0.1"})["pause"]
    assert not ok and "never faults a --dsn server" in why


def test_run_refuses_a_nemesis_the_backend_lacks_in_one_line(tmp_path):
    p = chaos("run", "--backend", "external", "--command", "true", "--profile", ALPHA, "--nemesis", "partition",
              "--store", str(tmp_path / "store"))
    assert p.returncode == 254 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "partition (external declares no way" in p.stderr
    assert not (tmp_path / "store").exists()   # refused before anything started
    p = chaos("run", "--backend", "postgres", "--dsn", "host=127.0.0.1", "--nemesis", "kill",
              "--store", str(tmp_path / "store"))
    assert p.returncode == 254 and "never faults a --dsn server" in p.stderr


def test_a_paused_writer_parks_at_the_barrier_hook_or_is_frozen_inside_its_call():
    # a black-box program has no barrier hook: the paused writer's publish is
    # SIGSTOPped inside its per-call CLI process instead (chaos.faults.incall)
    from chaos.nemesis import build

    opts = {"backend": "external", "profile": ALPHA, "pause_at": "publish", "workers": 4}
    assert build("pause", opts).needs == ("freeze-call",)
    assert sut.get("external").abilities({"profile": ALPHA})["freeze-call"].via == "cli"
    assert build("pause", dict(opts, backend="sqlite", profile=None)).needs == ("barrier=hook",)


def test_backend_options_belong_to_their_backend():
    with pytest.raises(UsageError, match="--dsn is for --backend postgres"):
        sut.get("sqlite").check({"dsn": "host=x"})
    with pytest.raises(UsageError, match="needs --command"):
        sut.get("external").check({})
    with pytest.raises(UsageError, match="unknown backend 'nosuch'"):
        sut.get("nosuch")
    with pytest.raises(UsageError, match="for chaos run"):
        sut.get("reference", runs=True)


def test_conform_names_the_missing_ability_of_each_case(tmp_path, capsys):
    from chaos.cli import main

    rc = main(["conform", "--backend", "external", "--command", "true", "--profile", ALPHA,
               "--case", "acquire-contention", "--case", "legacy-write-refusals", "--json"])
    report = json.loads(capsys.readouterr().out)
    notes = {c["case"]: c["notes"][0] for c in report["cases"]}
    assert {c["status"] for c in report["cases"]} == {"not-applicable"}
    assert notes["acquire-contention"].startswith("needs seed: profile bare-black-box has no privileged seed command")
    assert notes["legacy-write-refusals"].startswith("needs seed")
    assert rc in (0, 2)


def test_doctor_prints_one_line_per_ability():
    p = chaos("doctor", "--backend", "external", "--profile", ALPHA)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for name in ABILITIES:
        row = [ln for ln in lines if ln.strip().split(" ", 1)[-1].strip().startswith(f"{name}:")]
        assert len(row) >= 1, name
    assert any(ln.strip().startswith("MISSING seed: profile bare-black-box has no privileged seed command")
               for ln in lines)
    data = json.loads(chaos("doctor", "--backend", "postgres", "--json").stdout)
    assert data["abilities"]["kill"]["via"] == "server" and data["nemeses"]["kill"]["ok"] in (True, False)


def test_doctor_exits_3_when_a_requested_fault_is_missing():
    """A CI job asks ``chaos doctor --nemesis ...`` before a run: a fault it cannot have here is exit 3, named."""
    ok = chaos("doctor", "--backend", "sqlite", "--nemesis", "kill,pause")
    assert ok.returncode == 0, ok.stderr
    missing = chaos("doctor", "--backend", "sqlite", "--nemesis", "kill,partition")
    assert missing.returncode == 3 and missing.stdout.startswith("sqlite: ")
    assert missing.stderr.strip() == ("chaos doctor: requested fault missing: partition: no network between the "
                                      "workers and their store (they share a file)")
    data = json.loads(chaos("doctor", "--nemesis", "partition", "--json").stdout)   # --backend defaults to sqlite
    assert data["backend"] == "sqlite" and data["requested_missing"][0].startswith("partition: ")
    bad = chaos("doctor", "--nemesis", "kil")
    assert bad.returncode == 254 and len(bad.stderr.strip().splitlines()) == 1
