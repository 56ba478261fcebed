"""report.html in a real headless Chromium: the verdict and every plot are visible.

The report itself has no JavaScript; the test copies it and appends a probe
script that records, after load, each ``<img>``'s decoded size and the
verdict's rendered box into the DOM, then reads it back with ``--dump-dom``.
A screenshot is checked for the verdict banner's colour. Skips cleanly when
Chromium is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from chaos.reports import write_all
from chaos.testing.synthetic import make_run

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

PLOTS = {"plot-timeline", "plot-latency", "plot-throughput", "plot-clock"}
PROBE = """<script>
window.addEventListener('load', function () {
  var out = [];
  for (var i = 0; i < document.images.length; i++) {
    var im = document.images[i], r = im.getBoundingClientRect();
    out.push(im.id + '=' + im.naturalWidth + 'x' + im.naturalHeight + '@' + Math.round(r.width) + 'x' + Math.round(r.height));
  }
  var v = document.getElementById('verdict').getBoundingClientRect();
  var p = document.createElement('pre');
  p.id = 'probe';
  p.textContent = 'IMAGES ' + out.join(' ') + ' VERDICT ' + Math.round(v.width) + 'x' + Math.round(v.height);
  document.body.appendChild(p);
});
</script>"""


def _chromium(profile: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    run_dir = make_run(str(root / "store"), verdict="invalid")
    html = open(write_all(run_dir)["report.html"], encoding="utf-8").read()
    return root, run_dir, html


def test_every_plot_decodes_and_the_verdict_is_laid_out(report):
    root, run_dir, html = report
    probed = os.path.join(run_dir, "probed.html")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", PROBE + "</body>"))
    res = _chromium(str(root / "profile-dom"), "--virtual-time-budget=5000", "--dump-dom", f"file://{probed}")
    m = re.search(r"IMAGES (.*?) VERDICT (\d+)x(\d+)", res.stdout)
    assert m, res.stderr[-2000:]
    seen = {}
    for item in m.group(1).split():
        pid, sizes = item.split("=")
        natural, shown = sizes.split("@")
        seen[pid] = tuple(map(int, natural.split("x"))) + tuple(map(int, shown.split("x")))
    assert set(seen) == PLOTS
    for pid, (nw, nh, w, h) in seen.items():
        assert nw > 300 and nh > 100 and w > 300 and h > 100, (pid, seen[pid])
    assert int(m.group(2)) > 100 and int(m.group(3)) > 30
    assert "INVALID" in res.stdout


def test_screenshot_shows_the_red_verdict_banner(report):
    from matplotlib.image import imread

    root, run_dir, _ = report
    shot = str(root / "report.png")
    _chromium(str(root / "profile-shot"), "--window-size=1280,1600", f"--screenshot={shot}",
              f"file://{os.path.join(run_dir, 'report.html')}")
    pixels = imread(shot)[:, :, :3]
    assert pixels.shape[0] >= 1000 and pixels.std() > 0.05  # not a blank page
    # the verdict banner's red (#c62828 = 198,40,40) covers a visible area
    red = (abs(pixels[:, :, 0] - 198 / 255) < 0.06) & (pixels[:, :, 1] < 0.25) & (pixels[:, :, 2] < 0.25)
    assert red.sum() > 2000


FOLD_PROBE = """<script>
window.addEventListener('load', function () {
  var s = document.getElementById('findings-summary').getBoundingClientRect();
  var a = document.querySelector('.anomaly').getBoundingClientRect();
  var p = document.createElement('pre');
  p.id = 'fold';
  p.textContent = 'FOLD ' + Math.round(s.bottom) + ' ' + Math.round(a.top) + ' ' + window.innerHeight;
  document.body.appendChild(p);
});
</script>"""


def test_at_1400_px_the_findings_summary_and_the_first_anomaly_are_above_the_fold(report):
    """Issue #30: 61-171 expanded anomaly blocks used to come before anything that said what broke."""
    root, run_dir, html = report
    probed = os.path.join(run_dir, "fold.html")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", FOLD_PROBE + "</body>"))
    res = _chromium(str(root / "profile-fold"), "--window-size=1400,900", "--virtual-time-budget=5000",
                    "--dump-dom", f"file://{probed}")
    m = re.search(r"FOLD (\d+) (\d+) (\d+)", res.stdout)
    assert m, res.stderr[-2000:]
    summary_bottom, anomaly_top, fold = map(int, m.groups())
    assert summary_bottom < anomaly_top and anomaly_top + 120 < fold, m.groups()
