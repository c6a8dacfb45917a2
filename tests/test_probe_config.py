"""`tbt probe` and `tbt quickstart` take the framework's config file as `tbt run` / `tbt eval` do
(`--config thinkingbox.yaml`: the policy, user and judge with their sampling and keys; an option
given on the command line wins; keys never printed or recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import Endpoint, completion, model
from trainer.cli import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"
EPISODES = ROOT / "tests" / "fixtures" / "datasets" / "episodes"
KEY = "agent-key-7391"
runner = CliRunner()

CONFIG = """\
orchestrator:
  type: thinkingbox
  agent_model:
    type: aoai
    deployment: agent-m
    endpoint_url: "{agent}/chat/completions"
    temperature: 0.7
    top_p: 0.9
    max_completion_tokens: 2048
    max_retries_server_error: 0
    credential: {{type: api-key, api_key: "${{TBT_TEST_PROBE_KEY}}"}}
user_model:
  type: aoai
  deployment: user-m
  endpoint_url: "{user}/chat/completions"
  temperature: 0.0
judge_model:
  type: aoai
  deployment: judge-m
  endpoint_url: "{judge}/chat/completions"
  temperature: 0.0
  seed: 42
  max_completion_tokens: 128
"""


@pytest.fixture
def config(tmp_path, monkeypatch):
    """A framework config file naming three local endpoints (agent, user, judge)."""
    agent = Endpoint(model(["<think>\nhmm\n</think>\n\nCould you tell me your email?",
                            "<think>\nok\n</think>\n\nI cannot help with that. <DONE>"]))
    user = Endpoint(lambda path, body: completion("I don't know."))
    judge = Endpoint(lambda path, body: completion("Yes"))
    f = tmp_path / "thinkingbox.yaml"
    f.write_text(CONFIG.format(agent=agent.url, user=user.url, judge=judge.url))
    monkeypatch.setenv("TBT_TEST_PROBE_KEY", KEY)
    yield f, agent, user, judge
    for e in (agent, user, judge):
        e.stop()


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_run(recs: list[dict], agent: Endpoint, user: Endpoint) -> None:
    assert recs and all(r["system_error"] is None for r in recs)
    assert {(r["policy"]["model"], r["user"]["model"], r["judge"]["model"]) for r in recs} == {
        ("agent-m", "user-m", "judge-m")}
    body = next(q["body"] for q in agent.requests if "tools" in q["body"])  # (the preflight comes first)
    assert (body["model"], body["temperature"], body["top_p"], body["max_completion_tokens"]) == ("agent-m", 0.7, 0.9,
                                                                                                  2048)
    assert {q["auth"] for q in agent.requests} == {f"Bearer {KEY}"}
    assert {q["body"]["model"] for q in user.requests} == {"user-m"}


def test_probe_takes_policy_user_and_judge_from_the_config_file(config, tmp_path):
    f, agent, user, judge = config
    out = tmp_path / "probes.jsonl"
    r = runner.invoke(app, ["probe", str(SAMPLES), "--config", str(f), "--test-list", str(TOY), "--n", "1",
                            "-o", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    recs = records(out)
    assert len(recs) == 5
    check_run(recs, agent, user)
    assert KEY not in r.output and KEY not in out.read_text()
    # an option given on the command line wins over the file's
    other = tmp_path / "synthetic.jsonl"
    r = runner.invoke(app, ["probe", str(SAMPLES), "--config", str(f), "--policy", "synthetic", "--test-list", str(TOY),
                            "--n", "1", "-o", str(other), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert {(x["policy"]["kind"], x["user"]["model"]) for x in records(other)} == {("synthetic", "user-m")}


def test_probe_without_policy_or_config_is_refused(tmp_path):
    r = runner.invoke(app, ["probe", str(SAMPLES), "-o", str(tmp_path / "p.jsonl")])
    assert r.exit_code == 2 and "give --policy SPEC (or --config thinkingbox.yaml)" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("orchestrator:\n  agent_modle: {}\n")
    r = runner.invoke(app, ["probe", str(SAMPLES), "--config", str(bad), "-o", str(tmp_path / "p.jsonl")])
    assert r.exit_code == 2 and f"{bad}:2: orchestrator.agent_modle: unknown key" in " ".join(r.output.split())


def test_quickstart_takes_the_config_file(config, tmp_path):
    f, agent, user, judge = config
    d = tmp_path / "qs"
    r = runner.invoke(app, ["quickstart", "--config", str(f), "--n", "1", "--dataset", str(EPISODES), "--out-dir", str(d),
                            "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "SYNTHETIC" not in r.output and KEY not in r.output
    check_run(records(d / "probes.jsonl"), agent, user)
    assert (d / "prepared" / "bands.csv").exists()
