"""`tbt view`: records -> one self-contained HTML page of episodes (trainer/eval/view.py).

Two real runs of ten sample tasks (toy, procurement, telecom) × 3 repetitions through
`runner.run`: run a with a judge that cannot be reached (the tasks that ask it end in real system
errors, retried once, in a.errors.jsonl beside the records), run b with a 5-turn agent cap (real
`agent_turn_cap` endings). The page data is checked against the records (fast); the page itself
is opened in headless Chromium (an engine test, as tests/test_report.py's): loaded, filtered,
episodes opened, what is shown read back from the DOM.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.env.taskformat.tasks import load_dataset
from trainer.eval.aggregate import task_domain
from trainer.eval.view import MAX_CHARS, page_data, read_run, render, serve
from trainer.rollout.episode import EpisodeConfig
from trainer.rollout.runner import RunPlan, run
from trainer.rollout.setup import RunSpec

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
UNREACHABLE_JUDGE = "openai:http://127.0.0.1:9/v1#judge,retries=0,timeout=2"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("view")
    ds = load_dataset(SAMPLES)
    by: dict[str, list[str]] = defaultdict(list)
    for uid, t in sorted(ds.tasks.items()):
        by[t.scenario.name].append(uid)
    only = frozenset(by["toy"] + by["procurement"][:3] + by["telecom_billing"][:2])
    a = run(RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.5", judge=UNREACHABLE_JUDGE),
            RunPlan(output=d / "a.jsonl", repeat=3, retries=1, only=only, preflight=False))
    b = run(RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.9", config=EpisodeConfig(max_agent_turns=5)),
            RunPlan(output=d / "b.jsonl", repeat=3, only=only))
    assert a.unresolved and a.written + len(a.unresolved) == 30 and b.written == 30
    return d / "a.jsonl", d / "b.jsonl", ds, only


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def page_json(page: str):
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


# ---------------------------------------------------------------------------- the page data

def test_the_page_data_holds_every_record_and_the_system_errors_apart(runs):
    a, b, ds, only = runs
    data = page_data([read_run(a), read_run(b)], ds)
    ra, rb = lines(a), lines(b)
    errors = lines(a.with_name("a.errors.jsonl"))
    assert errors and all(e["system_error"].startswith("grading: JudgeUnavailable") for e in errors)
    assert [(r["name"], r["scored"], r["passed"], r["system_errors"], r["errors_file"], r["repetitions"]) for r in data["runs"]] == [
        ("a.jsonl", len(ra), sum(r["verdict"]["passed"] for r in ra), len(errors), "a.errors.jsonl", 3),
        ("b.jsonl", len(rb), sum(r["verdict"]["passed"] for r in rb), 0, "b.errors.jsonl", 3)]  # the runner made it, empty
    assert data["runs"][0]["label"] == "synthetic:p=0.5"
    assert [t["uid"] for t in data["tasks"]] == sorted(only, key=lambda u: (task_domain(ds.tasks[u]), u))
    assert {t["uid"]: t["domain"] for t in data["tasks"]} == {u: task_domain(ds.tasks[u]) for u in only}
    eps = data["episodes"]
    assert len(eps) == len(ra) + len(rb) + len(errors)
    for ep, rec in zip(eps, ra + errors + rb):
        assert (ep["uid"], ep["repetition"], ep["end_reason"]) == (rec["uid"], rec["repetition"], rec["end_reason"])
        assert ep["kind"] == ("error" if rec["system_error"] else "pass" if rec["verdict"]["passed"] else "fail")
        assert ep["messages"] == rec["messages"] and ep["tool_calls"] == rec["tool_calls"]
        assert ep["verdict"]["diff"] == rec["verdict"]["diff"] and ep["timings"] == rec["timings"]
        assert "tokens" not in ep
    assert set(data["end_reasons"]) == {r["end_reason"] for r in ra + rb + errors} >= {"done", "agent_turn_cap", "system_error"}


def test_a_second_record_of_a_key_is_left_out_and_counted(runs, tmp_path):
    a, *_ = runs
    twice = tmp_path / "twice.jsonl"
    first = a.read_text().splitlines()[0]
    twice.write_text(a.read_text() + first + "\n")
    (data_run,) = page_data([read_run(twice)])["runs"]
    assert data_run["duplicated"] == 1 and data_run["scored"] == len(lines(a))


def test_no_text_in_a_record_can_break_out_of_the_page(runs, tmp_path):
    a, *_ = runs
    recs = lines(a)
    hostile = '</script><script>window.pwned = 1</script><!-- <img src="http://example.com/x.png"> & \u2028'
    recs[0]["tool_calls"][0]["result"] = hostile
    recs[0]["messages"].append({"role": "assistant", "content": "x" * (MAX_CHARS + 5000)})
    f = tmp_path / "hostile.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    data = page_data([read_run(f)])
    page = render(data)
    assert page_json(page) == json.loads(json.dumps(data))  # the data block reads back whole
    assert page_json(page)["episodes"][0]["tool_calls"][0]["result"] == hostile
    assert "<script>window.pwned" not in page and "<!--" not in page  # only inside the JSON string, escaped
    assert page.count("</script>") == 2  # the data block's and the script's
    long = page_json(page)["episodes"][0]["messages"][-1]["content"]
    assert long.startswith("x" * MAX_CHARS) and long.endswith("[5,000 more characters: tbt show has them all]")
    # self-contained: it loads nothing, and its policy forbids it to
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:|//)""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page


def test_a_tb_infer_record_is_shown_with_what_it_holds(tmp_path):
    f = tmp_path / "tb.jsonl"
    f.write_text(json.dumps({"uid": "toy_loans.py:test_checkout_book", "test_result": {"result": False, "reward": 0.0},
                             "metadata": {"scenario": "toy", "repetition": 0}, "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    (ep,) = page_data([read_run(f)])["episodes"]
    assert (ep["kind"], ep["format"], ep["messages"], ep["raw"]["test_result"]["result"]) == ("fail", "tb", [{"role": "user", "content": "hi"}], False)


def test_serve_answers_the_page_on_localhost(runs):
    a, *_ = runs
    page = render(page_data([read_run(a)]))
    server = serve(page, port=0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        r = httpx.get(f"http://127.0.0.1:{port}/")
        assert r.status_code == 200 and r.text == page and r.headers["content-type"].startswith("text/html")
        assert httpx.get(f"http://127.0.0.1:{port}/other").status_code == 404
    finally:
        server.shutdown()


def test_the_command_writes_serves_and_refuses_bad_input(runs, tmp_path):
    a, b, *_ = runs
    out = tmp_path / "page.html"
    r = CliRunner().invoke(app, ["view", str(a), str(b), "-o", str(out), "--dataset", str(SAMPLES)])
    assert r.exit_code == 0 and "wrote" in r.stdout, r.output
    assert [x["name"] for x in page_json(out.read_text())["runs"]] == ["a.jsonl", "b.jsonl"]
    r = CliRunner().invoke(app, ["view", str(a)])
    assert r.exit_code == 2 and "give --output page.html, or --serve" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(a.read_text().splitlines()[0] + '\n{"uid": "x.py:test_y", "version": 1, "repetition": -1}\n')
    r = CliRunner().invoke(app, ["view", str(bad), "-o", str(out)])
    assert r.exit_code == 2 and "bad.jsonl:2: repetition" in r.output and "Traceback" not in r.output
    p = subprocess.Popen([sys.executable, "-m", "trainer.cli", "view", str(a), "--serve", "--port", "0"], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"serving (http://127\.0\.0\.1:\d+/)", line)
        assert m, line + (p.stderr.read() if p.poll() is not None else "")
        assert page_json(httpx.get(m.group(1)).text)["runs"][0]["name"] == "a.jsonl"
    finally:
        p.terminate()
        p.wait(10)


# ---------------------------------------------------------------------------- in a browser

CHECK = """<script>
window.addEventListener("load", function () {
  var out = {}, pane = document.getElementById("episode");
  function rows() {
    return [].filter.call(document.querySelectorAll("#grid tbody tr"), function (tr) { return !tr.hidden; })
      .map(function (tr) { return tr.getAttribute("data-uid"); });
  }
  function set(id, v) {
    var e = document.getElementById(id);
    if (e.type === "checkbox") e.checked = v; else e.value = v;
    e.dispatchEvent(new Event("change"));
  }
  function texts(sel) { return [].map.call(pane.querySelectorAll(sel), function (x) { return x.textContent; }); }
  out.all = rows();
  out.cells = {};
  ["pass", "fail", "error", "none"].forEach(function (k) { out.cells[k] = document.querySelectorAll("td.c." + k).length; });
  set("f-domain", "toy"); out.toy = rows(); set("f-domain", "");
  set("f-end", "agent_turn_cap"); out.cap = rows(); out.dimmed = document.querySelectorAll("td.c.dim").length; set("f-end", "");
  set("f-failed", true); out.failed = rows(); set("f-failed", false);
  ["any", "better", "worse"].forEach(function (k) { set("f-changed", k); out[k] = rows(); });
  out.count = document.getElementById("count").textContent;
  set("f-changed", "");
  document.querySelector('td.c[data-e="EPISODE"]').click();
  out.open = pane.getAttribute("data-open");
  out.text = pane.innerText;
  out.verdict = pane.querySelector(".verdict h3").textContent;
  out.explanation = texts("pre.explanation");
  out.diff = [].map.call(pane.querySelectorAll("table.diff tr.d-changed, table.diff tr.d-missing, table.diff tr.d-new"),
                         function (tr) { return tr.children[1].textContent; });
  out.simulated = texts(".m.user.sim pre");
  out.calls = texts(".call code");
  out.args = texts(".call pre.args");
  out.results = texts(".m.tool pre");
  out.reasoning = texts(".reasoning pre");
  out.timings = [].map.call(pane.querySelectorAll("table.kv")[0].querySelectorAll("th"), function (th) { return th.textContent; });
  document.querySelector("#errors a[data-e]").click();
  out.error = pane.innerText;
  out.errorOpen = pane.getAttribute("data-open");
  window.addEventListener("hashchange", function () {
    out.fromHash = pane.getAttribute("data-open");
    var pre = document.createElement("pre"); pre.id = "check"; pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  });
  location.hash = "HASH";
});
</script>"""


def browser() -> str | None:
    return next((b for b in map(shutil.which, BROWSERS) if b), None)


def tally(records):
    t: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        t[r["uid"]][0] += 1
        t[r["uid"]][1] += r["verdict"]["passed"]
    return {u: c / n for u, (n, c) in t.items()}


@pytest.mark.engine
def test_the_page_in_headless_chromium_filters_and_opens_episodes(runs, tmp_path):
    exe = browser()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail(f"no browser ({', '.join(BROWSERS)}) in CI: README's bash scripts/setup_engine_tests.sh installs Debian's chromium")
        pytest.skip(f"no headless browser found ({', '.join(BROWSERS)}): run bash scripts/setup_engine_tests.sh")
    a, b, ds, only = runs
    data = page_data([read_run(a), read_run(b)], ds)
    ra, rb = lines(a), lines(b)
    # the episode to open: a failure of run a with rows in its golden diff and a simulated-user turn
    ep = next(e for e in data["episodes"] if e["kind"] == "fail" and any(e["verdict"]["diff"].values())
              and e["tool_calls"] and any(m["role"] == "user" for m in e["messages"][3:]))
    later = next(e for e in data["episodes"] if e["run"] == 1 and e["repetition"] == 2 and e["uid"] == data["tasks"][-1]["uid"])
    probe = tmp_path / "probe.html"
    probe.write_text(render(data).replace("</body>", CHECK.replace("EPISODE", str(ep["id"])).replace(
        "HASH", f"uid={later['uid']}&run=1&rep=2") + "</body>"), encoding="utf-8")
    r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
                        probe.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="check">(.*?)</pre>', r.stdout, re.S)
    assert m, f"the check script did not run (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    seen = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))

    # load: every task a row, every key a cell (30 per run), coloured by its record
    uids = [t["uid"] for t in data["tasks"]]
    assert seen["all"] == uids and seen["count"].endswith(f"of {len(uids)} task(s) shown")
    errors = lines(a.with_name("a.errors.jsonl"))
    unresolved = {(e["uid"], e["repetition"]) for e in errors} - {(x["uid"], x["repetition"]) for x in ra}
    assert seen["cells"] == {"pass": sum(x["verdict"]["passed"] for x in ra + rb),
                             "fail": sum(not x["verdict"]["passed"] for x in ra + rb),
                             "error": len(unresolved), "none": 0}
    # filter
    assert seen["toy"] == [u for u in uids if task_domain(ds.tasks[u]) == "toy"] and len(seen["toy"]) == 5
    capped = {x["uid"] for x in rb if x["end_reason"] == "agent_turn_cap"}
    assert capped and seen["cap"] == [u for u in uids if u in capped]
    assert seen["dimmed"] == 60 - sum(x["end_reason"] == "agent_turn_cap" for x in rb)
    assert seen["failed"] == [u for u in uids if any(not x["verdict"]["passed"] for x in ra + rb if x["uid"] == u)]
    pa, pb = tally(ra), tally(rb)
    assert seen["any"] == [u for u in uids if u in pa and u in pb and pa[u] != pb[u]]
    assert seen["better"] == [u for u in uids if u in pa and u in pb and pb[u] > pa[u]]
    assert seen["worse"] == [u for u in uids if u in pa and u in pb and pb[u] < pa[u]]
    assert seen["better"] and seen["worse"]
    # open an episode: what it shows is what its record holds
    assert seen["open"] == str(ep["id"]) and seen["verdict"].startswith("FAIL")
    assert seen["explanation"] == [ep["verdict"]["explanation"]]
    assert seen["diff"] == [d["path"] for rows in ep["verdict"]["diff"].values() for d in rows]
    sim = [m["content"] for i, m in enumerate(ep["messages"]) if m["role"] == "user"
           and any(x["role"] == "assistant" for x in ep["messages"][:i])]
    assert sim and seen["simulated"] == sim
    calls = [c for m in ep["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert seen["calls"] == ["→ " + c["function"]["name"] for c in calls]
    assert [json.loads(x) for x in seen["args"]] == [c["function"]["arguments"] for c in calls]
    assert seen["results"] == [m["content"] for m in ep["messages"] if m["role"] == "tool"]
    assert seen["reasoning"] == [m["reasoning_content"] for m in ep["messages"] if m.get("reasoning_content")]
    assert seen["timings"] == list(ep["timings"])
    assert ep["uid"] in seen["text"] and "rows that differ from the golden state" in seen["text"]
    # a system error, opened from the list under the grid
    first_error = next(e for e in data["episodes"] if e["kind"] == "error")
    assert seen["errorOpen"] == str(first_error["id"])
    assert "SYSTEM ERROR (not scored)" in seen["error"] and "JudgeUnavailable" in seen["error"]
    # the URL fragment opens an episode (a link from another page)
    assert seen["fromHash"] == str(later["id"])
