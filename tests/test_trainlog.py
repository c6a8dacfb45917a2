"""trainer/verl/trainlog.py and `tbt report --training`: a training run's metrics file (verl's
file logger) read line by line, its reward curve per step, and the report section made of it."""

import json

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.verl.trainlog import TrainLogError, curve, read

FIXTURES = "tests/fixtures/eval"


def write(path, *lines):
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def step(n, score, **more):
    return {"step": n, "data": {"training/episode/score/mean": score, "training/episode/generated_tokens/mean": 100.0 + n,
                                "timing_s/step": 60.0 * n, **more}}


def test_the_curve_is_the_pass_share_per_step_in_step_order_and_a_resumed_step_keeps_its_last_line(tmp_path):
    p = write(tmp_path / "m.jsonl", step(2, 0.5), step(1, 0.25), "", step(2, 0.75))
    rows = curve(read(p))
    assert [r["step"] for r in rows] == [1, 2]
    assert [r["score"] for r in rows] == [0.25, 0.75]
    assert rows[1]["generated_tokens"] == 102.0 and rows[1]["seconds"] == 120.0


def test_verls_own_score_stands_in_and_a_step_without_one_has_none(tmp_path):
    p = write(tmp_path / "m.jsonl", {"step": 1, "data": {"critic/score/mean": 0.5}}, {"step": 2, "data": {"x": 1}})
    assert [r["score"] for r in curve(read(p))] == [0.5, None]


@pytest.mark.parametrize("line, says", [
    ("{not json", r"m\.jsonl:2: not JSON"),
    (json.dumps({"step": "1", "data": {}}), r"m\.jsonl:2: expected"),
    (json.dumps([1, 2]), r"m\.jsonl:2: expected"),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, says):
    p = write(tmp_path / "m.jsonl", step(1, 0.5), line)
    with pytest.raises(TrainLogError, match=says):
        read(p)


def test_an_empty_file_logged_no_step(tmp_path):
    with pytest.raises(TrainLogError, match="no step logged"):
        read(write(tmp_path / "m.jsonl", ""))


def test_report_training_adds_the_curve_and_its_table(tmp_path):
    metrics = write(tmp_path / "metrics.jsonl", step(1, 0.5), step(2, 0.625), step(3, 0.8125))
    html = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", f"{FIXTURES}/base.agg.json", "--html", str(html), "--training", str(metrics)])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    assert "Reward per training step (metrics.jsonl)" in page and "3 step(s) logged" in page
    assert "<td>0.625</td>" in page and "<td>0.812</td>" in page
    png = tmp_path / "r-training.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_training_refuses_a_file_that_is_not_a_metrics_log(tmp_path):
    bad = write(tmp_path / "metrics.jsonl", step(1, 0.5), "[]")
    res = CliRunner().invoke(app, ["report", f"{FIXTURES}/base.agg.json", "--html", str(tmp_path / "r.html"),
                                   "--training", str(bad)])
    assert res.exit_code == 2 and "metrics.jsonl:2: expected" in res.output
    assert not (tmp_path / "r.html").exists()


def test_a_real_verl_file_logger_line_gives_its_reward_tokens_and_seconds():
    """tests/fixtures/eval/metrics.jsonl is verl's own file-logger output of `tbt quickstart --n 2 --train
    --steps 1 --k 4` (one GRPO step on CPU): the curve reads our agent loop's keys from it."""
    from pathlib import Path

    path = Path(__file__).resolve().parent / "fixtures" / "eval" / "metrics.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    rows = curve(read(path))
    assert [r["step"] for r in rows] == [x["step"] for x in raw]
    for r, x in zip(rows, raw):
        assert r["score"] == x["data"]["training/episode/score/mean"] == x["data"]["critic/score/mean"]
        assert r["generated_tokens"] == x["data"]["training/episode/generated_tokens/mean"]
        assert r["seconds"] == x["data"]["timing_s/step"] > 0


def test_a_step_logged_again_without_its_score_keeps_it(tmp_path):
    """verl validates before training on a resume and logs a val-only line for the resumed step;
    the fully-async trainer logs a timing line at a start: merged, not a whole step replaced."""
    p = write(tmp_path / "m.jsonl", step(1, 0.25), step(2, 0.5), {"step": 2, "data": {"val-core/acc": 0.4}})
    (one, two) = read(p)
    assert two[1]["training/episode/score/mean"] == 0.5 and two[1]["val-core/acc"] == 0.4
    assert [r["score"] for r in curve([one, two])] == [0.25, 0.5]
