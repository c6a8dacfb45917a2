"""Each patch of trainer/verl/patches applies to the installed verl 0.9.0 and changes what it says:
the test runs the same scenario on the unpatched module (must show the old behaviour) and on a
patched copy (must show the new one), so it fails where the patch is missing or stale."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from need import need_vllm
from omegaconf import OmegaConf

PATCHES = Path(__file__).resolve().parents[1] / "trainer" / "verl" / "patches"
# the directory holding the `verl` package, found without importing it (seconds: torch and more)
VERL_ROOT = Path(importlib.util.find_spec("verl").origin).resolve().parent.parent


def _series_index(patch: Path) -> int:
    """Where `patch` stands in its target's series (0: it applies to verl's own file)."""
    from trainer.verl.patching import patches, series

    p = next(q for q in patches() if q.path.name == patch.name)
    return series(p).index(p)


def series_file(root: Path, patch: Path, rel: str, with_patch: bool = True) -> Path:
    """`root`/`rel`: `rel` (e.g. verl/trainer/ppo/v1/replay_buffer.py) as verl 0.9.0 ships it, with
    the patches of its series before `patch`, and `patch` (`patch -p1`) unless with_patch is False."""
    from trainer.verl.patching import checkout

    dst = root / rel
    dst.parent.mkdir(parents=True)
    shutil.copy(VERL_ROOT / rel, dst)
    checkout(root, rel, _series_index(patch))  # the installed verl may be patched: start from the patch's base
    if with_patch:
        r = subprocess.run(["patch", "-p1", "--forward", "-i", str(patch)], cwd=root, capture_output=True, text=True)
        assert r.returncode == 0, f"{patch.name} does not apply to the installed verl {importlib.import_module('verl').__version__}:\n{r.stdout}{r.stderr}"
    return dst


def patched_module(tmp_path: Path, patch: Path, rel: str, name: str):
    """`rel` with the patches of its series up to `patch` (series_file), imported as `name`."""
    dst = series_file(tmp_path, patch, rel)
    if "." in name:  # a module inside verl's package (its relative imports resolve there)
        importlib.import_module(name.rpartition(".")[0])
    spec = importlib.util.spec_from_file_location(name, dst, submodule_search_locations=None)  # a package's __init__ too
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_patch_names_what_why_and_its_target():
    patches = sorted(PATCHES.glob("*.patch"))
    assert patches
    for p in patches:
        head = p.read_text().split("\n--- ")[0]
        assert re.search(r"What( \(\d\))?:", head) and re.search(r"Why( \(\d\))?:", head) and "Against: verl 0.9.0" in head, p.name


def _failed_group_buffer(module):
    """A sync replay buffer holding one failed group of 8 whose 7 members finished (one raised)."""
    buf = module.ReplayBuffer(trainer_mode="sync", trainer_config=OmegaConf.create({}), max_off_policy_threshold=1,
                              max_off_policy_strategy="drop", sampler_kwargs=OmegaConf.create({}),
                              refill_fn=lambda n: None, gen_batch_size=1, sync_refill_failed_groups=True)
    buf.failure_keys["train"] = {"g1"}
    buf.finished_keys["train"] = {"g2"}
    buf.partitions["train"] = {f"g1_{i}": {"status": "finished"} for i in range(7)}
    buf.partitions["train"].update({f"g2_{i}": {"status": "finished"} for i in range(8)})
    return buf


def stock_module(tmp_path: Path, patch: Path, rel: str, name: str):
    """`rel` without `patch`: verl 0.9.0's own file, or, for a later patch of a series (e.g. 0008
    after 0005), that file with the patches before it (the file the patch applies to)."""
    dst = series_file(tmp_path / "stock", patch, rel, with_patch=False)
    if "." in name:  # a module inside verl's package (its relative imports resolve there)
        importlib.import_module(name.rpartition(".")[0])
    spec = importlib.util.spec_from_file_location(name, dst, submodule_search_locations=None)  # a package's __init__ too
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_0001_a_failed_group_is_dropped_whole(tmp_path):
    patch = PATCHES / "0001-replay-buffer.patch"
    stock = stock_module(tmp_path, patch, "verl/trainer/ppo/v1/replay_buffer.py", "_tb_stock_replay_buffer")
    before = _failed_group_buffer(stock)
    _, _, failed, _ = before._terminal_eviction_reasons(1, "train")
    assert failed == set(), "unpatched verl 0.9.0 keeps a failed group that has survivors (trains 7 of 8)"
    assert before._sampleable_terminal_keys("train", before._terminal_eviction_reasons(1, "train")) == {"g1", "g2"}

    mod = patched_module(tmp_path / "patched", patch, "verl/trainer/ppo/v1/replay_buffer.py", "_tb_patched_replay_buffer")
    after = _failed_group_buffer(mod)
    reasons = after._terminal_eviction_reasons(1, "train")
    assert reasons[2] == {"g1"}
    assert after._sampleable_terminal_keys("train", reasons) == {"g2"}  # the whole failed group is out


@pytest.mark.parametrize("patch", sorted(PATCHES.glob("*.patch")), ids=lambda p: p.name)
def test_patch_is_not_applied_twice(tmp_path, patch, monkeypatch):
    rel = next(line[6:].strip() for line in patch.read_text().splitlines() if line.startswith("+++ b/"))
    if rel.startswith("verl/workers/engine/"):  # the copy registers its engines again
        from verl.workers.engine.base import EngineRegistry

        monkeypatch.setattr(EngineRegistry, "_engines", {})
    if "/vllm" in rel:  # importing verl's vLLM modules needs vLLM
        need_vllm()
    package = rel.removesuffix(".py").rpartition("/")[0].replace("/", ".")  # the target's own package
    patched_module(tmp_path, patch, rel, f"{package}._tb_twice_{patch.stem.replace('-', '_')}")
    again = subprocess.run(["patch", "-p1", "--forward", "--dry-run", "-i", str(patch)], cwd=tmp_path,
                           capture_output=True, text=True)
    assert again.returncode != 0 and "previously applied" in again.stdout.lower() + again.stderr.lower()


class _TQ:
    """TransferQueue's client functions the replay buffer calls, over a dict (its boundary only)."""

    def __init__(self, extra: dict[str, dict]):
        self.extra = extra

    def kv_batch_get(self, keys, partition_id, select_fields):
        assert select_fields == ["extra_fields"]
        return {"extra_fields": [self.extra[k] for k in keys]}


def test_0001_each_step_logs_the_episode_metrics(tmp_path, monkeypatch):
    patch = PATCHES / "0001-replay-buffer.patch"
    stock = stock_module(tmp_path, patch, "verl/trainer/ppo/v1/replay_buffer.py", "_tb_stock_rb_metrics")
    assert not hasattr(stock.ReplayBuffer, "_episode_metrics")  # unpatched: training logs none of them
    mod = patched_module(tmp_path / "patched", patch, "verl/trainer/ppo/v1/replay_buffer.py", "_tb_patched_rb_metrics")
    infos = [{"score": 1.0, "passed": 1.0, "end_reason": "done", "system_error_reruns": 0},
             {"score": 0.0, "passed": 0.0, "end_reason": "agent_limit", "system_error_reruns": 2},
             {"score": 1.0, "passed": 1.0, "end_reason": "done", "system_error_reruns": 0},
             {"score": 0.0, "passed": 0.0, "end_reason": "done", "system_error_reruns": 1}]
    keys = [f"g1_{i}" for i in range(4)]
    monkeypatch.setattr(mod, "tq", _TQ({k: {"reward_extra_info": i} for k, i in zip(keys, infos)}))
    buf = _failed_group_buffer(mod)
    m = buf._episode_metrics("train", keys)
    assert m == {"training/episode/score/mean": 0.5, "training/episode/passed/mean": 0.5,
                 "training/episode/end_reason/done": 0.75, "training/episode/end_reason/agent_limit": 0.25,
                 "training/episode/system_error_reruns/mean": 0.75}
    assert buf._episode_metrics("train", []) == {}


_INIT_GROUP = """
import importlib.util, json, sys
import torch.distributed as dist
from trainer.verl.cpu.platform import PlatformCPU
spec = importlib.util.spec_from_file_location("_tb_distributed", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
mod.get_device_name = lambda: PlatformCPU().device_name
mod.get_nccl_backend = lambda: PlatformCPU().communication_backend_name()
try:
    mod.initialize_global_process_group_ray(timeout_second=30)
    print("RESULT", json.dumps(str(dist.get_backend())))
except ValueError as e:
    print("RESULT", json.dumps(f"error: {e}"))
"""


def _init_default_group(module_file: Path, tmp_path: Path) -> str:
    """`initialize_global_process_group_ray` of the module at `module_file` on the CPU platform,
    one rank, in a fresh process (no process group or environment left by other tests): the
    backend the group got, or the error torch raised."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "LOCAL_", "TORCHELASTIC", "GROUP_"))}
    env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", DIST_INIT_METHOD=f"file://{tmp_path / 'pg'}",
               PYTHONPATH=str(PATCHES.parents[2]))
    out = subprocess.run([sys.executable, "-c", _INIT_GROUP, str(module_file)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])


@pytest.mark.engine  # a real gloo process group, in two fresh processes that import torch (~40 s)
def test_0002_the_cpu_platform_gets_one_gloo_backend(tmp_path):
    patch = PATCHES / "0002-cpu-process-group.patch"
    stock = stock_module(tmp_path, patch, "verl/utils/distributed.py", "_tb_stock_distributed")
    got = _init_default_group(Path(stock.__file__), tmp_path / "a")
    assert got.startswith("error:") and "Duplicate device type cpu" in got, got

    mod = patched_module(tmp_path / "patched", patch, "verl/utils/distributed.py", "_tb_patched_distributed")
    assert _init_default_group(Path(mod.__file__), tmp_path / "b") in ("gloo", "cpu:gloo")  # one backend, no error


ROLLOUTER = "verl/experimental/fully_async_policy/fully_async_rollouter.py"


class _Queue:
    """The rollouter's message-queue client (its boundary only): what is put, and its statistics."""

    def __init__(self):
        self.samples = []

    async def get_statistics(self):
        return {"queue_size": len(self.samples)}

    async def get_queue_size(self):
        return len(self.samples)

    async def put_sample(self, sample):
        self.samples.append(sample)
        return True


class _Manager:
    """The agent-loop manager: the group whose sample id is in `fail` raises as verl's agent-loop
    worker does through Ray (a RayTaskError standing for the loop's exception)."""

    def __init__(self, fail: dict[str, BaseException]):
        self.fail, self.seen = fail, []

    async def generate_sequences_single(self, batch):
        import ray.exceptions
        import traceback

        group = batch.non_tensor_batch["uid"][0]
        self.seen.append(group)
        if group in self.fail:
            try:
                raise self.fail[group]
            except BaseException as e:  # noqa: BLE001 - as Ray wraps a worker's exception
                raise ray.exceptions.RayTaskError("generate_sequences", traceback.format_exc(), e).as_instanceof_cause()
        return batch


def _rollouter(module, manager, sample_ids):
    """A FullyAsyncRollouter past its __init__ (Ray actors, replicas and data left out): what the
    processor loop and `_process_single_sample_streaming` read, with the samples queued."""
    import asyncio
    import numpy as np
    from verl.experimental.fully_async_policy.detach_utils import RolloutSample
    from verl.protocol import DataProto

    r = object.__new__(module.FullyAsyncRollouter.__ray_actor_class__)
    r.paused, r.lock, r._resume_event = False, asyncio.Lock(), asyncio.Event()
    r.active_tasks, r._active_count_history = set(), []
    r.max_concurrent_samples = r.max_required_samples = r.max_queue_size = 8
    r.staleness_samples = r.total_generated_samples = r._step_generated_samples = 0
    r.dropped_stale_samples = r.processed_sample_count = r.dropped_failed_samples = 0
    r.staleness_threshold, r.required_samples = 1.0, 4
    r.async_rollout_manager, r.message_queue_client = manager, _Queue()
    r.pending_queue = asyncio.Queue()
    for sid in sample_ids:
        batch = DataProto.from_single_dict({"raw_prompt": np.array([[{"role": "user", "content": sid}]] * 8, dtype=object)})
        r.pending_queue.put_nowait(RolloutSample(full_batch=batch, sample_id=sid, epoch=0, rollout_status={}))
    r.pending_queue.put_nowait(None)  # the feed's end signal
    return r


def test_0003_the_fully_async_rollouter_drops_a_group_whose_member_failed(tmp_path):
    import asyncio
    import inspect

    from trainer.verl.agent_loop import MemberSystemError

    patch = PATCHES / "0003-fully-async-failed-group.patch"
    failed = {"uid_sample_0_0": MemberSystemError("toy: system error in all 3 attempts (last: backend timeout)")}
    samples = ["sample_0_0", "sample_0_1"]
    stock = stock_module(tmp_path, patch, ROLLOUTER, "_tb_stock_rollouter")
    r = _rollouter(stock, _Manager(failed), samples)
    with pytest.raises(MemberSystemError, match="system error in all 3 attempts"):
        asyncio.run(r._processor_worker())  # unpatched: the processor (and so the run) ends here

    mod = patched_module(tmp_path / "patched", patch, ROLLOUTER, "_tb_patched_rollouter")
    cls = mod.FullyAsyncRollouter.__ray_actor_class__
    assert "self.dropped_failed_samples = 0" in inspect.getsource(cls.__init__)
    manager = _Manager(failed)
    r = _rollouter(mod, manager, samples)
    asyncio.run(r._processor_worker())  # runs to the end signal
    assert manager.seen == ["uid_sample_0_0", "uid_sample_0_1"]
    assert len(r.message_queue_client.samples) == 1 and r.total_generated_samples == 1  # the good group only
    # three taken from the queue (the end signal counts too), the dropped one given back
    assert (r.dropped_failed_samples, r.processed_sample_count, r.staleness_samples) == (1, 2, 2)
    stats = asyncio.run(r.get_statistics())
    assert stats["count/dropped_failed_samples"] == 1

    r = _rollouter(mod, _Manager({"uid_sample_0_0": ValueError("a bug")}), samples)
    with pytest.raises(ValueError, match="a bug"):  # anything else still ends the run
        asyncio.run(r._processor_worker())


def _log_step(tracking, path: Path, step: int) -> None:
    os.environ["VERL_FILE_LOGGER_PATH"] = str(path)
    try:
        logger = tracking.FileLogger("p", "e")
    finally:
        del os.environ["VERL_FILE_LOGGER_PATH"]
    logger.log({"critic/score/mean": step / 10}, step)
    logger.finish()


def test_0004_a_resumed_run_keeps_the_steps_logged_before_it(tmp_path):
    patch = PATCHES / "0004-file-logger-appends.patch"
    stock = stock_module(tmp_path, patch, "verl/utils/tracking.py", "_tb_stock_tracking")
    before = tmp_path / "stock.jsonl"
    _log_step(stock, before, 1)
    _log_step(stock, before, 2)  # the resumed run's logger
    assert [json.loads(line)["step"] for line in before.read_text().splitlines()] == [2], \
        "unpatched verl 0.9.0 empties the metrics file when a resumed run opens it"

    mod = patched_module(tmp_path / "patched", patch, "verl/utils/tracking.py", "_tb_patched_tracking")
    after = tmp_path / "patched.jsonl"
    _log_step(mod, after, 1)
    _log_step(mod, after, 2)
    assert [json.loads(line)["step"] for line in after.read_text().splitlines()] == [1, 2]


def _left_right_batch(prompt_lens: list[int], response_lens: list[int], width_p: int = 6, width_r: int = 5):
    """A batch as verl's trainer holds it before the engine: left-padded prompts, right-padded
    responses, their attention and response masks, position ids."""
    import torch
    from tensordict import TensorDict

    n = len(prompt_lens)
    prompts, responses = torch.zeros(n, width_p, dtype=torch.long), torch.zeros(n, width_r, dtype=torch.long)
    mask = torch.zeros(n, width_p + width_r, dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompt_lens, response_lens)):
        prompts[i, width_p - p:] = torch.arange(100, 100 + p)
        responses[i, :r] = torch.arange(200, 200 + r)
        mask[i, width_p - p:width_p + r] = 1
    response_mask = mask[:, width_p:].clone()
    position_ids = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return TensorDict({"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], dim=1),
                       "attention_mask": mask, "response_mask": response_mask, "position_ids": position_ids},
                      batch_size=[n])


def test_0005_the_engine_asks_for_exactly_the_log_probs_that_are_read(tmp_path, monkeypatch):
    import torch

    import trainer.verl.cpu  # noqa: F401  (verl's unpadding helpers without flash-attn, as in every CPU run)
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding, response_from_nested

    patch = PATCHES / "0005-logprobs-at-response-positions.patch"
    monkeypatch.setattr(EngineRegistry, "_engines", {})  # the copy registers its engines again
    mod = patched_module(tmp_path, patch, "verl/workers/engine/fsdp/transformer_impl.py",
                         "verl.workers.engine.fsdp._tb_patched_transformer_impl")
    prompt_lens, response_lens = [5, 3, 6], [4, 2, 5]
    data = left_right_2_no_padding(_left_right_batch(prompt_lens, response_lens))
    keep = mod._logprob_positions(data)
    total = sum(prompt_lens) + sum(response_lens)
    assert keep is not None and keep.shape == (total,) and keep.dtype == torch.bool
    # what verl reads afterwards: position p carries the value p + 1, 0 is padding
    values = torch.nested.nested_tensor_from_jagged(torch.arange(1, total + 1, dtype=torch.float32),
                                                    offsets=data["input_ids"].offsets())
    read = no_padding_2_padding(values, data)
    read_positions = sorted(int(v) - 1 for v in read.flatten().tolist() if v > 0)
    assert read_positions == keep.nonzero().flatten().tolist()
    assert int(keep.sum()) == sum(response_lens)  # the prompt's positions are not computed
    # without remove-padding the model reads a padded (bsz, max_seq_len) batch: the padded mask
    # keeps exactly what verl's dense re-packing (valid columns per row) and response_from_nested read
    width = max(p + r for p, r in zip(prompt_lens, response_lens)) + 2  # wider than the longest: columns never kept
    padded_keep = mod._padded_positions(keep, data["input_ids"], width)
    assert padded_keep.shape == (3, width) and padded_keep.dtype == torch.bool
    dense = torch.nested.to_padded_tensor(values, padding=0.0, output_size=(3, width))
    seq_lens = data["input_ids"].offsets().diff()
    valid = torch.arange(width) < seq_lens.unsqueeze(1)
    repacked = torch.nested.nested_tensor_from_jagged(dense[valid], offsets=data["input_ids"].offsets())
    response_mask = torch.nested.as_nested_tensor([torch.ones(r) for r in response_lens], layout=torch.jagged)
    read_dense = response_from_nested(repacked, response_mask)
    assert sorted(int(v) - 1 for v in read_dense.values().tolist()) == read_positions
    assert sorted(int(v) - 1 for v in dense[padded_keep].tolist()) == read_positions
    # the same batch with nested prompts and responses (the other layout verl reads) agrees
    nested = data.clone()
    rows = _left_right_batch(prompt_lens, response_lens)
    nested["prompts"] = torch.nested.as_nested_tensor([rows["prompts"][i, 6 - p:] for i, p in enumerate(prompt_lens)],
                                                      layout=torch.jagged)
    nested["responses"] = torch.nested.as_nested_tensor([rows["responses"][i, :r] for i, r in enumerate(response_lens)],
                                                        layout=torch.jagged)
    assert torch.equal(mod._logprob_positions(nested), keep)
    # no prompts / responses to tell the positions (an SFT batch): none, every position computed
    sft = data.clone()
    del sft["prompts"]
    assert mod._logprob_positions(sft) is None
    # lengths that do not add up to the packed sequences: none, never a wrong mask
    short = data.clone()
    short["attention_mask"] = short["attention_mask"].clone()
    short["attention_mask"][0, -1] = 0
    short["attention_mask"][0, 6] = 0
    assert mod._logprob_positions(short) is None
    # a multi-turn response: the tool results inside it (response_mask 0) are never counted, so
    # their log-probs are not computed; the model's own tokens are exactly as before
    holes = {(0, 1), (2, 2), (2, 3)}  # (sequence, response token)
    turns = _left_right_batch(prompt_lens, response_lens)
    for i, j in holes:
        turns["response_mask"][i, j] = 0
    turns = left_right_2_no_padding(turns)
    counted = mod._logprob_positions(turns)
    by_token = [(i, j) for i, r in enumerate(response_lens) for j in range(r)]  # the order `keep` lists them in
    expected = [p for p, ij in zip(read_positions, by_token) if ij not in holes]
    assert counted.nonzero().flatten().tolist() == expected
    nested_mask = turns.clone()
    nested_mask["response_mask"] = torch.nested.as_nested_tensor(
        [turns["response_mask"][i, :r] for i, r in enumerate(response_lens)], layout=torch.jagged)
    assert torch.equal(mod._logprob_positions(nested_mask), counted)
    # a response mask whose lengths disagree with the responses: every response position, as without one
    wrong = turns.clone()
    wrong["response_mask"] = torch.nested.as_nested_tensor([torch.ones(r + 1) for r in response_lens], layout=torch.jagged)
    assert torch.equal(mod._logprob_positions(wrong), keep)
    # the forward must take the argument (patch 0006); a model class without it gets none
    assert not mod._takes_logprob_positions(torch.nn.Linear(2, 2))
    # a LoRA actor: verl wraps the model in PEFT, whose own forward has no such parameter but hands
    # its keyword arguments to the base model's (without the unwrapping, every LoRA old-log-prob and
    # update pass computed the LM head at every prompt position: 20x slower on the CPU smoke)
    from peft import LoraConfig, get_peft_model

    class TakesLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)

        def forward(self, input_ids, logprob_positions=None, logprob_entropy=True):
            return self.proj(input_ids), logprob_positions

    lora = get_peft_model(TakesLinear(), LoraConfig(r=1, target_modules=["proj"]))
    assert mod._takes_logprob_positions(lora)
    assert lora(torch.ones(1, 2), logprob_positions="asked")[1] == "asked"  # PEFT passes it on
    # prepare_model_inputs hands the model the mask and whether the entropies are read (the micro
    # batch's calculate_entropy: the update without an entropy coefficient does not read them)
    from verl.utils import tensordict_utils as tu

    class Takes(torch.nn.Module):
        def forward(self, input_ids, logprob_positions=None, logprob_entropy=True):  # as patch 0006's forward
            return input_ids

    engine = object.__new__(mod.FSDPEngineWithLMHead)
    engine.module, engine.use_ulysses_sp, engine.pad_to_length = Takes(), False, None
    for entropy in (True, False):
        batch = data.clone()
        tu.assign_non_tensor(batch, use_remove_padding=False, use_fused_kernels=True, temperature=1.0,
                             calculate_entropy=entropy)
        model_inputs, _ = engine.prepare_model_inputs(batch)
        assert model_inputs["logprob_entropy"] is entropy
        assert torch.equal(model_inputs["logprob_positions"], mod._padded_positions(keep, data["input_ids"],
                                                                                     model_inputs["input_ids"].shape[-1]))


@pytest.mark.parametrize("rows", [1, 2], ids=["packed", "padded-batch"])
def test_0006_the_fused_forward_computes_only_where_asked_and_the_same_there(tmp_path, rows):
    """One packed sequence (remove-padding) or a right-padded batch of two with its attention
    mask (the CPU configs' layout): the same log-probs, entropies and gradients where kept."""
    import torch
    from trainer.verl.tiny import build_tiny_qwen3
    from transformers import AutoModelForCausalLM

    patch = PATCHES / "0006-logprobs-where-asked.patch"
    stock = stock_module(tmp_path, patch, "verl/models/transformers/dense_common.py", "_tb_stock_dense_common")
    mod = patched_module(tmp_path / "patched", patch, "verl/models/transformers/dense_common.py", "_tb_patched_dense_common")
    model = AutoModelForCausalLM.from_pretrained(str(build_tiny_qwen3(tmp_path / "tiny", hidden=32, layers=1)),
                                                 torch_dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    width = 48 // rows
    ids = torch.randint(0, 5000, (rows, width), generator=gen)
    pos = torch.arange(width).expand(rows, width)
    mask = torch.ones(rows, width, dtype=torch.long)
    keep = torch.zeros(rows, width, dtype=torch.bool)
    if rows == 1:
        keep[0, 11:23] = True
        keep[0, 30:47] = True
    else:  # the second row is 19 tokens and padding
        mask[1, 19:] = 0
        keep[0, 7:23] = True
        keep[1, 12:18] = True
    weights = torch.rand(rows, width, generator=gen)
    entropy_weights = torch.rand(rows, width, generator=gen)

    def run(module, entropy_loss=False, temperature=0.7, **kw):
        model.zero_grad()
        out = module.forward_with_torch_backend(model, input_ids=ids, position_ids=pos, attention_mask=mask,
                                                return_dict=True, temperature=temperature, **kw)
        loss = (out.log_probs[keep] * weights[keep]).sum()
        # as verl's loss without an entropy coefficient: the entropy read, its gradient zero
        loss = loss + (out.entropy[keep] * entropy_weights[keep]).sum() * (1.0 if entropy_loss else 0.0)
        loss.backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    for entropy_loss in (False, True):
        full, full_grads = run(stock, entropy_loss)
        part, part_grads = run(mod, entropy_loss, logprob_positions=keep)
        torch.testing.assert_close(part.log_probs[keep], full.log_probs[keep])
        torch.testing.assert_close(part.entropy[keep], full.entropy[keep])
        assert part.log_probs.shape == full.log_probs.shape and not part.log_probs[~keep].any() and not part.entropy[~keep].any()
        assert full.log_probs[~keep].ne(0).all()  # stock computes every position
        assert full_grads.keys() == part_grads.keys() and full_grads
        for name, g in full_grads.items():
            torch.testing.assert_close(part_grads[name], g, msg=f"{name} (entropy in the loss: {entropy_loss})")
    again, _ = run(mod)  # without the argument: every position, as stock
    torch.testing.assert_close(again.log_probs, full.log_probs)
    # the entropies only when read (patch 0005 passes calculate_entropy): zeros, and the log-probs
    # and the gradients the very same bits
    read, read_grads = run(mod, logprob_positions=keep)
    unread, unread_grads = run(mod, logprob_positions=keep, logprob_entropy=False)
    assert torch.equal(unread.log_probs, read.log_probs) and not unread.entropy.any() and read.entropy[keep].ne(0).all()
    assert unread_grads.keys() == read_grads.keys() and all(torch.equal(unread_grads[n], g) for n, g in read_grads.items())
    # at temperature 1 (no division: the rollouts' and the laptop's) as stock too
    full, full_grads = run(stock, temperature=1.0)
    part, part_grads = run(mod, temperature=1.0, logprob_positions=keep, logprob_entropy=False)
    torch.testing.assert_close(part.log_probs[keep], full.log_probs[keep])
    for name, g in full_grads.items():
        torch.testing.assert_close(part_grads[name], g, msg=name)


def test_0010_the_qwen3_5_forward_computes_only_where_asked_and_the_same_there(tmp_path):
    """The reference family's forward (Qwen3_5ForConditionalGeneration, hybrid Gated-DeltaNet and
    attention layers) on a text-only batch: with `logprob_positions`, the same log-probs, entropies
    and gradients as verl's own forward where kept, 0 elsewhere; without it, verl's own."""
    import torch
    from transformers import AutoModelForImageTextToText

    from trainer.verl.tiny import build_tiny_qwen3_5

    patch = PATCHES / "0010-qwen3_5-logprobs-where-asked.patch"
    rel = "verl/models/transformers/qwen3_5.py"
    stock = stock_module(tmp_path, patch, rel, "_tb_stock_qwen3_5")
    mod = patched_module(tmp_path / "patched", patch, rel, "_tb_patched_qwen3_5")
    model = AutoModelForImageTextToText.from_pretrained(str(build_tiny_qwen3_5(tmp_path / "tiny", hidden=32)),
                                                        dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 5000, (1, 40), generator=gen)
    keep = torch.zeros(1, 40, dtype=torch.bool)
    keep[0, 9:21] = True
    keep[0, 27:39] = True
    weights = torch.rand(1, 40, generator=gen)

    def run(module, **kw):
        model.zero_grad()
        out = module.forward_with_torch_backend(model, input_ids=ids, position_ids=torch.arange(40)[None],
                                                temperature=0.7, **kw)
        (out.log_probs[keep] * weights[keep]).sum().backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    full, full_grads = run(stock)
    part, part_grads = run(mod, logprob_positions=keep)
    torch.testing.assert_close(part.log_probs[keep], full.log_probs[keep])
    torch.testing.assert_close(part.entropy[keep], full.entropy[keep])
    assert not part.log_probs[~keep].any() and full.log_probs[~keep].ne(0).all()
    assert full_grads.keys() == part_grads.keys() and any("linear_attn" in n for n in full_grads)
    for name, g in full_grads.items():
        torch.testing.assert_close(part_grads[name], g, msg=name)
    unread, _ = run(mod, logprob_positions=keep, logprob_entropy=False)
    assert torch.equal(unread.log_probs, part.log_probs) and not unread.entropy.any()
    again, _ = run(mod)
    torch.testing.assert_close(again.log_probs, full.log_probs)


def _second_device():
    """A second device on a machine with only a CPU, for device logic (not speed, not CUDA): tensors
    of a subclass that hold CPU data and report the device "meta". Inside the returned dispatch mode
    every operation runs on the data, one mixing such tensors with CPU tensors (0-dim ones aside)
    raises as torch does across devices, and `.to("meta")` (any `device="meta"`) of a CPU tensor
    makes one. Returns (mode class, the device, `plain(t)`: a tensor's CPU data)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    there = torch.device("meta")

    class Elsewhere(torch.Tensor):
        @staticmethod
        def __new__(cls, data):
            t = torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(), dtype=data.dtype,
                                                    device=there, storage_offset=data.storage_offset())
            t.data_ = data
            return t

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return run(func, args, kwargs or {})

    def run(func, args, kwargs):
        devices = set()

        def unwrap(x):
            if isinstance(x, Elsewhere):
                devices.add(there)
                return x.data_
            if isinstance(x, torch.Tensor) and x.dim() > 0:
                devices.add(x.device)
            return x

        args, kwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs)
        if kwargs.get("device") is not None:
            out = torch.device(kwargs["device"])
            kwargs["device"] = torch.device("cpu")
        elif len(devices) > 1:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found {sorted(map(str, devices))} "
                               f"({func})")
        else:
            out = next(iter(devices), torch.device("cpu"))
        result = func(*args, **kwargs)
        return tree_map(lambda x: Elsewhere(x) if isinstance(x, torch.Tensor) and out == there else x, result)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return run(func, args, kwargs or {})

    return Mode, there, lambda t: t.data_ if isinstance(t, Elsewhere) else t


def test_0007_the_lm_head_weight_meets_the_hidden_states_on_their_device(tmp_path, monkeypatch):
    import contextlib

    import torch
    from verl.utils.kernel import kernels

    rel = "verl/utils/kernel/linear_cross_entropy.py"
    patch = PATCHES / "0007-lm-head-weight-to-hidden-device.patch"
    stock = stock_module(tmp_path, patch, rel, "verl.utils.kernel._tb_stock_linear_cross_entropy")
    mod = patched_module(tmp_path / "patched", patch, rel, "verl.utils.kernel._tb_patched_linear_cross_entropy")
    Mode, there, plain = _second_device()
    monkeypatch.setattr(torch.cuda.nvtx, "range", lambda *_: contextlib.nullcontext())  # no CUDA driver here

    def reference(hidden, weight, labels, temperature):
        logp = ((hidden @ weight.T).float() / temperature).log_softmax(-1)
        return logp.gather(-1, labels[:, None]).squeeze(-1), -(logp.exp() * logp).sum(-1)

    seen = []  # (kernel, hidden's device, weight's device, the weight tensor)

    def forward(hidden, weight, labels, reduction, temperature, dist_process_group):  # as the Triton kernel's host code
        seen.append(("forward", hidden.device, weight.device, weight))
        assert weight.device == hidden.device and labels.device == hidden.device
        logprobs, entropy = reference(hidden, weight, labels, temperature)
        return logprobs, entropy, torch.zeros_like(entropy), torch.zeros_like(entropy), torch.zeros_like(entropy)

    def backward(dlogprobs, dentropy, hidden, weight, labels, maximum, acc, entropy_b, reduction, fp32, temperature,
                 dist_process_group):
        seen.append(("backward", hidden.device, weight.device, weight))
        assert weight.device == hidden.device and labels.device == hidden.device
        with torch.enable_grad():
            h, w = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
            return torch.autograd.grad(reference(h, w, labels, temperature), (h, w), (dlogprobs, dentropy))

    monkeypatch.setattr(kernels, "efficient_entropy_forward", forward)
    monkeypatch.setattr(kernels, "efficient_entropy_backward", backward)

    gen = torch.Generator().manual_seed(0)
    hidden0, weight0 = torch.randn(2, 3, 8, generator=gen), torch.randn(11, 8, generator=gen)
    labels0, a, b = torch.randint(0, 11, (2, 3), generator=gen), torch.rand(6, generator=gen), torch.rand(6, generator=gen)
    h, w = hidden0.clone().requires_grad_(), weight0.clone().requires_grad_()
    logprobs0, entropy0 = reference(h.view(6, 8), w, labels0.view(6), 0.7)
    ((logprobs0 * a).sum() + (entropy0 * b).sum()).backward()

    def run(module, hidden_there: bool):
        seen.clear()
        weight = weight0.clone().requires_grad_()  # the offloaded weight: on the CPU
        with Mode():
            hidden = (hidden0.to(there) if hidden_there else hidden0.clone()).requires_grad_()
            labels = labels0.to(there) if hidden_there else labels0
            logprobs, entropy = module.linear_cross_entropy(hidden, weight, labels, 0.7, "none")
            ((logprobs * a.to(logprobs.device)).sum() + (entropy * b.to(entropy.device)).sum()).backward()
        return weight, hidden, logprobs, entropy

    with pytest.raises(AssertionError):  # unpatched: the kernel's device check
        run(stock, hidden_there=True)
    assert [(k, str(hd), str(wd)) for k, hd, wd, _ in seen] == [("forward", "meta", "cpu")]

    weight, hidden, logprobs, entropy = run(mod, hidden_there=True)
    assert [(k, str(hd), str(wd)) for k, hd, wd, _ in seen] == [("forward", "meta", "meta"), ("backward", "meta", "meta")]
    assert logprobs.device == there and hidden.grad.device == there
    torch.testing.assert_close(plain(logprobs), logprobs0)
    torch.testing.assert_close(plain(entropy), entropy0)
    torch.testing.assert_close(plain(hidden.grad), h.grad)
    # on the offloaded weight's own device: autograd refuses a gradient on another device, but lets
    # a tensor subclass through, so the stand-in device is checked here
    assert type(weight.grad) is torch.Tensor and weight.grad.device == torch.device("cpu")
    torch.testing.assert_close(weight.grad, w.grad)
    # both on one device: as stock, the kernels get the very weight tensor (no copy)
    weight, hidden, logprobs, _ = run(mod, hidden_there=False)
    assert [k for k, *_ in seen] == ["forward", "backward"] and all(t is weight for *_, t in seen)
    torch.testing.assert_close(logprobs, logprobs0)
    torch.testing.assert_close(weight.grad, w.grad)


_GRAD_SYNC = """
import importlib.util, json, os, sys
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=os.environ["DIST_INIT_METHOD"], rank=rank, world_size=world)
import verl.workers.engine.fsdp  # noqa: F401  (the copies' package)
from verl.workers.engine.base import EngineRegistry

reduce_scatters = []
_reduce_scatter_single = dist.reduce_scatter_single  # what FSDP2's reduce-scatter calls


def counted(*args, **kwargs):
    reduce_scatters.append(1)
    return _reduce_scatter_single(*args, **kwargs)


dist.reduce_scatter_single = counted


def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def micro_batches(r):
    gen = torch.Generator().manual_seed(100 + r)
    return [(torch.randn(5, 8, generator=gen), torch.randn(5, 4, generator=gen)) for _ in range(3)]


def unsharded_held(model):
    # the unsharded gradients FSDP2 keeps between backwards (its accumulator, or an unsharded grad)
    n = 0
    for m in (model, model[0], model[2]):
        group = m._get_fsdp_state()._fsdp_param_group
        for fp in group.fsdp_params if group else []:
            if fp.unsharded_accumulated_grad is not None:
                n += fp.unsharded_accumulated_grad.numel()
            if getattr(fp, "_unsharded_param", None) is not None and fp._unsharded_param.grad is not None:
                n += fp._unsharded_param.grad.numel()
    return n


out = {}
mesh = init_device_mesh("cpu", (world,))
for label, path in json.loads(sys.argv[1]).items():
    EngineRegistry._engines = {}  # the copy registers its engines again
    name = "verl.workers.engine.fsdp._tb_grad_sync_" + label
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    model = net()
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    engine = object.__new__(mod.FSDPEngine)  # verl's method, on an engine whose module is this model
    engine.module = model
    steps, data = [], micro_batches(rank)
    for i, (x, y) in enumerate(data):  # as FSDPEngine.forward_backward_batch's loop
        reduce_scatters.clear()
        with engine._gradient_sync_context(is_last_micro_batch=i == len(data) - 1):
            ((model(x) - y) ** 2).mean().backward()
        steps.append({"reduce_scatters": len(reduce_scatters), "unsharded": unsharded_held(model),
                      "grads": [None if p.grad is None else [type(p.grad).__name__, list(p.grad.to_local().shape)]
                                for p in model.parameters()]})
    out[label] = {"steps": steps, "shards": [list(p.to_local().shape) for p in model.parameters()],
                  "grads": [p.grad.full_tensor().flatten().tolist() for p in model.parameters()]}
reference = net()  # one process: the mean over ranks of each rank's summed micro-batch losses
for r in range(world):
    for x, y in micro_batches(r):
        (((reference(x) - y) ** 2).mean() / world).backward()
out["reference"] = [p.grad.flatten().tolist() for p in reference.parameters()]
out["parameters"] = sum(p.numel() for p in reference.parameters())
print("RESULT", json.dumps(out))
dist.destroy_process_group()
"""


@pytest.mark.engine  # two fresh processes with a gloo group, each importing torch and verl (15-35 s on 2 shared cores)
def test_0008_the_gradients_are_reduce_scattered_at_every_micro_batch(tmp_path):
    import torch

    rel = "verl/workers/engine/fsdp/transformer_impl.py"
    patch = PATCHES / "0008-gradient-sync-every-micro-batch.patch"
    files = {"base": str(series_file(tmp_path / "base", patch, rel, with_patch=False)),
             "patched": str(series_file(tmp_path / "patched", patch, rel))}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "LOCAL_", "TORCHELASTIC", "GROUP_"))}
    env.update(WORLD_SIZE="2", DIST_INIT_METHOD=f"file://{tmp_path / 'pg'}", PYTHONPATH=str(PATCHES.parents[2]),
               OMP_NUM_THREADS="1")
    ranks = [subprocess.Popen([sys.executable, "-c", _GRAD_SYNC, json.dumps(files)], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [r.communicate(timeout=240) for r in ranks]
    assert all(r.returncode == 0 for r in ranks), "\n".join(err[-3000:] for _, err in outs)
    results = [json.loads(next(x for x in o.splitlines() if x.startswith("RESULT "))[len("RESULT "):]) for o, _ in outs]
    for res in results:
        base, patched, total = res["base"], res["patched"], res["parameters"]
        shards = patched["shards"]
        # the file as 0005 leaves it (verl's own sync): nothing reduced before the last micro-batch,
        # the whole model's unsharded gradient held on every rank meanwhile
        assert [s["reduce_scatters"] for s in base["steps"]] == [0, 0, 2]  # 2: one per FSDP unit with parameters
        assert [s["unsharded"] for s in base["steps"]] == [total, total, 0]
        assert base["steps"][0]["grads"] == [None] * 4
        # 0008: each micro-batch reduce-scattered into the sharded gradient, nothing unsharded kept
        assert [s["reduce_scatters"] for s in patched["steps"]] == [2, 2, 2]
        assert [s["unsharded"] for s in patched["steps"]] == [0, 0, 0]
        for s in patched["steps"]:
            assert s["grads"] == [["DTensor", shape] for shape in shards]
        assert sum(math.prod(shape) for shape in shards) * 2 == total  # each rank's half of the model
        for b, p, ref in zip(base["grads"], patched["grads"], res["reference"]):
            torch.testing.assert_close(torch.tensor(p), torch.tensor(b))
            torch.testing.assert_close(torch.tensor(p), torch.tensor(ref))


_TEXT_ONLY_SP = """
import json, os, sys, types
import torch, torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=os.environ["DIST_INIT_METHOD"], rank=rank, world_size=world)
import trainer.verl.cpu  # noqa: F401  (verl's unpadding helpers without flash-attn)
from tensordict import TensorDict
from transformers import Qwen3_5ForConditionalGeneration
from verl.models.transformers.monkey_patch import apply_monkey_patch
from verl.utils import tensordict_utils as tu
from verl.utils.ulysses import set_ulysses_sequence_parallel_group
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

model = Qwen3_5ForConditionalGeneration.from_pretrained(sys.argv[1], torch_dtype=torch.float32)
apply_monkey_patch(model, ulysses_sp_size=world, use_remove_padding=True)  # as FSDPEngine._build_module
set_ulysses_sequence_parallel_group(dist.group.WORLD)
seen = []
for layer in model.model.language_model.layers:
    layer.register_forward_pre_hook(lambda m, a, k: seen.append(k.get("hidden_states", a[0] if a else None)),
                                 with_kwargs=True)
lens = [10, 6]
ids = [torch.arange(1000, 1000 + n) * 7 % 5000 for n in lens]
batch = TensorDict({"input_ids": torch.nested.as_nested_tensor(ids, layout=torch.jagged),
                    "position_ids": torch.nested.as_nested_tensor([torch.arange(n) for n in lens], layout=torch.jagged)},
                   batch_size=[2])
tu.assign_non_tensor(batch, use_remove_padding=True, use_fused_kernels=False, temperature=1.0)
out = {}
for label, module in (("verl", model), ("as_a_text_model", types.SimpleNamespace(config=types.SimpleNamespace()))):
    engine = object.__new__(FSDPEngineWithLMHead)
    engine.module, engine.use_ulysses_sp, engine.ulysses_sequence_parallel_size, engine.pad_to_length = module, True, world, None
    model_inputs, output_args = engine.prepare_model_inputs(batch)
    seen.clear()
    with torch.no_grad():
        logits = model(**model_inputs, use_cache=False).logits
    half = sum(lens) // world
    mine = model.model.language_model.embed_tokens(torch.cat(ids))[half * rank:half * (rank + 1)]
    out[label] = {"engine_input": model_inputs["input_ids"].shape[-1], "layers": [h.shape[1] for h in seen],
                  "logits": logits.shape[1], "labels": output_args["input_ids_rmpad_rolled"].shape[-1],
                  "first_layer_is_my_half": seen[0].shape[1] == half and bool(torch.allclose(seen[0][0], mine))}
print("RESULT", json.dumps(out))
dist.destroy_process_group()
"""


@pytest.mark.engine  # two fresh processes with a gloo group, each loading the model (15-30 s on 2 shared cores)
def test_no_0009_verl_already_slices_a_text_only_batch_of_the_reference_family_for_ulysses(tmp_path):
    """The reference family (qwen3_5, `Qwen3_5ForConditionalGeneration`, a config with
    `vision_config`) under Ulysses SP 2 with a text-only micro batch: verl 0.9.0's engine hands the
    model the whole (padded) packed sequence, and verl's qwen3_5 monkey patch
    (`patch_vlm_for_ulysses_input_slicing(Qwen3_5TextModel)`) slices the embeddings, so every
    decoder layer runs on this rank's half, exactly its tokens. Treating such a batch as a text
    model's (the engine slicing `input_ids`) would slice twice: each layer a quarter, logits half
    as long as the labels. So there is no patch 0009 for it."""
    from trainer.verl.tiny import build_tiny_qwen3_5

    path = build_tiny_qwen3_5(tmp_path / "tiny")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "LOCAL_", "TORCHELASTIC", "GROUP_"))}
    env.update(WORLD_SIZE="2", DIST_INIT_METHOD=f"file://{tmp_path / 'pg'}", PYTHONPATH=str(PATCHES.parents[2]),
               OMP_NUM_THREADS="1")
    ranks = [subprocess.Popen([sys.executable, "-c", _TEXT_ONLY_SP, str(path)], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [r.communicate(timeout=280) for r in ranks]
    assert all(r.returncode == 0 for r in ranks), "\n".join(err[-3000:] for _, err in outs)
    for o, _ in outs:
        res = json.loads(next(x for x in o.splitlines() if x.startswith("RESULT "))[len("RESULT "):])
        assert res["verl"] == {"engine_input": 16, "layers": [8, 8, 8, 8], "logits": 8, "labels": 8,
                               "first_layer_is_my_half": True}
        assert res["as_a_text_model"] == {"engine_input": 8, "layers": [4, 4, 4, 4], "logits": 4, "labels": 8,
                                          "first_layer_is_my_half": False}


AGREEMENT = ("actor/rollout_actor/logp_abs_diff_mean", "actor/rollout_actor/logp_abs_diff_max",
             "actor/rollout_actor/ppo_kl", "actor/rollout_actor/k3_kl")


def _loss_micro_batch(rows: list[dict], batch_num_tokens: int, global_batch_size: int):
    """(model_output, data) as the engine hands verl's `ppo_loss` one micro-batch: nested prompts
    and responses, the response fields nested per sequence, and the model's log-probs over the
    packed sequences (response token j of a sequence with a prompt of p tokens read at p + j - 1)."""
    import torch
    from tensordict import TensorDict

    from verl.utils import tensordict_utils as tu

    def nested(key, dtype=torch.float32):
        return torch.nested.as_nested_tensor([torch.tensor(r[key], dtype=dtype) for r in rows], layout=torch.jagged)

    packed, offsets = [], [0]
    for r in rows:
        seq = torch.zeros(r["prompt"] + len(r["mask"]))
        seq[r["prompt"] - 1:r["prompt"] - 1 + len(r["mask"])] = torch.tensor(r["current"])
        packed.append(seq)
        offsets.append(offsets[-1] + len(seq))
    log_probs = torch.nested.nested_tensor_from_jagged(torch.cat(packed), offsets=torch.tensor(offsets))
    data = TensorDict({"prompts": torch.nested.as_nested_tensor([torch.arange(r["prompt"]) for r in rows], layout=torch.jagged),
                       "responses": nested("mask", torch.long), "response_mask": nested("mask", torch.long),
                       "old_log_probs": nested("old"), "rollout_log_probs": nested("rollout"),
                       "advantages": nested("advantage")}, batch_size=[len(rows)])
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=batch_num_tokens, global_batch_size=global_batch_size)
    return {"log_probs": log_probs}, data


def test_0011_the_update_logs_rollout_actor_agreement_in_bypass_and_decoupled_mode(tmp_path):
    """Three episodes with tool tokens inside their responses (response_mask 0, where the rollout's
    log-probs are 0.0 and the actor's far off), as two micro-batches of one mini-batch: the patched
    `ppo_loss` logs |Δ log p| (mean, max), k1 and k3 over the model's tokens only, as verl's own
    aggregation (append_to_dict, Metric.aggregate_dp) reduces them, equal to the values computed by
    hand over the whole mini-batch: in bypass mode (old log-probs = the rollout's) from this
    forward's log-probs, in decoupled mode from the old ones. verl 0.9.0 logs none of them."""
    import math
    import random

    from verl.utils.metric import Metric
    from verl.utils.py_functional import append_to_dict
    from verl.workers.config import FSDPActorConfig

    patch = PATCHES / "0011-rollout-actor-agreement.patch"
    rel = "verl/workers/utils/losses.py"
    stock = stock_module(tmp_path, patch, rel, "_tb_stock_losses")
    mod = patched_module(tmp_path / "patched", patch, rel, "_tb_patched_losses")
    rng = random.Random(0)
    masks = [[1, 1, 0, 0, 1], [1, 1, 1], [1, 0, 1, 1, 1, 1]]
    rows = []
    for i, mask in enumerate(masks):
        rollout = [-rng.uniform(0.1, 3.0) if m else 0.0 for m in mask]
        rows.append({"prompt": 3 + i, "mask": mask, "rollout": rollout, "advantage": [0.5] * len(mask),
                     "recomputed": [x + rng.uniform(-0.2, 0.2) if m else -9.0 for x, m in zip(rollout, mask)],
                     "current": [x + rng.uniform(-0.5, 0.5) if m else -7.0 for x, m in zip(rollout, mask)]})
    tokens = sum(map(sum, masks))

    def expected(actor_key: str) -> dict[str, float]:
        d = [a - r for row in rows for a, r, m in zip(row[actor_key], row["rollout"], row["mask"]) if m]
        return dict(zip(AGREEMENT, (sum(map(abs, d)) / len(d), max(map(abs, d)), -sum(d) / len(d),
                                    sum(math.exp(x) - x - 1 for x in d) / len(d))))

    def logged(module, old_key: str) -> dict[str, float]:
        config = FSDPActorConfig(strategy="fsdp2", ppo_mini_batch_size=3, ppo_micro_batch_size_per_gpu=2, rollout_n=1)
        per_rank: dict = {}
        for micro in (rows[:2], rows[2:]):
            model_output, data = _loss_micro_batch([{**r, "old": r[old_key]} for r in micro], tokens, len(rows))
            _, metrics = module.ppo_loss(config, model_output, data)
            append_to_dict(per_rank, metrics)  # verl's postprocess_batch_func over the micro-batches
        assert "actor/pg_loss" in per_rank
        return {k: Metric.aggregate_dp([v]) for k, v in per_rank.items() if k in AGREEMENT}  # train_mini_batch, one rank

    for old_key, actor_key in (("rollout", "current"), ("recomputed", "recomputed")):  # bypass, decoupled
        assert logged(stock, old_key) == {}
        got = logged(mod, old_key)
        assert set(got) == set(AGREEMENT), old_key
        for key, value in expected(actor_key).items():
            assert math.isclose(got[key], value, rel_tol=1e-5, abs_tol=1e-7), (old_key, key, got[key], value)
    assert expected("current") != expected("recomputed")


def _fit_order(module, monkeypatch) -> list[tuple[str, int]]:
    """`PPOTrainer.fit` over two steps (save_freq 1) with stand-ins for the trainer's parts: the
    order in which each step is logged and saved."""
    from types import SimpleNamespace

    events: list[tuple[str, int]] = []

    class Logger:
        def __init__(self, **kwargs):
            pass

        def log(self, data, step):
            events.append(("log", step))

    monkeypatch.setattr(module, "Tracking", Logger)
    monkeypatch.setattr(module, "ValidationGenerationsLogger", lambda **k: None)
    monkeypatch.setattr(module, "DapoFilteredRewardTableLogger", lambda **k: SimpleNamespace(log=lambda *a: None))
    monkeypatch.setattr(module, "SkipManager", SimpleNamespace(init=lambda c: None, set_step=lambda s: None))
    monkeypatch.setattr(module, "tq", SimpleNamespace(kv_clear=lambda **k: None))
    cfg = OmegaConf.create({"trainer": {"project_name": "p", "experiment_name": "e", "logger": [], "save_freq": 1,
                                        "test_freq": -1, "total_epochs": 1, "val_before_train": False},
                            "global_profiler": {"steps": None, "profile_continuous_steps": False}})
    trainer = SimpleNamespace(config=cfg, global_steps=0, total_training_steps=2, steps_per_epoch=2)
    noop = lambda *a, **k: None  # noqa: E731
    for name in ("on_train_begin", "on_train_end", "on_step_begin", "on_step_end", "_reissue_inflight_prompts",
                 "_shutdown_dump_executor", "_compute_metrics"):
        setattr(trainer, name, noop)
    trainer._consume_sync_metrics = lambda: {}
    trainer.step = lambda metrics, timing: SimpleNamespace(keys=[], partition_id="train")
    trainer._save_checkpoint = lambda: events.append(("save", trainer.global_steps))
    trainer._start_profiling = lambda: module.PPOTrainer._start_profiling(trainer)
    trainer._stop_profiling = lambda: module.PPOTrainer._stop_profiling(trainer)
    module.PPOTrainer.fit(trainer, agent_loop_manager=None)
    return events


def test_0012_a_step_is_saved_after_its_metrics_and_the_tracker_is_never_empty(tmp_path, monkeypatch):
    patch = PATCHES / "0012-save-after-log-atomic-tracker.patch"
    rel = "verl/trainer/ppo/v1/trainer_base.py"
    stock = stock_module(tmp_path, patch, rel, "verl.trainer.ppo.v1._tb_stock_trainer_base")
    patched = patched_module(tmp_path, patch, rel, "verl.trainer.ppo.v1._tb_patched_trainer_base")
    # stock: a kill between a step's save and its log resumes after that step, which is never logged
    assert _fit_order(stock, monkeypatch) == [("save", 1), ("log", 1), ("save", 2), ("log", 2)]
    assert _fit_order(patched, monkeypatch) == [("log", 1), ("save", 1), ("log", 2), ("save", 2)]

    tracker = tmp_path / "latest_checkpointed_iteration.txt"
    patched.write_tracker(str(tracker), 4)
    assert tracker.read_text() == "4"

    def killed(src, dst):  # the process dies after the new step is written, before it takes the tracker's place
        raise KeyboardInterrupt

    monkeypatch.setattr(patched.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        patched.write_tracker(str(tracker), 5)
    assert tracker.read_text() == "4"  # stock truncates it first: a kill there leaves it empty
    monkeypatch.undo()
    patched.write_tracker(str(tracker), 5)
    assert tracker.read_text() == "5" and not (tmp_path / "latest_checkpointed_iteration.txt.tmp").exists()


class _Rows:
    """A map-style dataset of `n` rows: row i is prompt i (what verl's collate_fn stacks)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch

        return {"input_ids": torch.tensor([i]), "row": int(i)}


def _feeding_rollouter(module, ckpt: Path, total: int, rows: int = 12):
    """A FullyAsyncRollouter past its __init__ (Ray, replicas and servers left out) with a real
    StatefulDataLoader over `_Rows` and verl's own shuffled sampler: what `_feed_samples`,
    `save_checkpoint` and `load_checkpoint` read. The patched module's ledger starts as __init__ sets it."""
    import asyncio

    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.utils import create_rl_sampler
    from verl.utils.dataset.rl_dataset import collate_fn

    r = object.__new__(module.FullyAsyncRollouter.__ray_actor_class__)
    r.config = OmegaConf.create({
        "trainer": {"save_freq": 1, "total_epochs": 1, "resume_mode": "auto", "default_local_dir": str(ckpt),
                    "default_hdfs_dir": None},
        "async_training": {"trigger_parameter_sync_step": 1},
        "actor_rollout_ref": {"rollout": {"n": 2, "multi_turn": {"enable": True}}}})
    ds = _Rows(rows)
    sampler = create_rl_sampler(OmegaConf.create({"shuffle": True, "seed": 7}), ds)
    r.train_dataloader = StatefulDataLoader(ds, batch_size=1, sampler=sampler, collate_fn=collate_fn, num_workers=0)
    r.total_rollout_steps, r.required_samples, r.global_steps = total, 2, 1
    r.dataloader_lock, r.pending_queue = asyncio.Lock(), asyncio.Queue(maxsize=2)
    if hasattr(module, "INFLIGHT_FILE"):
        r.inflight, r._restored_inflight, r._epoch, r._feed_done = {}, [], 0, False
    return r


def _drain(r) -> list[tuple[str, int]]:
    """Everything the feed puts (until its end signal), as (sample id, prompt row)."""
    import asyncio

    async def go():
        r.pending_queue = asyncio.Queue()
        await r._feed_samples()
        out = []
        while (s := r.pending_queue.get_nowait()) is not None:
            out.append((s.sample_id, int(s.full_batch.non_tensor_batch["row"][0])))
        return out

    return asyncio.run(go())


def _killed_after_a_save(module, ckpt: Path, total: int) -> list[tuple[str, int]]:
    """Feed into a queue of 2 until it blocks, take 2 samples (trained), save step 1 handing their
    ids, and end there (the kill): returns what was taken."""
    import asyncio

    async def go():
        r = _feeding_rollouter(module, ckpt, total)
        feed = asyncio.ensure_future(r._feed_samples())
        for _ in range(20):
            await asyncio.sleep(0)
        taken = [r.pending_queue.get_nowait(), r.pending_queue.get_nowait()]  # the processor takes two ...
        for _ in range(20):
            await asyncio.sleep(0)  # ... the feed refills the queue and blocks on the next
        trained = [s.sample_id for s in taken]
        kwargs = {"trained_sample_ids": trained} if hasattr(module, "INFLIGHT_FILE") else {}
        await r.save_checkpoint(str(ckpt / "global_step_1"), **kwargs)
        (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
        feed.cancel()
        return [(s.sample_id, int(s.full_batch.non_tensor_batch["row"][0])) for s in taken]

    return asyncio.run(go())


def test_0013_a_resumed_fully_async_rollouter_feeds_the_prompts_in_flight_first(tmp_path):
    patch = PATCHES / "0013-fully-async-inflight-prompts.patch"
    total = 6
    stock = stock_module(tmp_path, patch, ROLLOUTER, "_tb_stock_rollouter_0013")
    mod = patched_module(tmp_path / "patched", patch, ROLLOUTER, "_tb_patched_rollouter_0013")
    straight = _drain(_feeding_rollouter(mod, tmp_path / "straight", total))
    assert [sid for sid, _ in straight] == [f"sample_0_{i}" for i in range(1, total + 1)]
    assert _drain(_feeding_rollouter(stock, tmp_path / "stock-straight", total)) == straight

    # stock: the prompts drawn before the save and not trained are lost, and their ids go to others
    trained = _killed_after_a_save(stock, tmp_path / "stock", total)
    assert trained == straight[:2]
    r = _feeding_rollouter(stock, tmp_path / "stock", total)
    r.load_checkpoint()
    resumed = _drain(r)
    assert {row for _, row in resumed} & {row for _, row in straight[2:5]} == set()  # prompts 3-5: never trained
    assert [sid for sid, _ in resumed][:3] == ["sample_0_3", "sample_0_4", "sample_0_5"]  # the lost ids, reused

    # patched: the save keeps them (3 and 4 queued, 5 drawn while the feed waited on the full queue)
    ckpt = tmp_path / "patched-run"
    assert _killed_after_a_save(mod, ckpt, total) == straight[:2]
    import torch

    ledger = torch.load(ckpt / "global_step_1" / mod.INFLIGHT_FILE, weights_only=False)
    assert [sid for sid, _, _ in ledger["inflight"]] == ["sample_0_3", "sample_0_4", "sample_0_5"]
    assert ledger["next_sample"] == 6 and not ledger["feed_done"]
    r = _feeding_rollouter(mod, ckpt, total)
    r.load_checkpoint()
    assert trained + _drain(r) == straight  # every prompt once, under its own id, in the order drawn
    # a resumed run whose last prompt was drawn before the save draws nothing more
    r = _feeding_rollouter(mod, ckpt, total)
    r.load_checkpoint()
    r._feed_done = True
    assert _drain(r) == straight[2:5]
    # a save whose trainer names no trained ids writes no ledger (it could not tell them apart)
    import asyncio

    r = _feeding_rollouter(mod, tmp_path / "no-ids", total)
    asyncio.run(r.save_checkpoint(str(tmp_path / "no-ids" / "global_step_1")))
    assert (tmp_path / "no-ids" / "global_step_1" / "data.pt").exists()
    assert not (tmp_path / "no-ids" / "global_step_1" / mod.INFLIGHT_FILE).exists()


def _async_trainer(module, ckpt: Path, seen: list):
    """A FullyAsyncTrainer past its __init__ with stand-ins for its workers and the rollouter,
    whose `fit_step` plays one batch of two groups through every stage (each a pass-through); what
    the step's end does, in order, goes to `seen` (the rollouter's save with its arguments)."""
    from types import SimpleNamespace

    import numpy as np
    from verl.protocol import DataProto

    ckpt.mkdir(parents=True, exist_ok=True)  # (the actor's save makes it)
    t = object.__new__(module.FullyAsyncTrainer.__ray_actor_class__)
    t.config = OmegaConf.create({"trainer": {"default_local_dir": str(ckpt), "default_hdfs_dir": None},
                                 "global_profiler": {"steps": None}})
    t.current_param_version, t.global_steps, t.epoch, t.use_critic = 1, 1, 0, False
    t.dynamic_schedule_enabled, t.dynamic_resource_controller = False, None
    if hasattr(module.FullyAsyncTrainer.__ray_actor_class__, "_save_checkpoint"):
        t.trained_sample_ids = set()
    batch = DataProto.from_single_dict({"uid": np.array(["uid_sample_0_3"] * 2 + ["uid_sample_0_5"] * 2, dtype=object)})

    async def generate(_):
        return batch

    t._fit_generate = generate
    for name in ("_fit_compute_reward", "_fit_compute_log_prob", "_fit_compute_ref_log_prob", "_fit_compute_critic",
                 "_fit_compute_advantage", "_fit_update_critic", "_fit_update_actor"):
        setattr(t, name, lambda b: b)
    for name in ("_fit_update_local_step", "_fit_dump_data", "_record_train_resource_utilization",
                 "_fit_start_profile", "_fit_stop_profile"):
        setattr(t, name, lambda *a, **k: None)
    t._fit_collect_metrics = lambda b: seen.append("collect")
    t._fit_postprocess_step = lambda: seen.append("aggregate")  # adds the step's metrics to the aggregate
    t._fit_log_aggregated_training_metrics = lambda timing: seen.append("log")

    async def synced(*a, **k):  # a weight sync happened this step: the aggregate is logged
        return {}

    async def nothing(*a, **k):
        return None

    t._fit_update_weights, t._fit_validate = synced, nothing
    t._fit_save_checkpoint = lambda: (seen.append("save"), t._save_checkpoint())
    t.actor_rollout_wg = SimpleNamespace(save_checkpoint=lambda *a, **k: None)
    t.rollouter = SimpleNamespace(save_checkpoint=SimpleNamespace(
        remote=lambda folder, **kw: seen.append((Path(folder).name, kw))))
    return t


def test_0014_the_fully_async_trainer_hands_its_trained_ids_to_the_rollouters_save(tmp_path, monkeypatch):
    import asyncio

    patch = PATCHES / "0014-fully-async-trainer-resume.patch"
    rel = "verl/experimental/fully_async_policy/fully_async_trainer.py"
    for module, name in ((stock_module(tmp_path, patch, rel, "_tb_stock_async_trainer"), "stock"),
                         (patched_module(tmp_path / "p", patch, rel, "_tb_patched_async_trainer"), "patched")):
        monkeypatch.setattr(module.ray, "get", lambda x: x)
        seen: list = []
        t = _async_trainer(module, tmp_path / name, seen)
        asyncio.run(t.fit_step())
        tracker = tmp_path / name / "latest_checkpointed_iteration.txt"
        assert tracker.read_text() == "1" and not tracker.with_name(tracker.name + ".tmp").exists()
        if name == "stock":  # saved before the update's metrics reach the aggregate, the rollouter never told
            assert seen == ["save", ("global_step_1", {}), "collect", "log", "aggregate"]
            continue
        # the update's metrics in the aggregate, logged, then saved, with the ids trained
        assert seen == ["collect", "aggregate", "log", "save",
                        ("global_step_1", {"trained_sample_ids": ["sample_0_3", "sample_0_5"]})]
        assert t.trained_sample_ids == set()  # handed over: the next save names only its own

        def killed(src, dst):  # the process dies after the new step is written, before the rename
            raise KeyboardInterrupt

        t.current_param_version = 2
        monkeypatch.setattr(module.os, "replace", killed)
        with pytest.raises(KeyboardInterrupt):
            t._save_checkpoint()
        assert tracker.read_text() == "1"  # stock truncates it first: a kill there leaves it empty


@pytest.mark.parametrize("patch_name, rel, error", [
    ("0015-vllm-cpu-version.patch", "verl/third_party/vllm/__init__.py", "vllm version None not supported"),
    ("0016-vllm-rollout-cpu-version.patch", "verl/workers/rollout/vllm_rollout/__init__.py", "ensure the 'vllm' package"),
])
def test_0015_0016_verl_takes_vllms_cpu_build_for_vllm(tmp_path, monkeypatch, patch_name, rel, error):
    """Where vLLM is installed as its CPU build (distribution `vllm-cpu`, no `vllm`), stock verl
    refuses its vLLM rollout; patched, it reads the CPU build's version."""
    import importlib.metadata as md

    need_vllm()
    real = md.version

    def only_the_cpu_build(name: str) -> str:
        if name == "vllm":
            raise md.PackageNotFoundError(name)
        return "0.27.1" if name == "vllm-cpu" else real(name)

    monkeypatch.setattr(md, "version", only_the_cpu_build)
    package = rel.rpartition("/")[0].replace("/", ".")
    patch = PATCHES / patch_name
    with pytest.raises((ValueError, md.PackageNotFoundError), match=re.escape(error)):
        stock_module(tmp_path, patch, rel, f"{package}._tb_stock_init")
    mod = patched_module(tmp_path, patch, rel, f"{package}._tb_patched_init")
    assert getattr(mod, "vllm_version", None) == "0.27.1" or getattr(mod, "vllm_package_version", None) == "0.27.1"


def test_0018_verls_lora_load_into_vllm_keeps_the_names_vllm_packs(tmp_path):
    """verl's in-memory adapter load (`VLLMHijack`'s `_load_adapter`, the adapter-only sync) hands
    vLLM's LoRA model the mapper it renames the adapter's tensors with. Stock, it is the Qwen3
    model's whole mapper, whose stacked maps rename `q_proj` to `qkv_proj`: the adapter's q/k/v
    matrices then reach vLLM as one unpacked tensor and its merged layer's `set_lora` fails
    (IndexError); patched, vLLM's unstacked mapper, which keeps `q_proj` for the manager to pack."""
    need_vllm()
    from types import SimpleNamespace

    from vllm.config import LoRAConfig
    from vllm.lora.worker_manager import LRUCacheWorkerLoRAManager
    from vllm.model_executor.models.qwen3 import Qwen3ForCausalLM

    rel = "verl/utils/vllm/utils.py"
    patch = PATCHES / "0018-vllm-lora-unstacked-names.patch"
    stock = series_file(tmp_path / "stock", patch, rel, with_patch=False)
    name = "model.layers.0.self_attn.q_proj"
    for path, label in ((stock, "stock"), (series_file(tmp_path / "patched", patch, rel), "patched")):
        spec = importlib.util.spec_from_file_location(f"_tb_{label}_verl_vllm_utils", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        seen = {}

        class LoRAModel:
            @staticmethod
            def from_lora_tensors(tensors, **kwargs):
                seen.update(kwargs)
                return SimpleNamespace()

        manager = SimpleNamespace(
            _adapter_manager=SimpleNamespace(supported_lora_modules=["qkv_proj"],
                                             packed_modules_mapping={"qkv_proj": ["q_proj", "k_proj", "v_proj"]},
                                             model=SimpleNamespace(hf_to_vllm_mapper=Qwen3ForCausalLM.hf_to_vllm_mapper)),
            lora_config=LoRAConfig(max_lora_rank=8), _lora_model_cls=LoRAModel, vocab_size=64)
        original = LRUCacheWorkerLoRAManager._load_adapter
        try:
            mod.VLLMHijack.hijack()
            request = mod.TensorLoRARequest(lora_name="a", lora_int_id=1, lora_path="/nonexistent",
                                            peft_config={"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]},
                                            lora_tensors={})
            LRUCacheWorkerLoRAManager._load_adapter(manager, request)
        finally:
            LRUCacheWorkerLoRAManager._load_adapter = original
        mapped = seen["weights_mapper"]._map_name(name)
        assert mapped == (name.replace("q_proj", "qkv_proj") if label == "stock" else name), (label, mapped)
