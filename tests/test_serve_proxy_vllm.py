"""tbt serve-proxy in front of a real vLLM: the locked vLLM 0.27.1 (its CPU build, from the parity
environment that `.ci/run` builds) serving a tiny Qwen3 made here with the real Qwen tokenizer and
random weights. What a stand-in upstream cannot show: vLLM accepts the proxy's request as sent,
tokenizes the prompt the proxy rendered into exactly the ids training would feed, returns the
generated ids with the text, and the proxy's parity record of that completion passes the gate on
both reading paths. One vLLM start (~1.5 min on two cores, torch.compile off) for the module;
marked engine (`uv run pytest -m engine`). Skipped without the environment, except where TBT_REQUIRE_VLLM is set (CI)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from trainer.core import parity as P
from trainer.core import tb_interpret as ti

from test_serve_proxy import SYSTEMS, TOOLS, Proxy, free_port

ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = Path(os.environ.get("TBT_VLLM_PYTHON", ROOT / ".deps/vllm-parsers/bin/python"))
pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(not VLLM_PY.exists() and not os.environ.get("TBT_REQUIRE_VLLM"),
                                 reason="vLLM parsers env not built: bash scripts/setup_vllm_parsers_env.sh")]


@pytest.fixture(scope="module")
def tok():
    return P.load_tokenizer(P.default_tokenizer())


@pytest.fixture(scope="module")
def vllm(tmp_path_factory, tok):
    """A vLLM OpenAI server on a free port (engine in-process, 1 GiB of KV cache)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    assert VLLM_PY.exists(), f"{VLLM_PY} missing: run bash scripts/setup_vllm_parsers_env.sh"
    model = tmp_path_factory.mktemp("tiny-qwen3-vllm")
    torch.manual_seed(0)  # head_dim 64: vLLM's CPU attention has no kernel for smaller heads
    Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                                 max_position_embeddings=4096, tie_word_embeddings=True)).save_pretrained(model)
    tok.save_pretrained(model)
    port = free_port()
    log = open(model / "vllm.log", "w")
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    proc = subprocess.Popen([str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                             "--served-model-name", "tiny", "--port", str(port), "--max-model-len", "2048",
                             "--dtype", "bfloat16", "--enforce-eager"], cwd=model, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
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
            raise AssertionError(f"vLLM did not come up (exit {proc.poll()}):\n{(model / 'vllm.log').read_text()[-3000:]}")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_through_real_vllm_the_prompt_ids_are_trainings_and_the_record_passes_the_gate(vllm, tok, tmp_path):
    path = tmp_path / "proxy-parity.jsonl"
    proxy = Proxy(vllm, record=str(path))
    msgs = SYSTEMS + [{"role": "user", "content": "Find ada@example.org"}]
    try:
        assert httpx.get(proxy.url + "/readyz", timeout=10).status_code == 200
        r = httpx.post(proxy.url + "/v1/chat/completions", timeout=120, json={
            "model": "tiny", "messages": msgs, "tools": TOOLS, "max_tokens": 24, "temperature": 0, "seed": 0})
        too_long = httpx.post(proxy.url + "/v1/chat/completions", timeout=120, json={
            "model": "tiny", "messages": msgs, "tools": TOOLS, "max_tokens": 100_000})
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
