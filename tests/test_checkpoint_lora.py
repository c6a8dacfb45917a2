"""`tbt checkpoint verify|merge` on LoRA checkpoints: what verl 0.9.0 writes when the actor is a PEFT
model (`actor_rollout_ref.model.lora_rank` > 0).

The committed fixture tests/fixtures/checkpoints/tiny_lora is written by tests/ckpt_writer.py
--lora 8 --lora-alpha 16: the tiny Qwen3-architecture model wrapped by PEFT as verl wraps it
(`LoraConfig(task_type=CAUSAL_LM, r=8, lora_alpha=16, target_modules="all-linear", bias="none")`),
sharded with FSDP2 on 2 gloo ranks, a training step before each save (so lora_B is not zero) and
saved by verl's own `FSDPCheckpointManager` (which writes lora_train_meta.json);
tiny_lora_reference/global_step_2.pt is step 2's full PEFT state as trained, what every merged or
exported model is compared against: the PEFT model built from it (base + adapter) is what the
actor computed. verl's merger alone gives a model with the base weights only; the log-probs below
tell that model from the trained one by far more than bfloat16's rounding.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from need import need_vllm

from trainer import checkpoint_cli
from test_checkpoint import clone, tbt
from trainer.verl import checkpoint as ck
from trainer.verl import lora_merge as lm

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "checkpoints"
LORA = FIXTURES / "tiny_lora"
FULL = FIXTURES / "tiny"
REFERENCE = FIXTURES / "tiny_lora_reference" / "global_step_2.pt"
WRITER = ROOT / "tests" / "ckpt_writer.py"
HF = LORA / "global_step_2" / "actor" / "huggingface"
IDS = [[1, 5, 20, 30, 40, 2, 1, 6, 9, 12, 33, 47]]  # a few of the 61 token ids
BF16_TOL = 2e-2  # verl's merger stores bfloat16 weights: ~2.4e-3 here
FP32_TOL = 1e-5  # float32 throughout: the order of float operations (~5e-7 here)


def replace(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)
    path.write_bytes(data)


def make_lora_only(root: Path, step: int) -> None:
    """Step `step`'s model shards as a LoRA-only save writes them (`checkpoint.save_lora_only`:
    verl keeps the keys with `lora_` or `.adapter_`)."""
    import torch

    actor = root / f"global_step_{step}" / "actor"
    for path in sorted(actor.glob("model_world_size_*_rank_*.pt")):
        sd = torch.load(path, map_location="cpu", weights_only=False)
        sd = {k: v for k, v in sd.items() if ck.is_adapter_key(k)}
        path.unlink()
        torch.save(sd, path)


# ---------------------------------------------------------------------------- the models compared

def log_probs(model):
    import torch

    with torch.no_grad():
        return torch.log_softmax(model.eval()(input_ids=torch.tensor(IDS)).logits.float(), -1)


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    """Step 2 merged by verl's merger (~10-25 s: verl's imports), then folded: once for the module.
    Meanwhile this process imports what the comparisons need (transformers' model classes, peft)."""
    target = tmp_path_factory.mktemp("merged") / "step2"
    warm = threading.Thread(target=lambda: [importlib.import_module(m) for m in
                                            ("transformers.models.qwen3.modeling_qwen3", "peft")])
    warm.start()
    code, out = tbt("checkpoint", "merge", LORA, "--step", "2", "--target", target)
    warm.join()
    assert code == 0, out
    return target, out


@pytest.fixture(scope="module")
def reference(merged):
    """(log-probs of the PEFT model as trained, of the base alone, a maker of the fp32 base model);
    after `merged`, whose merger runs while the imports here are made."""
    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(HF, local_files_only=True)
    state = torch.load(REFERENCE, weights_only=True)
    peft_model = get_peft_model(AutoModelForCausalLM.from_config(config, dtype=torch.float32),
                                LoraConfig(task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=16,
                                           target_modules="all-linear", bias="none"))
    peft_model.load_state_dict(state, strict=True)
    base_state, _ = lm.split_peft_state(state)

    def base_model():
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(base_state, strict=True)
        return model

    return log_probs(peft_model), log_probs(base_model()), base_model


def max_diff(a, b) -> float:
    return (a - b).abs().max().item()


def test_the_base_alone_is_far_from_the_trained_model(reference):
    """What verl's merger alone gives (the base weights, here even in float32) is not the trained
    model: its log-probs are off by far more than either tolerance below."""
    trained, base, _ = reference
    assert max_diff(trained, base) > 10 * BF16_TOL


# ---------------------------------------------------------------------------- verify

def test_verify_reports_a_lora_checkpoint():
    code, out = tbt("checkpoint", "verify", LORA)
    assert code == 0, out
    assert "actor: world size 2, model 2/2, optim 2/2, extra_state 2/2" in out
    assert out.count("LoRA adapter r 8, alpha 16") == 2 and "LoRA-only" not in out, out
    assert ("with actor_rollout_ref.model.lora_rank=8 actor_rollout_ref.model.lora_alpha=16 and the same "
            "actor_rollout_ref.model.path") in out
    doc = json.loads(tbt("checkpoint", "verify", LORA, "--step", "2", "--json")[1])
    want = {"r": 8, "lora_alpha": 16, "task_type": "CAUSAL_LM", "lora_only": False}
    assert doc["ok"] and doc["steps"][0]["lora"] == want and doc["steps"][0]["roles"][0]["lora"] == want
    full = json.loads(tbt("checkpoint", "verify", FULL, "--json")[1])
    assert all(s["lora"] is None for s in full["steps"])
    assert "LoRA" not in tbt("checkpoint", "verify", FULL)[1]


def test_shard_keys_are_read_without_torch():
    keys = ck.model_shard_keys(LORA / "global_step_2" / "actor" / "model_world_size_2_rank_1.pt")
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight" in keys
    assert "base_model.model.model.embed_tokens.weight" in keys and len(keys) == 53
    assert ck.model_shard_keys(LORA / "global_step_2" / "actor" / "fsdp_config.json") is None


META = "global_step_1/actor/lora_train_meta.json"
LORA_BROKEN = [  # (what, the file's new bytes or None to remove it, the message naming it)
    ("missing", None, f"{META}: missing, but the model shards hold a LoRA adapter (lora_A/lora_B): verl's merger "
                      "would write lora_alpha 0"),
    ("unreadable", b"{r: 8", f"{META}: unreadable:"),
    ("not an object", b"[8, 16]", f"{META}: unreadable: not a JSON object"),
    ("without r", b'{"lora_alpha": 16}', f"{META}: r is None, not a positive integer"),
    ("r zero", b'{"r": 0, "lora_alpha": 16}', f"{META}: r is 0, not a positive integer"),
    ("without alpha", b'{"r": 8}', f"{META}: lora_alpha is None, not a positive number"),
]


@pytest.mark.parametrize("what,data,message", LORA_BROKEN, ids=[b[0] for b in LORA_BROKEN])
def test_a_lora_step_without_a_usable_meta_is_a_problem(tmp_path, what, data, message):
    root = clone(LORA, tmp_path / "ckpt")
    meta = root / META
    if data is None:
        meta.unlink()
    else:
        replace(meta, data)
    code, out = tbt("checkpoint", "verify", root)
    assert code == 1 and message in out, out
    doc = json.loads(tbt("checkpoint", "verify", root, "--json")[1])
    assert [s["ok"] for s in doc["steps"]] == [False, True]
    assert doc["steps"][0]["lora"]["lora_only"] is False
    code, out = tbt("checkpoint", "merge", root, "--step", "1", "--target", tmp_path / "m", "--adapter-only")
    assert code == 1 and "global_step_1 cannot be merged" in out and message in out, out
    assert not (tmp_path / "m").exists()


def test_a_meta_without_an_adapter_in_the_shards_is_a_problem(tmp_path):
    root = clone(FULL, tmp_path / "ckpt")
    (root / "global_step_2" / "actor" / "lora_train_meta.json").write_text('{"r": 8, "lora_alpha": 16}')
    code, out = tbt("checkpoint", "verify", root)
    assert code == 1 and "lora_train_meta.json: says r 8, but model_world_size_2_rank_0.pt holds no adapter" in out, out


def test_a_lora_only_save_verifies_says_so_and_exports_only(tmp_path, reference):
    root = clone(LORA, tmp_path / "ckpt")
    make_lora_only(root, 2)
    code, out = tbt("checkpoint", "verify", root, "--step", "2")
    assert code == 0, out
    assert "LoRA adapter r 8, alpha 16, LoRA-only save" in out
    assert ("a LoRA-only save (the model shards hold only the adapter): a resume loads it onto "
            "actor_rollout_ref.model.path, which must be the same base model") in " ".join(out.split())
    assert json.loads(tbt("checkpoint", "verify", root, "--step", "2", "--json")[1])["steps"][0]["lora"]["lora_only"]
    code, out = tbt("checkpoint", "merge", root, "--step", "2", "--target", tmp_path / "m")
    assert code == 2 and "global_step_2 is a LoRA-only save" in out and "--adapter-only" in out, out
    assert not (tmp_path / "m").exists()
    code, out = tbt("checkpoint", "merge", root, "--step", "2", "--target", tmp_path / "a", "--adapter-only")
    assert code == 0, out
    _, _, base_model = reference
    assert max_diff(peft_log_probs(base_model(), tmp_path / "a"), reference[0]) < FP32_TOL


def test_verify_of_a_lora_checkpoint_imports_no_gpu_stack():
    code = ("import sys; from trainer.verl import checkpoint as ck; import trainer.checkpoint_cli; "
            f"r = ck.verify(ck.Path({str(LORA)!r})); assert r.ok and r.steps[0].lora['r'] == 8, r; "
            "bad = [m for m in ('torch', 'transformers', 'verl', 'ray', 'peft') if m in sys.modules]; assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------- merge: folded

def test_merge_folds_the_adapter_into_the_model(merged, reference):
    from transformers import AutoModelForCausalLM

    target, out = merged
    trained, base, _ = reference
    assert "-m verl.model_merger merge --backend fsdp" in out
    assert ("folded global_step_2's LoRA adapter into" in out and "r 8, alpha 16, scale 2, bfloat16" in out
            and "14 modules (down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj)" in out), out
    assert "loads as Qwen3ForCausalLM" in out and "bfloat16" in out, out
    assert not (target / lm.ADAPTER_DIR).exists()  # the adapter is not left inside the model
    assert not target.with_name("step2-adapter").exists()  # nothing written outside --target
    assert "--target ADAPTER_DIR --adapter-only" in " ".join(out.split())  # how to get the adapter alone
    model = AutoModelForCausalLM.from_pretrained(target, local_files_only=True)
    assert str(model.dtype) == "torch.bfloat16"
    got = log_probs(model)
    assert max_diff(got, trained) < BF16_TOL, max_diff(got, trained)
    assert max_diff(got, base) > 10 * BF16_TOL  # not the base alone, what verl's merger wrote


def test_merge_full_precision_folds_in_float32_exactly(tmp_path, reference):
    """From the shards (the fixture has no saved hf_model; verl's would be the PEFT state under PEFT
    names), no merger: the trained model within float32's order of operations."""
    from transformers import AutoModelForCausalLM

    trained, base, _ = reference
    target = tmp_path / "fp32"
    code, out = tbt("checkpoint", "merge", LORA, "--step", "2", "--target", target, "--full-precision")
    assert code == 0, out
    assert "verl.model_merger" not in out and "float32 from its shards" in out and "14 modules (" in out, out
    assert "loads as Qwen3ForCausalLM" in out and "float32)" in out, out
    assert json.loads((target / "config.json").read_text())["dtype"] == "float32"
    assert ck.has_chat_template(target) and [p.name for p in tmp_path.iterdir()] == ["fp32"]
    assert not (target / lm.ADAPTER_DIR).exists()
    model = AutoModelForCausalLM.from_pretrained(target, local_files_only=True)
    assert str(model.dtype) == "torch.float32"
    got = log_probs(model)
    assert max_diff(got, trained) < FP32_TOL, max_diff(got, trained)
    assert max_diff(got, base) > 10 * BF16_TOL


# ---------------------------------------------------------------------------- --adapter-only

def peft_log_probs(base, folder: Path):
    from peft import PeftModel

    return log_probs(PeftModel.from_pretrained(base, str(folder)))


def test_adapter_only_writes_the_adapter_peft_loads(tmp_path, reference):
    from safetensors.torch import load_file

    trained, _, base_model = reference
    target = tmp_path / "adapter"
    code, out = tbt("checkpoint", "merge", LORA, "--step", "2", "--target", target, "--adapter-only")
    assert code == 0, out
    assert "exported global_step_2's LoRA adapter" in out and f"--lora-modules NAME={target}" in " ".join(out.split())
    assert {p.name for p in target.iterdir()} == {"adapter_config.json", "adapter_model.safetensors"}
    config = json.loads((target / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["lora_alpha"] == 16 and config["peft_type"] == "LORA"
    assert config["target_modules"] == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    assert config["task_type"] == "CAUSAL_LM" and not config["use_dora"] and config["modules_to_save"] is None
    tensors = load_file(target / "adapter_model.safetensors")
    assert len(tensors) == 28 and "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in tensors
    assert all(k.startswith("base_model.model.") and k.endswith((".lora_A.weight", ".lora_B.weight")) for k in tensors)
    got = peft_log_probs(base_model(), target)
    assert max_diff(got, trained) < FP32_TOL, max_diff(got, trained)


def test_adapter_only_of_a_full_checkpoint_exits_2(tmp_path):
    code, out = tbt("checkpoint", "merge", FULL, "--step", "2", "--target", tmp_path / "a", "--adapter-only")
    assert code == 2, out
    assert "global_step_2 has no LoRA adapter" in out and "merge it without --adapter-only" in " ".join(out.split())
    assert not (tmp_path / "a").exists()
    code, out = tbt("checkpoint", "merge", LORA, "--step", "2", "--target", tmp_path / "b", "--adapter-only",
                    "--full-precision")
    assert code == 2 and "--full-precision is for a merged model" in out, out


# ---------------------------------------------------------------------------- the fold itself

def small_adapter(config: dict | None = None, extra: dict | None = None):
    import torch

    torch.manual_seed(0)
    tensors = {"base_model.model.m.lin.lora_A.weight": torch.randn(2, 3),
               "base_model.model.m.lin.lora_B.weight": torch.randn(4, 2), **(extra or {})}
    return lm.parse_adapter({"r": 2, "lora_alpha": 4, **(config or {})}, tensors, "ADAPTER")


def test_fold_is_w_plus_scale_b_a_and_honours_rslora():
    import torch

    w = torch.randn(4, 3)
    for cfg, scale in (({}, 2.0), ({"use_rslora": True}, 4 / 2 ** 0.5)):
        adapter = small_adapter(cfg)
        a, b = adapter.modules["m.lin"]
        state = {"m.lin.weight": w.clone(), "other.weight": torch.ones(1)}
        assert lm.fold_into_state(state, adapter) == ["m.lin"] and adapter.scale == pytest.approx(scale)
        assert torch.allclose(state["m.lin.weight"], w + scale * b @ a) and state["other.weight"].equal(torch.ones(1))
    state = {"m.lin.weight": w.bfloat16()}
    lm.fold_into_state(state, small_adapter())
    assert state["m.lin.weight"].dtype == torch.bfloat16  # stored in W's dtype, computed in float32


@pytest.mark.parametrize("config,extra,message", [
    ({"use_dora": True}, None, "use_dora True (DoRA"),
    ({"peft_type": "IA3"}, None, "peft_type IA3, not LORA"),
    ({"rank_pattern": {"lin": 4}}, None, "rank_pattern"),
    ({"bias": "all"}, None, "bias 'all'"),
    ({"lora_alpha": 0}, None, "lora_alpha 0 is not a positive number"),
    ({"r": 3}, None, "are not (r, in), (out, r) for r 3"),
    ({}, {"base_model.model.m.lin.lora_magnitude_vector.weight": None}, "DoRA's magnitude vector"),
    ({}, {"base_model.model.emb.lora_embedding_A": None}, "embedding LoRA"),
])
def test_what_does_not_fold_is_refused_by_name(config, extra, message):
    with pytest.raises(lm.AdapterError) as e:
        small_adapter(config, extra)
    assert message in str(e.value) and "ADAPTER" in str(e.value), str(e.value)


def test_fold_needs_every_adapted_weight():
    import torch

    with pytest.raises(lm.AdapterError, match="adapts m.lin, but the model has no m.lin.weight"):
        lm.fold_into_state({"x.weight": torch.zeros(4, 3)}, small_adapter())
    with pytest.raises(lm.AdapterError, match=r"lora_B @ lora_A is \(4, 3\), m.lin.weight is \(3, 3\)"):
        lm.fold_into_state({"m.lin.weight": torch.zeros(3, 3)}, small_adapter())


def test_fold_into_an_index_and_shards_equals_one_file(merged, tmp_path):
    """A big model's merged weights come as an index and shards: each shard holding an adapted
    weight is rewritten, the rest left alone; the result equals the single file's fold."""
    from safetensors.torch import load_file, save_file

    target, _ = merged
    adapter, _ = lm.adapter_from_step(LORA / "global_step_2" / "actor", 2)
    # the same adapter folded into the same (already folded) bf16 tensors, both ways
    tensors = load_file(target / "model.safetensors")
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    one.mkdir()
    sharded.mkdir()
    save_file(tensors, one / "model.safetensors", metadata={"format": "pt"})
    keys = sorted(tensors)
    parts = {"model-00001-of-00003.safetensors": [k for k in keys if ".layers.0." in k],
             "model-00002-of-00003.safetensors": [k for k in keys if ".layers.1." in k],
             "model-00003-of-00003.safetensors": [k for k in keys if ".layers." not in k]}
    for name, ks in parts.items():
        save_file({k: tensors[k] for k in ks}, sharded / name, metadata={"format": "pt"})
    (sharded / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: name for name, ks in parts.items() for k in ks}}))
    untouched = (sharded / "model-00003-of-00003.safetensors").stat().st_mtime_ns
    assert sorted(lm.fold_adapter_into(one, adapter)) == sorted(lm.fold_adapter_into(sharded, adapter))
    assert (sharded / "model-00003-of-00003.safetensors").stat().st_mtime_ns == untouched
    want = load_file(one / "model.safetensors")
    got = {k: v for name in parts for k, v in load_file(sharded / name).items()}
    assert want.keys() == got.keys() and all(want[k].equal(got[k]) for k in want)
    assert not all(want[k].equal(tensors[k]) for k in want)


def test_a_failed_fold_removes_the_base_only_weights(merged, tmp_path):
    """verl's merger has written the base weights and an adapter that cannot be folded: the command
    fails and leaves no model that looks merged."""
    import typer

    target, _ = merged
    bad = tmp_path / "bad"
    shutil.copytree(target, bad)
    lm.write_adapter(lm.adapter_from_step(LORA / "global_step_2" / "actor", 2)[0], bad / lm.ADAPTER_DIR)
    cfg = json.loads((bad / lm.ADAPTER_DIR / "adapter_config.json").read_text())
    (bad / lm.ADAPTER_DIR / "adapter_config.json").write_text(json.dumps({**cfg, "use_dora": True}))
    with pytest.raises(typer.Exit) as e:
        checkpoint_cli._fold_merged(2, bad, "hint")
    assert e.value.exit_code == 1
    assert not (bad / "model.safetensors").exists() and (bad / "config.json").exists()
    # no adapter where verl's merger should have written one
    shutil.rmtree(bad)
    shutil.copytree(target, bad)
    with pytest.raises(typer.Exit):
        checkpoint_cli._fold_merged(2, bad, "hint")
    assert not (bad / "model.safetensors").exists()


# ---------------------------------------------------------------------------- engine: verl's own LoRA-only save, vLLM

@pytest.mark.engine
def test_verls_lora_only_save_verifies_and_exports(tmp_path, reference):
    """tests/ckpt_writer.py --lora-only: verl's manager with `save_lora_only` (its own filter)."""
    out = tmp_path / "ckpt"
    r = subprocess.run([sys.executable, str(WRITER), "--out", str(out), "--world-size", "2", "--steps", "1", "2",
                        "--tokenizer", "tiny", "--lora", "8", "--lora-alpha", "16", "--lora-only"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    code, text = tbt("checkpoint", "verify", out)
    assert code == 0 and text.count("LoRA adapter r 8, alpha 16, LoRA-only save") == 2, text
    code, text = tbt("checkpoint", "merge", out, "--step", "2", "--target", tmp_path / "a", "--adapter-only")
    assert code == 0, text
    trained, _, base_model = reference  # the writer is deterministic: the fixture's run
    assert max_diff(peft_log_probs(base_model(), tmp_path / "a"), trained) < FP32_TOL


@pytest.mark.engine
def test_vllm_reads_the_exported_adapter(tmp_path):
    """vLLM's own LoRA loader (what `vllm serve BASE --enable-lora --lora-modules NAME=DIR` runs):
    the config passes its checks, every module's A and B load with PEFT's scale. (Serving the tiny
    model itself is out: vLLM's CPU attention has no head size 8.)"""
    need_vllm()
    code = f"""
import json
from vllm.config.lora import LoRAConfig
from vllm.lora.lora_model import LoRAModel
from vllm.lora.peft_helper import PEFTHelper
d = {str(tmp_path / 'a')!r}
h = PEFTHelper.from_local_dir(d, max_position_embeddings=4096)
h.validate_legal(LoRAConfig(max_lora_rank=8))
m = LoRAModel.from_local_checkpoint(d, set(h.target_modules), h, device="cpu", lora_model_id=1)
print(json.dumps({{"r": h.r, "scale": h.vllm_lora_scaling_factor, "modules": sorted(m.loras),
                  "shapes": sorted({{tuple(l.lora_a.shape) for l in m.loras.values()}})}}))
"""
    code_, out = tbt("checkpoint", "merge", LORA, "--step", "2", "--target", tmp_path / "a", "--adapter-only")
    assert code_ == 0, out
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["r"] == 8 and doc["scale"] == 2.0 and len(doc["modules"]) == 14
    assert "model.layers.1.self_attn.q_proj" in doc["modules"]
