"""The node checks (trainer/verl/nodes.py) without a cluster: what a node's report finds and names,
what the launch would check on each node, how a cluster's workers get the config's env:, and
scripts/start_ray.sh's own checks. Three nodes for real: tests/test_cluster_on_cpu.py (engine)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fakes import Endpoint, refusing_port
from trainer.verl.launch import main, plan
from trainer.verl.nodes import NodeReport, NodeSpec, checks, node_report, run_env_vars, spec_of

ROOT = Path(__file__).resolve().parents[1]
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH",
                                 "TRAIN_FILE", "VAL_FILE", "SMOKE_DIR", "RAY_ADDRESS", "NODE_CHECK"))}


def prepared(path: Path, datasets: list[str]) -> Path:
    """A parquet with the prepared pool's `extra_info.dataset` column."""
    rows = [{"uid": f"t{i}", "dataset": d} for i, d in enumerate(datasets)]
    pq.write_table(pa.table({"extra_info": rows}), path)
    return path


def test_a_node_report_names_each_problem_with_its_fix(tmp_path):
    there = tmp_path / "there"
    there.mkdir()
    marker = tmp_path / "marker"
    marker.write_text("another run's token")
    live = Endpoint(lambda path, body: (200, {}))
    try:
        with refusing_port() as dead:
            spec = NodeSpec(paths=(("data.train_files", str(there)), ("dataset named by x.parquet", str(tmp_path / "gone"))),
                            marker=str(marker), token="this run", endpoints=(("user", live.url),
                                                                             ("judge", f"http://127.0.0.1:{dead}/v1")),
                            keys=(("user", "TBT_TEST_KEY_THAT_IS_NOT_SET"),))
            report = node_report(spec, "10.0.0.2 (abcd1234)")
    finally:
        live.stop()
    text = "\n".join(report.problems)
    assert report.node == "10.0.0.2 (abcd1234)" and len(report.problems) == 4, report.problems
    assert f"dataset named by x.parquet: {tmp_path / 'gone'} does not exist here" in text
    assert f"marker {marker} it wrote is not here" in text and "one shared filesystem" in text
    assert f"judge endpoint http://127.0.0.1:{dead}/v1: ConnectError from here" in text
    assert "TBT_TEST_KEY_THAT_IS_NOT_SET is not set here" in text
    assert f"user endpoint {live.url}" not in text  # the live one answers
    # this environment's verl carries every patch and the hooks: no problem of its own, and the
    # hashes of the patched files are recorded for the comparison with the launch node's
    assert any(n.endswith("patches in force") for n in report.notes) and "hooks in force" in report.notes
    assert report.patched and all(len(sha) == 64 for sha in report.patched.values())

    marker.write_text("this run")
    good = node_report(NodeSpec(paths=(("data.train_files", str(there)),), marker=str(marker), token="this run"), "n")
    assert good.problems == [] and "checkpoint directory shared" in good.notes


def test_a_node_whose_patched_files_differ_from_the_launch_nodes_is_named():
    reference = {"verl/utils/tracking.py": "a" * 64, "verl/trainer/ppo/v1/replay_buffer.py": "b" * 64}
    same = NodeReport(node="10.0.0.2 (aaaa1111)", patched=dict(reference), notes=["hooks in force"])
    other = NodeReport(node="10.0.0.3 (bbbb2222)", patched={**reference, "verl/utils/tracking.py": "c" * 64})
    ok, bad = checks([same, other], reference)
    assert ok.ok and ok.line().startswith("ok    node 10.0.0.2 (aaaa1111) ready")
    assert not bad.ok and bad.brief == "node 10.0.0.3 (bbbb2222) not ready"
    assert bad.line().startswith("FAIL  node 10.0.0.3 (bbbb2222) ready: verl/utils/tracking.py differs from the "
                                 "launch node's (sha256 cccccccccccc here, aaaaaaaaaaaa there")


def test_what_every_node_must_hold_comes_from_the_composed_config(tmp_path):
    train = prepared(tmp_path / "train.parquet", ["/data/samples", "/data/samples", "/data/more"])
    env = {**BASE_ENV, "TRAIN_FILE": str(train), "VAL_FILE": str(train), "CKPT_DIR": "/shared/ck",
           "TBT_USER_SPEC": "openai:http://10.0.0.9:8001/v1#Qwen/Qwen3-8B",
           "TBT_JUDGE_SPEC": "openai:http://10.0.0.9:8002/v1#Qwen/Qwen3-8B,key_env=JUDGE_KEY"}
    _, cfg, _, _ = plan([], env)
    spec = spec_of(cfg)
    assert ("data.train_files", str(train)) in spec.paths
    assert [p for what, p in spec.paths if what.startswith("dataset named by")] == ["/data/more", "/data/samples"]
    assert spec.endpoints == (("user", "http://10.0.0.9:8001/v1"), ("judge", "http://10.0.0.9:8002/v1"))
    assert spec.keys == (("user", "TBT_USER_API_KEY"), ("judge", "JUDGE_KEY"))


def test_on_a_running_cluster_the_configs_env_reaches_every_worker_as_strings(tmp_path):
    env = {**BASE_ENV, "CONFIG": "configs/cpu_smoke.yaml", "SMOKE_DIR": str(tmp_path), "CKPT_DIR": str(tmp_path / "ck")}
    local, cfg, _, _ = plan([], env)
    assert not [o for o in local if "runtime_env.env_vars.OMP_NUM_THREADS" in o]  # a local Ray inherits the driver's
    joined, cfg, _, _ = plan([], {**env, "RAY_ADDRESS": "10.0.0.1:6379"})
    added = [o for o in joined if o not in local]
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS='2'" in added
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH='{tmp_path / 'ck'}/metrics.jsonl'" in added
    variables = run_env_vars(cfg)
    assert variables["OMP_NUM_THREADS"] == "2" and variables["WANDB_MODE"] == "disabled"  # Ray takes strings only
    assert variables["VERL_PLATFORM"] == "cpu"  # the config's own runtime env: kept, not doubled
    assert sum("env_vars.VERL_PLATFORM=" in o for o in joined) == 1


def test_a_dry_run_says_what_the_node_checks_would_check(tmp_path, capsys):
    train = prepared(tmp_path / "train.parquet", ["/data/samples"])
    env = {**BASE_ENV, "DRY_RUN": "true", "TRAIN_FILE": str(train), "VAL_FILE": str(train), "CKPT_DIR": "/shared/ck"}
    assert main([], env) == 0
    assert "# nodes: a local Ray started by verl (no RAY_ADDRESS, trainer.nnodes=1): no node checks" in capsys.readouterr().out
    assert main(["trainer.nnodes=2"], {**env, "RAY_ADDRESS": "10.0.0.1:6379", "NODE_GPUS": "8"}) == 0
    out = capsys.readouterr().out
    assert "# nodes: before verl starts, a launch checks on every node of the Ray cluster" in out
    for line in ("would check  verl 0.9.0 with every patch of trainer/verl/patches in force",
                 f"would check  data.train_files: {train}", "would check  dataset named by "
                 f"{train}: /data/samples", "would check  the checkpoint directory shared"):
        assert line in out, line


def test_a_tmp_checkpoint_directory_on_a_running_cluster_is_left_to_the_marker(tmp_path, capsys):
    train = prepared(tmp_path / "train.parquet", ["/data/samples"])
    env = {**BASE_ENV, "DRY_RUN": "true", "TRAIN_FILE": str(train), "VAL_FILE": str(train), "CKPT_DIR": "/tmp/ck",
           "NODE_GPUS": "8"}
    assert main(["trainer.nnodes=2"], env) == 1  # no cluster to ask: refused as node-local
    assert "FAIL  checkpoint dir absolute and shared: trainer.default_local_dir=/tmp/ck is node-local" in capsys.readouterr().out
    assert main(["trainer.nnodes=2"], {**env, "RAY_ADDRESS": "10.0.0.1:6379"}) == 0
    assert "skip  checkpoint dir absolute and shared: trainer.default_local_dir=/tmp/ck: node-local on most clusters; " \
           "every node of RAY_ADDRESS reads a marker" in capsys.readouterr().out


def start_ray(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """scripts/start_ray.sh with a fake `ray` that records its arguments (no python beside it: the
    node checks run with the project's .venv/bin/python)."""
    fake = tmp_path / "bin" / "ray"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f'#!/usr/bin/env bash\necho "$@" > {tmp_path}/ran\n')
    fake.chmod(0o755)
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "RAY": str(fake), "GPUS_PER_NODE": "0",
            **env}
    return subprocess.run(["bash", str(ROOT / "scripts" / "start_ray.sh")], env=full, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="no .venv")
def test_start_ray_checks_its_node_first_and_a_worker_must_read_the_heads_marker(tmp_path):
    ck = tmp_path / "ck"
    worker = {"ROLE": "worker", "NODE_IP": "10.0.0.2", "HEAD_ADDRESS": "10.0.0.1:6379", "CKPT_DIR": str(ck)}
    dry = start_ray(tmp_path, **worker, DRY_RUN="true")
    assert dry.returncode == 0, dry.stderr
    assert "would check  verl 0.9.0 with every patch" in dry.stdout
    assert f"would check  CKPT_DIR shared with the head: its marker {ck}/.tbt-cluster-head is here" in dry.stdout
    r = start_ray(tmp_path, **worker)  # no head has written its marker there
    assert r.returncode == 1 and not (tmp_path / "ran").exists(), r.stdout + r.stderr
    assert "FAIL  node 10.0.0.2 (worker) ready: the checkpoint directory is not shared with the head" in r.stdout
    assert "start_ray.sh: node 10.0.0.2 not ready" in r.stderr and "NODE_CHECK=false" in r.stderr
    head = start_ray(tmp_path, ROLE="head", NODE_IP="10.0.0.1", CKPT_DIR=str(ck))
    assert head.returncode == 0, head.stdout + head.stderr
    assert "ok    node 10.0.0.1 (head) ready" in head.stdout and (ck / ".tbt-cluster-head").is_file()
    assert (tmp_path / "ran").read_text().split()[:2] == ["start", "--head"]
    r = start_ray(tmp_path, **worker)
    assert r.returncode == 0 and "checkpoint directory shared" in r.stdout, r.stdout + r.stderr
