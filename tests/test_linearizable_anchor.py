"""Porcupine's own anchor histories must get the verdicts its test suite expects.

The expected verdicts come from shared/anchors/porcupine/timings.tsv (the
README's table). etcd_095 is empty upstream and skipped.
"""

from __future__ import annotations

import csv
import os

import pytest

from checkers.linearizable import check_operations
from checkers.linearizable.anchors import etcd_model, kv_model, kv_no_partition_model, parse_etcd_log, parse_kv_log

ANCHORS = os.environ.get("PORCUPINE_ANCHORS", "/work/shared/anchors/porcupine")


def _expected() -> dict[tuple[str, str], bool]:
    path = os.path.join(ANCHORS, "timings.tsv")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {(r["file"], r["model"]): r["expected"] == "yes" for r in csv.DictReader(f, delimiter="\t")}


EXPECTED = _expected()
pytestmark = pytest.mark.skipif(not EXPECTED, reason=f"no Porcupine anchors at {ANCHORS}")
ETCD = sorted(f for f, m in EXPECTED if m == "etcd register")
KV = sorted(f for f, m in EXPECTED if m == "kv by key")
KV_NOPART = sorted(f for f, m in EXPECTED if m == "kv map, no partition")


def _verdict(result: str) -> bool:
    assert result in ("ok", "illegal"), f"search did not finish: {result}"
    return result == "ok"


def test_anchor_table_is_complete() -> None:
    assert len(ETCD) == 102 and "jepsen/etcd_095.log" not in ETCD
    assert sum(EXPECTED[(f, "etcd register")] for f in ETCD) == 23
    assert len(KV) == 6 and len(KV_NOPART) == 4


@pytest.mark.parametrize("name", ETCD)
def test_etcd_verdict(name: str) -> None:
    ops = parse_etcd_log(os.path.join(ANCHORS, "test_data", name))
    assert _verdict(check_operations(etcd_model, ops, timeout=60).result) == EXPECTED[(name, "etcd register")]


@pytest.mark.parametrize("name", ["jepsen/etcd_002.log", "jepsen/etcd_057.log", "jepsen/etcd_000.log"])
def test_etcd_verdict_without_symmetry_reduction(name: str) -> None:
    """The plain Porcupine search order (no twin reduction) agrees on a heavy ok, a heavy and a light illegal."""
    ops = parse_etcd_log(os.path.join(ANCHORS, "test_data", name))
    res = check_operations(etcd_model, ops, timeout=60, symmetry=False)
    assert _verdict(res.result) == EXPECTED[(name, "etcd register")]


@pytest.mark.parametrize("name", KV)
def test_kv_partitioned_verdict(name: str) -> None:
    ops = parse_kv_log(os.path.join(ANCHORS, "test_data", name))
    res = check_operations(kv_model, ops, timeout=60)
    assert _verdict(res.result) == EXPECTED[(name, "kv by key")]
    if res.result == "ok":
        assert len(res.partitions) == len({op.input[1] for op in ops})


@pytest.mark.parametrize("name", KV_NOPART)
def test_kv_no_partition_verdict(name: str) -> None:
    ops = parse_kv_log(os.path.join(ANCHORS, "test_data", name))
    res = check_operations(kv_no_partition_model(ops), ops, timeout=60)
    assert _verdict(res.result) == EXPECTED[(name, "kv map, no partition")]


def test_etcd_failure_has_partial_linearizations() -> None:
    ops = parse_etcd_log(os.path.join(ANCHORS, "test_data", "jepsen/etcd_000.log"))
    res = check_operations(etcd_model, ops, verbose=True)
    assert res.result == "illegal"
    partials = res.partial_linearizations[0]
    assert partials and all(0 < len(p) < len(ops) for p in partials)
    # every partial linearization is a legal sequence of the model
    for seq in partials:
        state = etcd_model.init()
        for i in seq:
            ok, state = etcd_model.step(state, ops[i].input, ops[i].output)
            assert ok
