"""`tbt report` (trainer/eval/report.py, report_plots.py): the HTML and its PNGs from the agg.json
fixtures of tests/fixtures/eval (written by the real aggregator: make_fixtures.py there), the
PNGs checked as images, the page opened in headless Chromium with every plot rendered."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from lazy_import import lazy
from typer.testing import CliRunner

from trainer.cli import app
from trainer.eval.report import ReportError, report
from trainer.eval.report_plots import pareto_front

FIX = Path(__file__).parent / "fixtures" / "eval"
BASE, CAND, OTHER, BANDS = (FIX / n for n in ("base.agg.json", "candidate.agg.json", "other.agg.json", "bands.csv"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
mpimg = lazy("matplotlib.image")  # matplotlib on first use, not at collection
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def img_sources(page: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', page)


def check_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE), f"{path.name} is not a PNG"
    pixels = mpimg.imread(path)  # decodes the whole image: a truncated file fails here
    h, w = pixels.shape[:2]
    assert w > 100 and h > 100 and pixels.std() > 0, f"{path.name}: {w}x{h}, blank={pixels.std() == 0}"
    return w, h


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """Three runs (the first is the base), costs, probe data."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    return report([BASE, CAND, OTHER], out, probes=BANDS)


def test_every_plot_is_a_valid_png_beside_the_html_and_linked_by_relative_name(full):
    html, *pngs = full
    assert [p.name for p in pngs] == ["report-heatmap-2.png", "report-heatmap-3.png", "report-pareto.png",
                                      "report-reliability.png", "report-bands.png"]
    assert all(p.parent == html.parent for p in pngs)
    for p in pngs:
        check_png(p)
    page = html.read_text(encoding="utf-8")
    assert img_sources(page) == [p.name for p in pngs]
    # self-contained apart from the PNGs: no script, no stylesheet or image from elsewhere
    assert "<script" not in page and "http://" not in page and "https://" not in page and "<link" not in page
    for heading in ("Runs", "Qwen/Qwen3-8B → Qwen/Qwen3-8B-RLFT", "Qwen/Qwen3-8B → gpt-big", "Per domain (Figure 3)",
                    "Cost per successful attempt vs pass@1 (Figure 4)", "Reliability curves", "Difficulty bands"):
        assert heading in page, heading


def test_the_tables_carry_the_agg_figures(full):
    page = full[0].read_text(encoding="utf-8")
    base, cand = (json.loads(p.read_text()) for p in (BASE, CAND))
    for doc in (base, cand):
        o = doc["overall"]
        assert f"{o['pass_at_1']['value'] * 100:.2f}%" in page
        assert f"{o['observed_k_of_k']['tasks']} of {o['observed_k_of_k']['over']}" in page
    # Table 1's observed k/k change, in tasks
    change = cand["overall"]["observed_k_of_k"]["tasks"] - base["overall"]["observed_k_of_k"]["tasks"]
    assert f'class="up">+{change} tasks</span>' in page


def test_one_run_without_cost_or_probes_has_only_its_reliability_curve(tmp_path):
    doc = json.loads(BASE.read_text())
    for block in (doc["overall"], *doc["by_domain"].values()):
        block.pop("cost", None)
    plain = tmp_path / "plain.agg.json"
    plain.write_text(json.dumps(doc))
    html, *pngs = report([plain], tmp_path / "out" / "r.html")
    assert [p.name for p in pngs] == ["r-reliability.png"]
    check_png(pngs[0])
    page = html.read_text(encoding="utf-8")
    assert img_sources(page) == ["r-reliability.png"] and "No run has a cost" in page


def test_pareto_front():
    # (pass@1, cost): b dominates a; c and b trade off; d is dominated by c
    pts = [(50, 0.20), (60, 0.15), (70, 0.30), (65, 0.40)]
    assert pareto_front(pts) == [1, 2]
    assert pareto_front([(50, 0.1), (50, 0.1)]) == [0, 1]  # equal points dominate neither


def test_bad_inputs_name_the_file(tmp_path):
    with pytest.raises(ReportError, match=re.escape(str(BANDS)) + ": not JSON"):
        report([BANDS], tmp_path / "r.html")
    bad = tmp_path / "bands.csv"
    bad.write_text("uid,domain,band\nx,retail,difficult\n")
    with pytest.raises(ReportError, match="bands.csv: line 1: missing column.*kept"):
        report([BASE], tmp_path / "r.html", probes=bad)
    bad.write_text(BANDS.read_text().replace(",difficult,", ",hard,", 1))
    with pytest.raises(ReportError, match=r"bands.csv: line \d+: band: 'hard' is not one of the mass_ columns"):
        report([BASE], tmp_path / "r.html", probes=bad)
    r = CliRunner().invoke(app, ["report", str(BANDS), "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "not JSON" in r.output and "Traceback" not in r.output


# ---------------------------------------------------------------------------- in a browser

CHECK = """<script>window.addEventListener("load", function () {
  var seen = [].map.call(document.images, function (i) {
    return {src: i.getAttribute("src"), width: i.naturalWidth, height: i.naturalHeight, complete: i.complete};
  });
  var out = document.createElement("pre"); out.id = "imgcheck"; out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
});</script>"""


def browser() -> str | None:
    return next((b for b in map(shutil.which, BROWSERS) if b), None)


@pytest.mark.engine
def test_the_report_renders_every_plot_in_headless_chromium(full):
    """The page as a browser shows it: a copy of the HTML beside it, plus a script that writes each
    <img>'s natural size into the DOM after the load event (and one image that does not exist,
    to show the check sees a broken one), dumped by headless Chromium."""
    exe = browser()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail(f"no browser ({', '.join(BROWSERS)}) in CI: README's bash scripts/setup_engine_tests.sh installs Debian's chromium")
        pytest.skip(f"no headless browser found ({', '.join(BROWSERS)}): run bash scripts/setup_engine_tests.sh")
    html = full[0]
    page = html.read_text(encoding="utf-8")
    probe = html.with_name("browser-check.html")
    probe.write_text(page.replace("</body>", '<img src="no-such-plot.png" alt="control">' + CHECK + "</body>"),
                     encoding="utf-8")
    r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={html.parent / 'chromium-profile'}", "--virtual-time-budget=10000",
                        "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="imgcheck">(.*?)</pre>', r.stdout, re.S)
    assert m, f"the check script did not run (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    seen = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    plots = {s["src"]: s for s in seen if s["src"] != "no-such-plot.png"}
    assert list(plots) == img_sources(page) and len(plots) == 5
    for src, s in plots.items():
        assert s["complete"] and s["width"] > 100 and s["height"] > 100, (src, s)
        assert (s["width"], s["height"]) == check_png(html.parent / src)
    control = next(s for s in seen if s["src"] == "no-such-plot.png")
    assert control["width"] == 0


# ---------------------------------------------------------------------------- online difficulty

DIFFICULTY = FIX / "difficulty.json"  # a saved online-difficulty state (24 sample tasks, 12 steps)


def test_difficulty_adds_the_trace_and_the_tasks_that_moved(tmp_path):
    """tbt report --difficulty: the trace PNG (a real image) and the tasks whose posterior mean moved
    most, read from the state exactly (prior mean -> mean now)."""
    from trainer.verl.difficulty import DifficultyState

    out = tmp_path / "train.html"
    r = CliRunner().invoke(app, ["report", str(BASE), "--html", str(out), "--difficulty", str(DIFFICULTY)])
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")
    assert "train-difficulty.png" in img_sources(page) and check_png(tmp_path / "train-difficulty.png")[0] > 100
    st = DifficultyState.load(DIFFICULTY)
    moved = max(st.beliefs.items(), key=lambda kv: abs(kv[1].mean - kv[1].prior[0] / sum(kv[1].prior)))
    section = page[page.index("<h2 id=difficulty>"):]
    first = re.search(r"<tbody><tr><td>([^<]+)</td><td>([\d.]+)</td><td>([\d.]+)</td>", section)
    assert first and first.group(1) == moved[0] and float(first.group(3)) == round(moved[1].mean, 3)
    assert f"{len(st.beliefs)} task(s)" in section and f"step {st.step}" in section


def test_difficulty_refuses_a_file_that_is_not_a_state(tmp_path):
    bad = tmp_path / "state.json"
    bad.write_text(json.dumps({"format": "something-else"}))
    r = CliRunner().invoke(app, ["report", str(BASE), "--html", str(tmp_path / "r.html"), "--difficulty", str(bad)])
    assert r.exit_code == 2 and "state.json" in r.output and "something-else" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "r.html").exists()
