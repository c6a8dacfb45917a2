"""Each patch of trainer/verl/patches applies to the installed verl 0.9.0 and changes what it says:
the test runs the same scenario on the unpatched module (must show the old behaviour) and on a
patched copy (must show the new one), so it fails where the patch is missing or stale."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

PATCHES = Path(__file__).resolve().parents[1] / "trainer" / "verl" / "patches"
# the directory holding the `verl` package, found without importing it (seconds: torch and more)
VERL_ROOT = Path(importlib.util.find_spec("verl").origin).resolve().parent.parent


def patched_module(tmp_path: Path, patch: Path, rel: str, name: str):
    """`rel` (e.g. verl/trainer/ppo/v1/replay_buffer.py) copied, patched with `patch -p1`, imported as `name`."""
    dst = tmp_path / rel
    dst.parent.mkdir(parents=True)
    shutil.copy(VERL_ROOT / rel, dst)
    if subprocess.run(["patch", "-p1", "--reverse", "--dry-run", "--force", "-i", str(patch)], cwd=tmp_path,
                      capture_output=True).returncode == 0:  # the installed verl is patched already: start from stock
        subprocess.run(["patch", "-p1", "--reverse", "--force", "-i", str(patch)], cwd=tmp_path, check=True,
                       capture_output=True)
    r = subprocess.run(["patch", "-p1", "--forward", "-i", str(patch)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, f"{patch.name} does not apply to the installed verl {importlib.import_module('verl').__version__}:\n{r.stdout}{r.stderr}"
    spec = importlib.util.spec_from_file_location(name, dst)
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
    """verl 0.9.0's own `rel`: the installed file, or, where scripts/prepare_verl.py has patched
    the installed verl, that file with the patch reversed."""
    dst = tmp_path / "stock" / rel
    dst.parent.mkdir(parents=True)
    shutil.copy(VERL_ROOT / rel, dst)
    if subprocess.run(["patch", "-p1", "--reverse", "--dry-run", "--force", "-i", str(patch)], cwd=tmp_path / "stock",
                      capture_output=True).returncode == 0:
        subprocess.run(["patch", "-p1", "--reverse", "--force", "-i", str(patch)], cwd=tmp_path / "stock", check=True,
                       capture_output=True)
    spec = importlib.util.spec_from_file_location(name, dst)
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
def test_patch_is_not_applied_twice(tmp_path, patch):
    rel = next(line[6:].strip() for line in patch.read_text().splitlines() if line.startswith("+++ b/"))
    patched_module(tmp_path, patch, rel, f"_tb_twice_{patch.stem.replace('-', '_')}")
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
