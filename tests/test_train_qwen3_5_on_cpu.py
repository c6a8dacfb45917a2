"""The CPU smoke on the reference run's model family (configs/cpu_smoke_qwen3_5.yaml): a tiny
`Qwen3_5ForConditionalGeneration` (hybrid Gated-DeltaNet / attention layers, a vision tower, XML
tool calls) trained by verl's own trainer through the paths a cluster runs: verl's qwen3_5 forward
(patched 0010, 0019) on packed batches, its fused log-probs, FSDP2, the weight sync into the
cluster's rollout engine (vLLM's CPU build, in bfloat16, as a GPU runs it), checkpoint and resume.
One shared run (2 steps, then a second launch to step 3): ~8 minutes on 2 cores.

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_train_qwen3_5_on_cpu.py
    TBT_CPU_SMOKE_QWEN3_5_RUN=DIR uv run pytest -m engine tests/test_train_qwen3_5_on_cpu.py   (re-check DIR)
"""

from __future__ import annotations

import json
import subprocess

import pytest
from need import need_vllm
from test_train_on_cpu import ROOT, actor_state, check_agreement_table, metrics, smoke, smoke_work

CONFIG = "configs/cpu_smoke_qwen3_5.yaml"
pytestmark = pytest.mark.timeout(3600)
# vLLM (bfloat16 weights and activations, float32 recurrent state) against the float32 actor
BF16_MAX = 0.05  # any one token
BF16_MEAN = 5e-3  # a group's mean


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    work, fresh = smoke_work(tmp_path_factory, "TBT_CPU_SMOKE_QWEN3_5_RUN", "the Qwen3.5 CPU training smoke")
    need_vllm()
    if fresh:
        assert smoke(work, config=CONFIG) == 0, (work / "run.log").read_text()[-6000:]
        (work / "metrics_first.jsonl").write_bytes((work / "checkpoints" / "metrics.jsonl").read_bytes())
        assert smoke(work, "trainer.total_training_steps=3", log="resume.log", config=CONFIG) == 0, \
            (work / "resume.log").read_text()[-6000:]
        (work / "metrics_resume.jsonl").write_bytes((work / "checkpoints" / "metrics.jsonl").read_bytes())
    return {"work": work, "ckpt": work / "checkpoints", "first": metrics(work / "metrics_first.jsonl"),
            "resume": metrics(work / "metrics_resume.jsonl"), "log": (work / "run.log").read_text()}


@pytest.mark.engine
def test_the_actor_is_the_reference_family_and_two_steps_train_it(run):
    """verl's actor built the multimodal class and installed its qwen3_5 forward; two steps logged
    their update; the step-1 actor differs from the initial weights."""
    import torch
    from safetensors.torch import load_file

    log = (run["work"] / "run.log").read_text()
    assert "Qwen3_5ForConditionalGeneration" in log and "Monkey patch Qwen3_5ForConditionalGeneration" in log
    assert "    actor_rollout_ref.model.use_remove_padding=true \\" in log.splitlines()  # packed, as the reference
    assert sorted(run["first"]) == [1, 2]
    for step in (1, 2):
        assert "actor/pg_loss" in run["first"][step] and "timing_s/update_actor" in run["first"][step]
    before = load_file(str(run["work"] / "smoke" / "model" / "model.safetensors"))
    after = actor_state(run["ckpt"] / "global_step_1")
    assert any(k.startswith("model.language_model.layers.0.linear_attn") for k in after)  # a Gated-DeltaNet layer
    assert any(not torch.equal(before[k].float(), after[k].float()) for k in before if k in after)


@pytest.mark.engine
def test_every_episode_of_step_1_is_recorded_with_xml_tool_calls_and_a_verdict(run):
    recs = [json.loads(x) for x in (run["ckpt"] / "records" / "step_1.jsonl").read_text().splitlines() if x.strip()]
    assert len(recs) == 2 * 8 and len({(r["uid"], r["repetition"]) for r in recs}) == len(recs)
    for r in recs:
        assert r["family"] == "xml" and r["tokens"]["response_ids"] and any(r["tokens"]["response_mask"])
        assert r["end_reason"] and r["verdict"]["explanation"]


@pytest.mark.engine
def test_vllm_plays_the_gated_deltanet_model_and_after_each_sync_scores_the_probe_as_the_saved_actor(run):
    """verl's vLLM replica serves the hybrid model (its Gated-DeltaNet layers on vLLM's CPU kernels)
    and holds the step-N actor after step N's sync: the sync's names map onto vLLM's model, and its
    probe log-probs are the saved float32 actor's within bfloat16's error, nearer to step N's actor
    than to step N-1's."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    from trainer.verl.cpu.rollout import PROBE_IDS, PROBE_RESPONSE, token_logprobs

    assert "actor_rollout_ref.rollout.name=vllm" in run["log"] and "(vLLMHttpServer pid=" in run["log"]
    probes = [json.loads(x) for x in (run["work"] / "probe.jsonl").read_text().splitlines() if x.strip()]
    assert probes and all(p.get("engine") == "vllm" and "error" not in p for p in probes), probes
    by_step = {p["global_steps"]: p["logprobs"] for p in probes}
    cfg = AutoConfig.from_pretrained(str(run["work"] / "smoke" / "model"))
    actor = {}
    for step in (1, 2):
        model = AutoModelForImageTextToText.from_config(cfg, dtype=torch.float32)
        missing, unexpected = model.load_state_dict(actor_state(run["ckpt"] / f"global_step_{step}"), strict=False)
        assert not missing and not unexpected
        actor[step] = token_logprobs(model.eval(), PROBE_IDS, PROBE_RESPONSE)
        assert by_step[step] == pytest.approx(actor[step], abs=BF16_MAX)

    def gap(a, b):
        return max(abs(x - y) for x, y in zip(a, b))

    assert gap(by_step[2], actor[2]) < gap(by_step[2], actor[1]), (by_step[2], actor)


@pytest.mark.engine
def test_every_step_logs_the_agreement_by_turn_and_token_kind_within_bfloat16s_error(run):
    """The agreement table (patch 0020) of both steps: vLLM in bfloat16 against the float32 actor,
    every group within BF16_MAX / BF16_MEAN (the measured values are in
    docs/training-cpu-engines.md)."""
    check_agreement_table(run["first"], (1, 2), max_tol=BF16_MAX, mean_tol=BF16_MEAN)


@pytest.mark.engine
def test_the_checkpoint_verifies_and_the_second_launch_resumes_at_step_3(run):
    r = subprocess.run(["uv", "run", "--frozen", "tbt", "checkpoint", "verify", str(run["ckpt"] / "global_step_2")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(run["resume"]) == [1, 2, 3]
    assert {s: run["resume"][s] for s in (1, 2)} == run["first"]
    assert (run["ckpt"] / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
