"""Profiles are validated strictly: a wrong type, an unknown member (at any
depth) or a missing argv is one line naming the member, and ``chaos run`` /
``chaos conform`` / ``chaos doctor`` turn it into exit 254."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from backends.external.profile import ProfileError, load_profile, parse_profile

ROOT = os.path.join(os.path.dirname(__file__), "..")
PROFILES = os.path.join(ROOT, "profiles")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(PROFILES) if f.endswith(".yaml")
                                        and not f.startswith("issuelock-")))   # issue-lock profiles: their own loader
def test_every_shipped_profile_is_valid(name):
    assert load_profile(os.path.join(PROFILES, name)).name


@pytest.mark.parametrize("doc,needle", [
    ({"name": "p", "git": "yes"}, "git: must be true or false"),
    ({"name": "p", "timeout_s": "30"}, "timeout_s: must be"),
    ({"name": "p", "colour": "red"}, "unknown member colour"),
    ({"name": "p", "busy": {"exit": 6, "retry": {"attempts": 3, "backof_ms": 5}}}, "busy.retry: unknown member backof_ms"),
    ({"name": "p", "argv": {"publish": []}}, "argv.publish: an argv template must not be empty"),
    ({"name": "p", "argv": {"acquire": None}}, "argv.acquire: is required"),
    ({"name": "p", "argv": {"teleport": ["x"]}}, "argv: unknown member teleport"),
    ({"name": "p", "argv": {"read": ["claim", 3]}}, "argv.read[1]: must be a string"),
    ({"name": "p", "api_version": 3}, "api_version: must be one of 1, 2"),
    ({"name": "p", "faults": {"clock_floor_persist": {"admin": "arm"}}}, "names no admin command"),
    ({"name": "p", "known_deviations": [{"id": "x", "anomaly": "reply-protocol"}]}, "'reason' is required"),
    ({"name": "p", "known_deviations": [{"id": "x", "anomaly": "nonlinearizable", "within": "F9", "reason": "r"}]},
     "known_deviations[0].within: 'F9' is not the id of a deviation without 'within'"),
    ({"name": "p", "known_deviations": [{"id": "x", "anomaly": "a", "within": "x", "reason": "r"}]},
     "'x' is not the id of a deviation without 'within'"),   # not itself: one level
    ({"name": "p", "items": {"commit": True}}, "items.commit: needs git: true"),
    ({"name": "p", "provision_mints_namespace": True}, "needs namespaces_per_ledger: 1"),
    ({"name": "p", "export": {"unwrap": "result"}}, "export.unwrap: must be a JSON pointer"),
    (["name", "p"], "a mapping with a 'name' is required"),
    ({"backend_name": "x"}, "'name' (a non-empty string) is required"),
])
def test_a_bad_profile_is_one_line_naming_the_member(doc, needle):
    with pytest.raises(ProfileError) as e:
        parse_profile(doc, "bad.yaml")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_yaml_is_one_line(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nargv: [unclosed\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_profile(p)


@pytest.mark.parametrize("cmd", [
    ["run", "--backend", "external", "--command", "true"],
    ["conform", "--backend", "external", "--command", "true"],
    ["doctor", "--backend", "external"],
])
def test_commands_refuse_a_bad_profile_with_exit_254(tmp_path, cmd):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\ngit: maybe\n")
    out = subprocess.run([sys.executable, "-m", "chaos.cli", *cmd, "--profile", str(p)],
                         capture_output=True, text=True, cwd=str(tmp_path), timeout=120)
    assert out.returncode == 254, out.stderr
    assert out.stderr.count("\n") == 1 and "git: must be true or false" in out.stderr and "Traceback" not in out.stderr
