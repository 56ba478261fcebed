"""report.html and junit.xml from synthetic run directories (chaos.testing.synthetic)."""

from __future__ import annotations

import base64
import json
import re
import struct
import xml.etree.ElementTree as ET

import pytest

from chaos.reports import write_all
from chaos.reports.load import load_run
from chaos.testing.synthetic import make_run

PLOTS = ("plot-timeline", "plot-latency", "plot-throughput", "plot-clock")


def _images(html: str) -> dict:
    """id -> decoded PNG bytes of every inline image."""
    out = {}
    for m in re.finditer(r'<img class="plot" id="([^"]+)" alt="[^"]+" src="data:image/png;base64,([^"]+)"', html):
        out[m.group(1)] = base64.b64decode(m.group(2))
    return out


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def invalid_report(tmp_path_factory):
    run_dir = make_run(str(tmp_path_factory.mktemp("store")), verdict="invalid")
    paths = write_all(run_dir)
    with open(paths["report.html"], encoding="utf-8") as f:
        return run_dir, paths, f.read()


def test_report_is_self_contained_with_every_plot(invalid_report):
    _, _, html = invalid_report
    assert 'id="verdict"' in html and ">INVALID<" in html
    images = _images(html)
    assert set(images) == set(PLOTS)
    for data in images.values():
        w, h = _png_size(data)
        assert w > 300 and h > 100
    # nothing fetched from anywhere: no external src/href, no script
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script" not in html


def test_report_names_seed_command_capability_and_anomaly_ops(invalid_report):
    run_dir, _, html = invalid_report
    results = json.load(open(f"{run_dir}/results.json"))
    anomaly = results["checkers"]["dual_ownership"]["anomalies"][0]
    assert "--seed 7" in html and "chaos run --backend sqlite" in html
    assert "mode <b>fenced</b>" in html
    assert anomaly["explanation"] in html
    for i in anomaly["ops"]:
        # each op of the anomaly is listed with its request and reply
        assert re.search(rf"<td>#\d+/#{i}</td>|<td>#{i}(/#\d+)?</td>", html), i
    assert 'id="coverage-table"' in html and "<td>clock</td>" in html


def test_junit_failure_carries_explanations(invalid_report):
    run_dir, paths, _ = invalid_report
    root = ET.parse(paths["junit.xml"]).getroot()
    assert root.tag == "testsuite" and root.get("failures") == "1" and root.get("errors") == "0"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"linearizable", "dual_ownership"}
    failure = cases["dual_ownership"].find("failure")
    assert failure is not None and "both hold item-1" in failure.text and "reproduce: chaos run" in failure.text
    assert cases["linearizable"].find("failure") is None


def test_junit_names_are_unique_per_backend_test_name_and_seed(tmp_path):
    """Two runs of one backend in one CI job used to share ``chaos.<backend>.<checker>``."""
    from chaos.reports.junit import matrix_junit

    runs = [load_run(make_run(str(tmp_path), name=name, seed=seed, verdict="valid"))
            for name, seed in (("cell.a", 1), ("cell.a", 2), ("cell-b", 1))]
    root = ET.fromstring(matrix_junit(runs).split("\n", 1)[1])
    ids = [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]
    assert len(ids) == len(set(ids)) == 6
    assert {c for c, _ in ids} == {"chaos.sqlite.cell_a.seed1", "chaos.sqlite.cell_a.seed2", "chaos.sqlite.cell-b.seed1"}


def test_unknown_is_a_junit_error_not_a_skip(tmp_path):
    paths = write_all(make_run(str(tmp_path), verdict="unknown"))
    root = ET.parse(paths["junit.xml"]).getroot()
    err = [c for c in root.iter("testcase") if c.find("error") is not None]
    assert [c.get("name") for c in err] == ["linearizable"]
    assert "timed out" in err[0].find("error").text and root.get("skipped") == "0"
    assert ">UNKNOWN<" in open(paths["report.html"]).read()


def test_crashed_run_still_gets_a_report(tmp_path):
    run_dir = make_run(str(tmp_path), crashed=True)
    paths = write_all(run_dir)
    html = open(paths["report.html"]).read()
    assert ">UNKNOWN<" in html and "torn last line" in html and "did not finish" in html
    assert "plot-timeline" in _images(html)
    root = ET.parse(paths["junit.xml"]).getroot()
    assert [c.get("name") for c in root.iter("testcase")] == ["run"] and root.get("errors") == "1"


def test_empty_run_dir_explains_missing_plots(tmp_path):
    run_dir = tmp_path / "bare"
    run_dir.mkdir()
    paths = write_all(str(run_dir))
    html = open(paths["report.html"]).read()
    for pid in PLOTS:
        assert f'id="{pid}"' in html
    assert _images(html) == {} and "no history.jsonl" in html


def test_load_run_reads_verdict_and_command(invalid_report):
    run = load_run(invalid_report[0])
    assert run.verdict == "invalid" and run.command.startswith("chaos run --backend sqlite")
    assert run.problems == []


def test_unknown_run_with_all_checkers_valid_is_a_junit_error(tmp_path):
    run_dir = make_run(str(tmp_path), verdict="valid")
    path = f"{run_dir}/results.json"
    results = json.load(open(path))
    results.update(verdict="unknown", exit_code=2, notes=["requested faults never took effect: clock"])
    json.dump(results, open(path, "w"))
    paths = write_all(run_dir)
    root = ET.parse(paths["junit.xml"]).getroot()
    run_case = [c for c in root.iter("testcase") if c.get("name") == "run"]
    assert run_case and "never took effect: clock" in run_case[0].find("error").text
    assert root.get("errors") == "1" and root.get("tests") == "3"
    assert "never took effect: clock" in open(paths["report.html"]).read()


def test_a_checker_with_anomalies_of_several_types_counts_each(tmp_path):
    """Only the first anomalies are listed; the table counts every type, so
    a flood of one type does not hide a second rule that broke."""
    run_dir = make_run(str(tmp_path), verdict="invalid")
    path = f"{run_dir}/results.json"
    with open(path) as f:
        results = json.load(f)
    name, r = next((n, r) for n, r in results["checkers"].items() if r.get("valid") is False)
    r.setdefault("stats", {})["anomalies_by_type"] = {"revision-chain-broken": 298, "unaccepted-revision": 381}
    with open(path, "w") as f:
        json.dump(results, f)
    html = open(write_all(run_dir)["report.html"]).read()
    row = next(tr for tr in html.split("<tr>") if tr.startswith(f"<td>{name}</td>"))
    assert "by type: 298 revision-chain-broken, 381 unaccepted-revision" in row


def test_the_report_leads_to_the_cause(tmp_path):
    """Issue #30: nav bar; the findings summary (one row per rule, with its count) before the first anomaly;
    each rule's minimal instance expanded, the rest collapsed; ops as ``process op(args) -> reply``."""
    run_dir = make_run(str(tmp_path), verdict="invalid")
    path = f"{run_dir}/results.json"
    results = json.load(open(path))
    oks = [op["index"] for op in json.loads("[" + ",".join(open(f"{run_dir}/history.jsonl")) + "]")
           if op["type"] == "ok" and op["process"] != "nemesis"]
    overlapping = [{"type": "overlapping-leases", "explanation": f"leases {k} overlap", "ops": oks[k:k + 3 - (k == 2)]}
                   for k in range(4)]
    early = [{"type": "early-takeover", "explanation": "taken early", "ops": oks[5:7]}]
    results["checkers"]["dual_ownership"] = {"valid": False, "anomalies": overlapping + early, "stats": {
        "anomalies_total": 32, "anomalies_by_type": {"overlapping-leases": 30, "early-takeover": 2}}}
    results["evidence"] = {"replies": 10, "store_unavailable": 8, "store_unavailable_share": 0.8, "stalls_s": [],
                           "thin": ["80% of 10 replies were claim-store-unavailable"]}
    json.dump(results, open(path, "w"))
    html = open(write_all(run_dir)["report.html"]).read()
    assert html.index('<nav id="nav">') < html.index('id="verdict"')
    assert all(f'href="#{a}"' in html for a in ("findings", "evidence", "anomalies", "timeline", "faults"))
    summary, first = html.index('id="findings-summary"'), html.index('class="anomaly"')
    assert summary < html.index('id="thin-evidence"') < first < html.index('id="plot-timeline"')
    rows = re.findall(r"<tr><td><b>([^<]+)</b></td><td>([^<]+)</td><td class=\"count\">(\d+)</td>",
                      html[summary:first])
    assert rows == [("overlapping-leases", "dual_ownership", "30"), ("early-takeover", "dual_ownership", "2")]
    # the minimal instance (2 ops: k == 2) comes first and is the anchor; the other 3 are collapsed
    anchor = html.index('id="finding-dual-ownership-overlapping-leases"')
    assert html.index("leases 2 overlap") > anchor and html.index("leases 2 overlap") < html.index("leases 0 overlap")
    collapsed = html[html.index('<details class="more">'):]
    assert "3 more instances of overlapping-leases" in collapsed and "leases 0 overlap" in collapsed
    assert "... and 26 more overlapping-leases in results.json" in html
    assert re.search(r'<td class="opline">p\d+ \w+\(ns=wbns_synthetic0001, item=item-\d, owner=agent-\d\) -&gt; ok ', html)


def test_an_op_line_shortens_digests_and_names_the_reply():
    from chaos.reports.oplines import op_line

    ns, rev = "wbns_" + "ab12cd" + "0" * 26, "sha256:" + "9f" * 32
    req = {"operation_id": "pub_agent-p0_1", "ledger_namespace": ns, "item_id": "wb_01Q474AK00Q72DQCEZ6ZDXV0QH",
           "expected_revision": rev}
    done = {"type": "fail", "value": {"exit": 4, "envelope": {"ok": False, "error": {
        "code": "ledger-revision-conflict", "details": {"actual_revision": rev}}}}}
    assert op_line(3, "publish", req, done) == (
        "p3 publish(op=pub_agent-p0_1, ns=wbns_ab12cd…, item=wb_…DXV0QH, exp_rev=sha256:9f9f9f9f…) -> "
        "fail exit 4 ledger-revision-conflict {actual_revision: sha256:9f9f9f9f…}")
    assert op_line(1, "read", {"item_id": "x"}, None).endswith("-> (no reply: open at the end of the history)")
    assert op_line(2, "renew", {}, {"type": "info", "error": "timed out"}) == "p2 renew() -> info: timed out"
