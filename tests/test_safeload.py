"""The one bounded loader (backends.safeload): every limit fails fast, in one
line that names the limit, and within limits it loads what yaml.safe_load /
json.loads load."""

from __future__ import annotations

import os
import time

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import safeload
from backends.safeload import LoadError


def _bomb(levels: int = 9, width: int = 9) -> str:
    """The classic billion laughs: width**levels strings from ~400 bytes."""
    lines = ["name: bomb", "workloads:", f"  - &a [{', '.join(['lol'] * width)}]"]
    prev = "a"
    for i in range(1, levels):
        name = chr(ord("a") + i)
        lines.append(f"  - &{name} [{', '.join([f'*{prev}'] * width)}]")
        prev = name
    return "\n".join(lines) + "\n"


def test_billion_laughs_fails_fast_in_one_short_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb())
    assert path.stat().st_size < 500
    started = time.monotonic()
    with pytest.raises(LoadError) as e:
        safeload.yaml_file(path, what="matrix")
    assert time.monotonic() - started < 2.0
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 300
    assert "200,000-node limit" in msg and str(path) in msg


def test_alias_count_limit_is_named():
    text = "a: &x 1\nb: [" + ", ".join(["*x"] * 101) + "]\n"
    with pytest.raises(LoadError, match="100-alias limit"):
        safeload.yaml_text(text)
    assert safeload.yaml_text("a: &x [1, 2]\nb: [*x, *x]\n") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}


def test_recursive_alias_is_refused():
    with pytest.raises(LoadError, match="recursive alias"):
        safeload.yaml_text("a: &x [1, *x]\n")


def test_a_large_file_is_refused_by_size_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"seeds:\n" + b"- 123456789\n" * 1_300_000)  # 15.6 MB
    started = time.monotonic()
    with pytest.raises(LoadError, match="larger than the 1 MiB limit"):
        safeload.yaml_file(path)
    assert time.monotonic() - started < 1.0


def test_depth_limit_is_named():
    with pytest.raises(LoadError, match="100-level limit"):
        safeload.yaml_text("- " * 150 + "x\n")
    with pytest.raises(LoadError, match="nested too deeply"):
        safeload.json_text("[" * 100_000)


def test_duplicate_keys_are_refused_with_their_line():
    with pytest.raises(LoadError, match=r"duplicate key 'seeds' at line 3"):
        safeload.yaml_text("seeds: [1]\nbackends: [sqlite]\nseeds: [2]\n")
    assert safeload.yaml_text("a: {x: 1}\nb: {x: 2}\nc: [x, x]\n") == {"a": {"x": 1}, "b": {"x": 2}, "c": ["x", "x"]}


def test_only_regular_files_and_never_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(LoadError, match="not a regular file"):
        safeload.yaml_file(fifo)  # would block forever on a plain open()
    with pytest.raises(LoadError, match="is a directory"):
        safeload.yaml_file(tmp_path)
    with pytest.raises(LoadError, match="no such file"):
        safeload.json_file(tmp_path / "missing.json")
    with pytest.raises(LoadError, match="not a regular file"):
        safeload.yaml_file("/dev/zero")


def test_binary_and_broken_text_are_one_line_errors(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    with pytest.raises(LoadError, match="not UTF-8"):
        safeload.yaml_file(path)
    path.write_bytes(b"a: [1, 2\nb: {")
    with pytest.raises(LoadError) as e:
        safeload.yaml_file(path)
    assert "\n" not in str(e.value) and "line" in str(e.value)


def test_history_lines_are_bounded_in_total(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(b'{"a": 1}\n' * 10)
    assert [n for n, _ in safeload.json_lines(path)] == list(range(1, 11))
    with pytest.raises(LoadError, match="larger than the 50 bytes limit"):
        list(safeload.json_lines(path, safeload.Limits(max_bytes=50)))


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=8))
_docs = st.recursive(_scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                       st.dictionaries(st.text(max_size=5), kids, max_size=4)),
                     max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_docs)
def test_within_limits_it_loads_what_safe_load_loads(doc):
    text = yaml.safe_dump(doc)
    assert safeload.yaml_text(text) == yaml.safe_load(text)
