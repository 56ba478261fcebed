"""report.html draws a non-linearizable partition as Porcupine does: the longest
linearizable prefix with its linearization points, and the ops that cannot follow."""

from __future__ import annotations

import base64
import json
import os
import re

from chaos.reports import plots, write_all
from chaos.reports.analysis import op_spans
from checkers.linearizable import check

from test_linearizable_claims import A1, TUPLE, H, active, acquire_req, claim_ok, rb


def _early_takeover() -> list[dict]:
    """a holds epoch 1 until 1100; c reads it; b's takeover is accepted at 500, while a's lease runs: illegal."""
    h = H()
    h.invoke(1, "acquire", acquire_req("a", 0, None))
    h.done(1, "acquire", claim_ok("acquire", {"claim": A1, "read_back": rb(1, A1, 100)}))
    h.invoke(3, "read", TUPLE).done(3, "read", claim_ok("read", {"read_back": rb(1, A1, 300)}))
    b2 = active("b", 2, 500, 1500)
    h.invoke(2, "acquire", acquire_req("b", 1, A1))
    h.done(2, "acquire", claim_ok("acquire", {"claim": b2, "read_back": rb(2, b2, 500)}))
    return [dict(op, time=op["time"] * 1_000_000) for op in h.ops]  # ms-ish steps in ns


def _run_dir(tmp_path, history: list[dict]) -> str:
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    with open(run_dir / "history.jsonl", "w") as f:
        f.writelines(json.dumps(op) + "\n" for op in history)
    result = check(history, {})
    json.dump({"verdict": "invalid", "checkers": {"linearizable": result}, "test": {"workers": 3}},
              open(run_dir / "results.json", "w"))
    return str(run_dir)


def test_report_draws_the_partial_linearization(tmp_path) -> None:
    history = _early_takeover()
    run_dir = _run_dir(tmp_path, history)
    anomaly = json.load(open(os.path.join(run_dir, "results.json")))["checkers"]["linearizable"]["anomalies"][0]
    assert anomaly["data"]["longest_linearization"] == [0, 2]  # a's acquire, then c's read
    assert anomaly["data"]["not_linearizable_after_it"] == [4] and anomaly["ops"] == [4, 5]
    html = open(write_all(run_dir)["report.html"], encoding="utf-8").read()
    m = re.search(r'<img class="plot" id="plot-linearization-1" alt="[^"]+" src="data:image/png;base64,([^"]+)"', html)
    assert m and base64.b64decode(m.group(1))[:8] == b"\x89PNG\r\n\x1a\n"
    assert "the next op can only be #4" in html and "last_epoch=1 active=a@1" in html


def test_plot_needs_the_ops_it_names() -> None:
    spans = {s.invoke_index: s for s in op_spans(_early_takeover(), 4)}
    assert plots.linearization(spans, [0, 2], [4], 4, "state") is not None
    assert plots.linearization(spans, [0, 2], [99], None, "state") is None  # nothing to draw: said in the HTML
