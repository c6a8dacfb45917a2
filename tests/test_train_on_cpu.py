"""verl's own PPO/GRPO trainer runs real steps on CPU with our agent loop, the actor trained through
a LoRA adapter and the rollout played by the cluster's engine (configs/cpu_smoke_lora.yaml:
configs/cpu_smoke_vllm.yaml's vLLM CPU build as verl's rollout, trainer/verl/cpu/, verl's LoRA on the
actor): the launch a cluster uses (scripts/run_train.sh -> trainer.verl.launch ->
verl.trainer.main_ppo, patches applied), a local Ray, a random tiny Qwen3 built on the spot.

The full-parameter smoke (configs/cpu_smoke.yaml, the hf_cpu engine) is played by
tests/test_resume_on_cpu.py (its uninterrupted run, whose engine probe it checks after every sync,
and its killed one); the reference family's by tests/test_train_qwen3_5_on_cpu.py. This file's
engine tests and tests/test_vllm_rollout_on_cpu.py share one LoRA smoke (tests/conftest.py's
`lora_smoke`: 2 steps, then a second launch to step 3), ~10 minutes on 2 cores, so they run when
asked (`TBT_CPU_SMOKE=1`, which CI's engine step sets); `TBT_CPU_SMOKE_RUN=DIR` re-checks a
finished run in DIR (DIR/checkpoints, DIR/smoke, DIR/probe.jsonl, DIR/run.log,
DIR/metrics_first.jsonl, DIR/metrics_resume.jsonl) instead.

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_train_on_cpu.py     # the smoke and its checks
    uv run pytest tests/test_train_on_cpu.py               # the dry runs only (no engine)
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from need import need_vllm

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(3600)  # the shared smoke is set up inside the first engine test (two launches)
ENV = {k: v for k, v in os.environ.items()
       if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH",
                            "RAY_ADDRESS", "SMOKE_"))}
SYNCHRONOUS = ("configs/cpu_smoke.yaml", "configs/cpu_smoke_lora.yaml", "configs/cpu_smoke_qwen3_5.yaml")
LORA = "configs/cpu_smoke_lora.yaml"


def smoke(work: Path, *args: str, log: str = "run.log", config: str = "configs/cpu_smoke.yaml") -> int:
    """scripts/run_train.sh of `config` with its model, pool and checkpoints under `work` (and, for
    a synchronous smoke, the engine's probe log-probs after each sync in work/probe.jsonl)."""
    env = {**ENV, "CONFIG": config, "SMOKE_DIR": str(work / "smoke"), "CKPT_DIR": str(work / "checkpoints")}
    if config in SYNCHRONOUS:
        env["TBT_CPU_PROBE_FILE"] = str(work / "probe.jsonl")
    with open(work / log, "w") as f:
        return subprocess.call(["nice", "-n", "10", "./scripts/run_train.sh", *args], cwd=ROOT, env=env, stdout=f,
                               stderr=subprocess.STDOUT, timeout=1500)


def smoke_work(tmp_path_factory, recheck_var: str, what: str) -> tuple[Path, bool]:
    """Where a shared smoke is: the finished run `recheck_var` names (re-checked, not run again),
    else a new directory to run it in (TBT_CPU_SMOKE=1), else the engine tests are skipped."""
    given = os.environ.get(recheck_var)
    if not given and os.environ.get("TBT_CPU_SMOKE") != "1":
        pytest.skip(f"{what} runs only with TBT_CPU_SMOKE=1 (or {recheck_var}=DIR to re-check a finished run)")
    return (Path(given), False) if given else (tmp_path_factory.mktemp("cpu_smoke"), True)


def metrics(path: Path) -> dict[int, dict]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out[int(rec["step"])] = rec["data"]
    return out


def actor_state(step_dir: Path) -> dict:
    """A step's saved actor weights (world size 1), FSDP's prefix off; a LoRA actor's keys are PEFT's."""
    import torch

    sd = torch.load(step_dir / "actor" / "model_world_size_1_rank_0.pt", map_location="cpu", weights_only=False)
    return {k.removeprefix("_fsdp_wrapped_module."): (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in sd.items()}


def saved_actor(model_dir: Path, step_dir: Path):
    """The actor a step saved, as a model on CPU in float32: the base model with the step's weights,
    or, for a LoRA step (lora_train_meta.json), the base model wrapped in PEFT as verl wraps it
    (all linear layers, the step's rank and alpha) with the step's base and adapter weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(model_dir)), torch_dtype=torch.float32)
    meta = step_dir / "actor" / "lora_train_meta.json"
    if meta.exists():
        from peft import LoraConfig, get_peft_model

        m = json.loads(meta.read_text())
        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=m["r"], lora_alpha=m["lora_alpha"],
                                                 target_modules="all-linear", bias="none"))
    missing, unexpected = model.load_state_dict(actor_state(step_dir), strict=False)
    assert not unexpected and all(k.endswith("lm_head.weight") for k in missing), (missing, unexpected)
    model.tie_weights()
    return model.eval()


def probe_logprobs(model) -> list[float]:
    from trainer.verl.cpu.rollout import PROBE_IDS, PROBE_RESPONSE, token_logprobs

    return token_logprobs(model, PROBE_IDS, PROBE_RESPONSE)


def engine_probes(probe_file: Path) -> list[dict]:
    """The engine's log-probs of the fixed probe after each weight sync (TBT_CPU_PROBE_FILE: one line a sync)."""
    return [json.loads(x) for x in probe_file.read_text().splitlines() if x.strip()]


def check_engine_follows_the_actor(probe_file: Path, model_dir: Path, ckpt: Path, steps) -> dict[int, list[float]]:
    """After step N's sync (tagged global_steps N: the weights after step N's update) the engine
    scores the probe as step N's saved actor does, within 1e-4; returns the engine's log-probs by step."""
    by_step = {p["global_steps"]: p["logprobs"] for p in engine_probes(probe_file)}
    for step in steps:
        actor = probe_logprobs(saved_actor(model_dir, ckpt / f"global_step_{step}"))
        assert by_step[step] == pytest.approx(actor, abs=1e-4), (step, by_step[step], actor)
    return by_step


def run_lora_smoke(tmp_path_factory) -> dict:
    """The LoRA smoke's two launches (or the finished run TBT_CPU_SMOKE_RUN names): what its tests read."""
    work, fresh = smoke_work(tmp_path_factory, "TBT_CPU_SMOKE_RUN", "the CPU LoRA training smoke (~7 min on 2 cores)")
    need_vllm()
    if fresh:
        assert smoke(work, config=LORA) == 0, (work / "run.log").read_text()[-6000:]
        (work / "metrics_first.jsonl").write_bytes((work / "checkpoints" / "metrics.jsonl").read_bytes())
        assert smoke(work, "trainer.total_training_steps=3", log="resume.log", config=LORA) == 0, \
            (work / "resume.log").read_text()[-6000:]
        (work / "metrics_resume.jsonl").write_bytes((work / "checkpoints" / "metrics.jsonl").read_bytes())
    return {"work": work, "ckpt": work / "checkpoints", "first": metrics(work / "metrics_first.jsonl"),
            "resume": metrics(work / "metrics_resume.jsonl"), "log": (work / "run.log").read_text()}


def check_agreement_table(by_step: dict[int, dict], steps, *, max_tol: float, mean_tol: float,
                          later_turns: bool = True) -> dict[str, float]:
    """Every step logged the agreement table (trainer/verl/agreement.py, patch 0020): each model token
    in exactly one kind (none unknown) and one turn group, every group within the tolerances, its
    PPO-KL no larger than its mean |Δ log p|; with `later_turns`, some step measured a turn after
    the first (a smoke whose training window holds one turn has none). Returns each group's largest
    max over the steps."""
    from trainer.verl.agreement import KINDS, PREFIX, TURN_GROUPS

    worst: dict[str, float] = {}
    for step in steps:
        m = by_step[step]
        tokens = {g: m.get(f"{PREFIX}/{g}/tokens", 0.0) for g in KINDS + TURN_GROUPS}
        assert tokens["first"] > 0, (step, sorted(k for k in m if k.startswith(PREFIX)))
        assert sum(tokens[g] for g in KINDS) == sum(tokens[g] for g in TURN_GROUPS), (step, tokens)
        for g, n in tokens.items():
            if not n:
                continue
            mean, mx, kl = (m[f"{PREFIX}/{g}/{k}"] for k in ("logp_abs_diff_mean", "logp_abs_diff_max", "ppo_kl"))
            assert mean <= mean_tol and mx <= max_tol and abs(kl) <= mean + 1e-12, (step, g, mean, mx, kl)
            worst[g] = max(worst.get(g, 0.0), mx)
    assert bool(set(worst) - {"first", "turn_0"}) == later_turns, worst
    return worst


@pytest.fixture(scope="module")
def run(lora_smoke) -> dict:
    return lora_smoke


@pytest.mark.engine
def test_two_steps_run_and_log_their_metrics(run):
    first = run["first"]
    assert sorted(first) == [1, 2]
    for step in (1, 2):
        m = first[step]
        for key in ("timing_s/gen", "timing_s/update_actor", "timing_s/update_weights", "actor/pg_loss",
                    "training/episode/score/mean", "training/episode/generated_tokens/mean"):
            assert key in m, (step, key, sorted(m))
        assert m["training/episode/generated_tokens/mean"] > 0  # the model generated them
        assert "actor_rollout_ref.rollout.name=vllm" in run["log"] and "hf_cpu_server" not in run["log"]
        # the rollout's log-probs are the actor's (the adapter merged into the weights the engine plays)
        assert m["actor/rollout_actor/logp_abs_diff_max"] < 1e-4, m["actor/rollout_actor/logp_abs_diff_max"]


@pytest.mark.engine
def test_rollouts_are_played_by_the_model_through_the_agent_loop_and_graded(run):
    records = sorted((run["ckpt"] / "records").glob("step_*.jsonl"))
    assert records, "the agent loop wrote no episode records"
    recs = [json.loads(x) for p in records for x in p.read_text().splitlines() if x.strip()]
    assert len(recs) >= 2 * 2 * 8  # 2 steps x 2 tasks x 8 members
    for r in recs:
        assert r["tokens"]["response_ids"] and any(r["tokens"]["response_mask"])  # generated ids, mask 1
        assert r["end_reason"] and r["verdict"]["explanation"]  # graded by the task's checks
        assert r["policy"]["kind"] == "tokens" and r["policy"]["model"].endswith("model")  # the model verl trains


@pytest.mark.engine
def test_rewards_reach_verl_as_the_verdicts(run):
    recs = [json.loads(x) for x in (run["ckpt"] / "records" / "step_1.jsonl").read_text().splitlines() if x.strip()]
    verdict_mean = sum(r["verdict"]["reward"] for r in recs) / len(recs)
    # verl logs the sampled episodes' reward_extra_info.score (the verdict) as training/episode/score/mean
    assert run["first"][1]["training/episode/score/mean"] == pytest.approx(verdict_mean, abs=1e-6)


@pytest.mark.engine
def test_only_the_adapter_trains_where_advantages_are_not_zero(run):
    """Step 1 moved the adapter (its B matrices start at zero) and left every base weight as the
    model on disk; the optimizer holds state for the adapter's matrices alone."""
    import torch
    from safetensors.torch import load_file

    m = run["first"][1]
    assert abs(m.get("critic/advantages/max", 0.0)) > 0 or abs(m.get("critic/advantages/min", 0.0)) > 0
    base = load_file(str(run["work"] / "smoke" / "model" / "model.safetensors"))
    after = actor_state(run["ckpt"] / "global_step_1")
    lora = {k: v for k, v in after.items() if ".lora_" in k}
    assert lora and any(k.endswith("lora_B.default.weight") and v.abs().max() > 0 for k, v in lora.items())
    frozen = {k.removeprefix("base_model.model.").replace(".base_layer.", "."): v for k, v in after.items()
              if ".lora_" not in k}
    assert set(frozen) <= set(base) | {"lm_head.weight"} and frozen
    for k, v in frozen.items():
        if k in base:
            assert torch.equal(v.float(), base[k].float()), k
    optim = torch.load(run["ckpt"] / "global_step_1" / "actor" / "optim_world_size_1_rank_0.pt", map_location="cpu",
                       weights_only=False)
    state = optim["state"] if "state" in optim else optim.get("optimizer", {}).get("state", {})
    assert state and len(state) == len(lora), (len(state), len(lora))  # Adam moments for the adapter only


@pytest.mark.engine
def test_after_each_sync_the_engine_plays_the_adapter_the_actor_trained(run):
    """vLLM's log-probs of the probe after step N's sync (trainer/verl/cpu/vllm_probe.py) equal step
    N's actor with its adapter (base + adapter as PEFT computes it) within 1e-4, and differ from the base model's by
    far more: the rollout plays the policy being trained, not the base. Before any step (the
    startup sync, the adapter's B still zero) it plays the base; the resumed launch's first sync
    plays the restored step-2 adapter."""
    import torch
    from transformers import AutoModelForCausalLM

    probes = engine_probes(run["work"] / "probe.jsonl")
    assert probes and all(p.get("engine") == "vllm" and "error" not in p for p in probes), probes  # vLLM scored each
    by_step = check_engine_follows_the_actor(run["work"] / "probe.jsonl", run["work"] / "smoke" / "model", run["ckpt"],
                                             (1, 2, 3))
    base = probe_logprobs(AutoModelForCausalLM.from_pretrained(str(run["work"] / "smoke" / "model"),
                                                               torch_dtype=torch.float32).eval())
    assert by_step[0] == pytest.approx(base, abs=1e-4)
    for step in (1, 2, 3):
        assert max(abs(a - b) for a, b in zip(by_step[step], base)) > 1e-2, step  # 100x the tolerance
    resumed = [p for p in probes if p["sync"] == 1][-1]  # the second launch's first sync
    assert resumed["global_steps"] == 2 and resumed["logprobs"] == by_step[2]
    assert by_step[1] != by_step[2] != by_step[3]  # the adapter moved between the syncs


@pytest.mark.engine
def test_checkpoint_verifies_and_a_second_launch_resumes_at_step_3(run):
    r = subprocess.run(["uv", "run", "--frozen", "tbt", "checkpoint", "verify", str(run["ckpt"] / "global_step_2")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "LoRA" in r.stdout, r.stdout  # verify says what kind of checkpoint it read
    # the resumed launch adds step 3 to the metrics file; the steps before it are kept as logged (patch 0004)
    assert sorted(run["resume"]) == [1, 2, 3], sorted(run["resume"])
    assert {s: run["resume"][s] for s in (1, 2)} == run["first"]
    assert (run["ckpt"] / "latest_checkpointed_iteration.txt").read_text().strip() == "3"


@pytest.mark.engine
def test_the_resume_restores_the_adapters_optimizer_state(run):
    """Adam's step count at step 3 continues step 2's (one optimizer step a training step): the
    resumed launch loaded the adapter's optimizer state, not a fresh one."""
    import torch

    def steps(n: int) -> set[int]:
        optim = torch.load(run["ckpt"] / f"global_step_{n}" / "actor" / "optim_world_size_1_rank_0.pt",
                           map_location="cpu", weights_only=False)
        state = optim["state"] if "state" in optim else optim.get("optimizer", {}).get("state", {})
        return {int(v["step"]) for v in state.values()}

    assert steps(2) == {2} and steps(3) == {3}


@pytest.mark.engine
def test_the_resume_restores_the_online_difficulty_state(run):
    """The smoke trains with online difficulty on: every step's state is saved beside the
    checkpoints, and the resumed launch continues step 2's state (its trace starts with steps 1-2
    as saved), never a fresh one; groups.jsonl has each step's end once."""
    d = run["ckpt"] / "thinkingbox_difficulty"
    s2, s3 = (json.loads((d / f"global_step_{n}.json").read_text()) for n in (2, 3))
    assert s2["step"] == 2 and s3["step"] == 3
    n = len(s2["trace"]["steps"])
    assert s2["trace"]["steps"][-2:] == [1, 2] and s3["trace"]["steps"][:n] == s2["trace"]["steps"]
    assert s3["trace"]["steps"][n:] == [3] and s3["trace"]["mean"][:n] == s2["trace"]["mean"]
    assert sum(t["groups"] for t in s3["tasks"].values()) > sum(t["groups"] for t in s2["tasks"].values())
    ends = [json.loads(x).get("end_step") for x in (d / "groups.jsonl").read_text().splitlines() if x.strip()]
    ends = [e for e in ends if e is not None]
    assert sorted(set(ends)) == [1, 2, 3]


@pytest.mark.engine
def test_training_records_read_as_tbt_runs(run):
    """Every episode of step 1 is in records/step_1.jsonl, and `tbt show` reads the file."""
    path = run["ckpt"] / "records" / "step_1.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    assert len(recs) == 2 * 8  # train_batch_size 2 x groups of 8: every episode, none twice
    assert len({(r["uid"], r["repetition"]) for r in recs}) == len(recs)
    r = subprocess.run(["uv", "run", "--frozen", "tbt", "show", str(path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for uid in {x["uid"] for x in recs}:
        assert uid.split(":")[-1] in r.stdout


@pytest.mark.engine
def test_merged_checkpoint_carries_the_adapter_and_plays_an_episode(run, tmp_path):
    """`tbt checkpoint merge --full-precision` of step 2 folds the adapter into a Hugging Face model
    that AutoModelForCausalLM loads and that scores the probe as the actor with its adapter (1e-5);
    `--adapter-only` exports the adapter alone, which PEFT loads onto the base model with the same
    log-probs; and the hf: policy plays a real episode with the merged model through `tbt run`."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    actor = probe_logprobs(saved_actor(run["work"] / "smoke" / "model", run["ckpt"] / "global_step_2"))
    target, adapter = tmp_path / "merged", tmp_path / "adapter"
    for args in (["--target", str(target), "--full-precision"], ["--target", str(adapter), "--adapter-only"]):
        r = subprocess.run(["uv", "run", "--frozen", "tbt", "checkpoint", "merge", str(run["ckpt"]), "--step", "2", *args],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    merged = AutoModelForCausalLM.from_pretrained(str(target), torch_dtype=torch.float32).eval()
    assert probe_logprobs(merged) == pytest.approx(actor, abs=1e-5)
    base = AutoModelForCausalLM.from_pretrained(str(run["work"] / "smoke" / "model"), torch_dtype=torch.float32)
    assert probe_logprobs(PeftModel.from_pretrained(base, str(adapter)).eval()) == pytest.approx(actor, abs=1e-5)
    out, only = tmp_path / "r.jsonl", tmp_path / "one.yaml"
    only.write_text("- toy_loans.py:test_fine_correction\n")
    r = subprocess.run(["uv", "run", "--frozen", "tbt", "run", "data/samples", "--policy", f"hf:{target},max_tokens=16",
                        "--test-list", str(only), "--max-episode-tokens", "48", "--output", str(out), "--no-progress"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["policy"]["kind"] == "hf" and rec["tokens"]["response_ids"] and rec["verdict"]["explanation"]


def dry_run(config: str) -> tuple[str, list[str]]:
    """`DRY_RUN=true` scripts/run_train.sh of `config`: its output, and its lines with the command's
    continuation marks cut (one override a line)."""
    r = subprocess.run(["./scripts/run_train.sh"], cwd=ROOT, capture_output=True, text=True, timeout=180,
                       env={**ENV, "DRY_RUN": "true", "CONFIG": config})
    assert r.returncode == 0, r.stderr
    return r.stdout, [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]


def test_cpu_smoke_dry_run_renders_the_cpu_path():
    out, lines = dry_run("configs/cpu_smoke.yaml")
    for o in ("actor_rollout_ref.rollout.name=hf_cpu", "trainer.device=cpu", "actor_rollout_ref.rollout.n=8",
              "algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.loss_agg_mode=token-mean",
              "algorithm.filter_groups.enable=true", "+thinkingbox.retries=2", "trainer.total_training_steps=2",
              "trainer.save_freq=1", "VERL_PLATFORM=cpu", "VERL_USE_EXTERNAL_MODULES=trainer.verl.cpu",
              "python -m trainer.verl.cpu.smoke /tmp/tbt-cpu-smoke /tmp/tbt-cpu-smoke/checkpoints"):
        assert o in lines, o
    assert "DRY_RUN" in out


def test_vllm_cpu_smoke_dry_run_renders_verls_vllm_rollout_on_the_cpu_path():
    _, lines = dry_run("configs/cpu_smoke_vllm.yaml")
    for o in ("actor_rollout_ref.rollout.name=vllm", "trainer.device=cpu", "VERL_PLATFORM=cpu",
              "actor_rollout_ref.rollout.enforce_eager=true", "+actor_rollout_ref.rollout.enable_sleep_mode=false",
              "actor_rollout_ref.rollout.logprobs_mode=raw_logprobs", "actor_rollout_ref.rollout.free_cache_engine=false",
              "VLLM_CPU_KVCACHE_SPACE=1", "actor_rollout_ref.rollout.checkpoint_engine.backend=naive"):
        assert o in lines, o
    assert any(x.startswith("ok") and "rollout log-probs are the actor's" in x for x in lines)


def test_gpu_smoke_dry_run_prints_the_vllm_launch_and_starts_nothing():
    before = {p.name for p in Path("/tmp/ray").glob("session_2*")} if Path("/tmp/ray").exists() else set()
    r = subprocess.run(["./scripts/gpu_smoke.sh"], cwd=ROOT, capture_output=True, text=True, timeout=180,
                       env={**ENV, "DRY_RUN": "true", "SMOKE_DIR": "/tmp/tbt-gpu-smoke-dry"})
    assert r.returncode == 0, r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    assert "python -m verl.trainer.main_ppo" in lines
    for o in ("actor_rollout_ref.rollout.name=vllm", "trainer.device=cuda", "VERL_PLATFORM=nvidia",
              "actor_rollout_ref.rollout.n=8", "trainer.total_training_steps=2",
              "actor_rollout_ref.model.path=/tmp/tbt-gpu-smoke-dry/model",
              "python -m trainer.verl.cpu.smoke /tmp/tbt-gpu-smoke-dry /tmp/tbt-gpu-smoke-dry/checkpoints"):
        assert o in lines, o
    assert "actor_rollout_ref.rollout.name=hf_cpu" not in lines
    assert not Path("/tmp/tbt-gpu-smoke-dry").exists()  # nothing built
    after = {p.name for p in Path("/tmp/ray").glob("session_2*")} if Path("/tmp/ray").exists() else set()
    assert after == before
