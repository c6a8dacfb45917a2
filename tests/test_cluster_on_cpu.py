"""Three Ray nodes on one machine train for real, and a node that is not ready is refused by name.

A head (127.0.0.1) and two workers (127.0.0.2, 127.0.0.3) are started by scripts/start_ray.sh
(ROLE=head|worker), each with its own ports, temp dir and session, one logical GPU slot each; Ray
tells them apart by node id (it reports the head at the host's own address: it resolves 127.0.0.1
to it). Loopback addresses are distinct interfaces to Ray, so each node has its own raylet, object
store and workers, as on three machines; what they share is the filesystem (SMOKE_DIR, CKPT_DIR).

1. configs/cpu_cluster_smoke.yaml against RAY_ADDRESS: the node checks pass on all three, one FSDP
   rank and one rollout replica on each node (gloo between the ranks), one step, a checkpoint of
   three shards; a second launch resumes it and runs step 2.
2. A shard of that checkpoint deleted: the next launch is refused at resume, naming the shard.
3. Worker 127.0.0.2 restarted from a second environment with stock verl (`uv sync` of the same
   lock into another directory, no patches): start_ray.sh refuses to start it, naming the node;
   started anyway (NODE_CHECK=false), the launch refuses the run before any rollout, naming it.
   Worker 127.0.0.3 restarted with a dead proxy for HTTP (ALL_PROXY: what httpx, the episodes'
   client, honours; Ray's own gRPC does not read it) and without the wandb key the head has: a
   user endpoint on 127.0.0.1 answers the head but not that node, and that launch, logging to
   wandb online, names both of its problems too. (The nodes share one network namespace, so the
   route only the head has is made with the node's HTTP environment.)

Nodes are stopped by session, never `ray stop` (which ends every Ray on the machine).

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_cluster_on_cpu.py     (~6 min on 2 cores)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from fakes import Endpoint
from test_start_ray import end_session, free_ports
from trainer.verl import checkpoint as ck

ROOT = Path(__file__).resolve().parents[1]
RAY = ROOT / ".venv" / "bin" / "ray"
pytestmark = [pytest.mark.engine, pytest.mark.timeout(2400)]
BASE = {k: v for k, v in os.environ.items()
        if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH",
                             "RAY_ADDRESS", "SMOKE_", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy",
                             "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "WANDB_", "NETRC"))}
BASE.update({"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_USAGE_STATS_ENABLED": "0", "TBT_USER_API_KEY": "EMPTY",
             "NETRC": "/nonexistent/netrc"})  # no wandb key from this machine's ~/.netrc
WANDB_KEY = {"WANDB_API_KEY": "test-key-never-used"}  # the head's and 127.0.0.2's: wandb could start there
PORT_FLAGS = ("--node-manager-port", "--object-manager-port", "--metrics-export-port", "--dashboard-agent-listen-port",
              "--dashboard-agent-grpc-port", "--runtime-env-agent-port")


class Cluster:
    def __init__(self, work: Path):
        self.work, self.sessions, self.temps = work, {}, []
        self.gcs, self.client = free_ports(2)
        self.address = f"127.0.0.1:{self.gcs}"

    def start(self, ip: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """scripts/start_ray.sh for the node at `ip` (the head at 127.0.0.1), in a session of its own."""
        temp = tempfile.mkdtemp(prefix="tbtc", dir="/tmp")  # short: Ray's socket paths fit in 107 bytes
        self.temps.append(temp)
        full = {**BASE, "NODE_IP": ip, "GPUS_PER_NODE": "1", "CKPT_DIR": str(self.work / "checkpoints"), **(env or {})}
        args = ["--num-cpus", "8", "--temp-dir", temp, "--disable-usage-stats"]
        for flag, port in zip(PORT_FLAGS, free_ports(len(PORT_FLAGS))):
            args += [flag, str(port)]
        if ip == "127.0.0.1":
            full.update({"ROLE": "head", "RAY_PORT": str(self.gcs)})
            args += ["--include-dashboard", "false", "--ray-client-server-port", str(self.client)]
        else:
            full.update({"ROLE": "worker", "HEAD_ADDRESS": self.address})
        proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "start_ray.sh"), *args], env=full, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        out, _ = proc.communicate(timeout=300)
        if proc.returncode == 0:
            self.sessions[ip] = proc.pid  # its session: every Ray daemon of the node stays in it
        else:
            end_session(proc.pid)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")

    def stop(self, ip: str) -> None:
        assert end_session(self.sessions.pop(ip)) == [], f"Ray processes of {ip} left running"

    def nodes(self) -> int:
        """The cluster's alive nodes, as Ray's GCS counts them (the state CLI needs the dashboard)."""
        count = subprocess.run([str(RAY.parent / "python"), "-c", "import ray, sys; ray.init(address=sys.argv[1], "
                                "logging_level='ERROR'); print(sum(n['Alive'] for n in ray.nodes()))", self.address],
                               env=BASE, capture_output=True, text=True, timeout=120)
        assert count.returncode == 0, count.stderr[-2000:]
        return int(count.stdout.split()[-1])

    def close(self) -> None:
        for ip in [ip for ip in self.sessions if ip != "127.0.0.1"] + ["127.0.0.1"]:
            if ip in self.sessions:
                end_session(self.sessions.pop(ip))
        for temp in self.temps:
            shutil.rmtree(temp, ignore_errors=True)

    def launch(self, log: str, *overrides: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        full = {**BASE, "CONFIG": "configs/cpu_cluster_smoke.yaml", "RAY_ADDRESS": self.address,
                "SMOKE_DIR": str(self.work / "smoke"), "CKPT_DIR": str(self.work / "checkpoints"), **(env or {})}
        with open(self.work / log, "w") as f:
            rc = subprocess.call(["nice", "-n", "10", "./scripts/run_train.sh", *overrides], cwd=ROOT, env=full,
                                 stdout=f, stderr=subprocess.STDOUT, timeout=1500)
        return rc, (self.work / log).read_text()


def placed(log: str, actor: str) -> set[str]:
    """The nodes Ray's log prefixes put `actor`'s processes on ("head": no ip= label, the driver's node)."""
    return {m.group(2) or "head" for m in re.finditer(rf"\({actor} pid=(\d+)(?:, ip=([\d.]+))?\)", log)}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    if os.environ.get("TBT_CPU_SMOKE") != "1":
        pytest.skip("the three-node cluster runs only with TBT_CPU_SMOKE=1 (~6 min on 2 cores)")
    if not RAY.exists() or not shutil.which("uv"):
        pytest.skip("needs .venv/bin/ray and uv")
    work = tmp_path_factory.mktemp("cluster")
    cluster, out = Cluster(work), {"work": work}
    try:
        out["starts"] = [cluster.start(ip, WANDB_KEY if ip != "127.0.0.3" else {})
                         for ip in ("127.0.0.1", "127.0.0.2", "127.0.0.3")]
        assert all(r.returncode == 0 for r in out["starts"]), [r.stdout[-3000:] for r in out["starts"]]
        out["nodes"] = cluster.nodes()
        out["first"] = cluster.launch("first.log")
        assert out["first"][0] == 0, out["first"][1][-6000:]
        out["resume"] = cluster.launch("resume.log", "trainer.total_training_steps=2")
        assert out["resume"][0] == 0, out["resume"][1][-6000:]
        out["metrics"] = [json.loads(x)["step"] for x in (work / "checkpoints" / "metrics.jsonl").read_text().splitlines()
                          if x.strip()]
        out["verify"] = ck.verify(work / "checkpoints", [1, 2])

        shard = work / "checkpoints" / "global_step_2" / "actor" / "optim_world_size_3_rank_2.pt"
        kept = shard.with_suffix(".kept")
        shard.rename(kept)
        out["missing_shard"] = cluster.launch("missing_shard.log", "trainer.total_training_steps=3")
        kept.rename(shard)

        # worker 127.0.0.2 from an environment with stock verl; worker 127.0.0.3 behind a dead proxy
        stock = work / "stock-env"
        made = subprocess.run(["uv", "sync", "--frozen", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=900,
                              env={**BASE, "UV_PROJECT_ENVIRONMENT": str(stock)})
        assert made.returncode == 0, made.stderr[-3000:]
        cluster.stop("127.0.0.2")
        cluster.stop("127.0.0.3")
        out["stock_start"] = cluster.start("127.0.0.2", {"RAY": str(stock / "bin" / "ray"), **WANDB_KEY})
        out["nodes_after_refusal"] = cluster.nodes()
        forced = cluster.start("127.0.0.2", {"RAY": str(stock / "bin" / "ray"), "NODE_CHECK": "false", **WANDB_KEY})
        assert forced.returncode == 0, forced.stdout[-3000:]
        dead = free_ports(1)[0]  # nothing listens there
        proxied = cluster.start("127.0.0.3", {"ALL_PROXY": f"http://127.0.0.1:{dead}"})
        assert proxied.returncode == 0, proxied.stdout[-3000:]
        out["nodes_before_refusal"] = cluster.nodes()
        user = Endpoint(lambda path, body: (200, {}))
        try:
            out["user_url"] = user.url
            out["refused"] = cluster.launch("refused.log", "trainer.total_training_steps=3", "trainer.logger=[console,wandb]",
                                            env={"TBT_USER_SPEC": f"openai:{user.url}#tiny", "WANDB_MODE": "online"})
        finally:
            user.stop()
        return out
    finally:
        cluster.close()


def test_three_nodes_start_each_checked_and_ray_tells_them_apart(run):
    head, *workers = run["starts"]
    assert "ok    node 127.0.0.1 (head) ready" in head.stdout, head.stdout[-2000:]
    for ip, r in zip(("127.0.0.2", "127.0.0.3"), workers):
        assert f"ok    node {ip} (worker) ready" in r.stdout and "checkpoint directory shared" in r.stdout, r.stdout[-2000:]
    assert run["nodes"] == 3


def test_one_step_on_three_nodes_one_rank_and_one_replica_each(run):
    rc, log = run["first"]
    ready = re.findall(r"^ok    node (\S+) \((\w{8})\) ready: .*\d+ patches in force, hooks in force, \d+ input paths, "
                       r"checkpoint directory shared", log, re.M)
    assert len({node_id for _, node_id in ready}) == 3, log[:8000]
    assert {"127.0.0.2", "127.0.0.3"} <= {ip for ip, _ in ready}
    assert placed(log, "WorkerDict") == {"head", "127.0.0.2", "127.0.0.3"}  # an FSDP rank on each node
    assert placed(log, "HFTokenServer") == {"head", "127.0.0.2", "127.0.0.3"}  # a rollout replica on each
    step1 = run["verify"].steps[0]
    assert step1.step == 1 and not step1.problems and step1.world_size == 3, step1
    records = (run["work"] / "checkpoints" / "records" / "step_1.jsonl").read_text().splitlines()
    assert len(records) == 6  # 3 prompts x 2 episodes
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=" in log  # the config's env: reaches every node


def test_the_second_launch_resumes_and_runs_step_2(run):
    rc, log = run["resume"]
    assert "global_step_1" in log and run["metrics"] == [1, 2], run["metrics"]
    assert not run["verify"].problems and [s.world_size for s in run["verify"].steps] == [3, 3]


def test_a_checkpoint_missing_a_rank_shard_is_refused_at_resume_naming_it(run):
    rc, log = run["missing_shard"]
    assert rc == 1, log[-3000:]
    assert re.search(r"FAIL  resume checkpoint verified .*global_step_2/actor/optim_world_size_3_rank_2\.pt: missing "
                     r"\(rank 2 of 3\)", log), log[-3000:]
    assert "TaskRunner" not in log and not (run["work"] / "checkpoints" / "global_step_3").exists()


def test_start_ray_refuses_a_node_with_stock_verl_by_name(run):
    r = run["stock_start"]
    assert r.returncode == 1, r.stdout[-3000:]
    assert "FAIL  node 127.0.0.2 (worker) ready: verl at " in r.stdout and "patches not in force" in r.stdout
    assert "start_ray.sh: node 127.0.0.2 not ready" in r.stdout
    assert run["nodes_after_refusal"] == 1  # the head only: Ray was not started there


def test_the_launch_refuses_unready_nodes_by_name_before_any_rollout(run):
    rc, log = run["refused"]
    assert run["nodes_before_refusal"] == 3
    assert rc == 1, log[-4000:]
    stock = re.search(r"^FAIL  node 127\.0\.0\.2 \(\w{8}\) ready: verl at \S+stock-env\S+: (\d+) of \1 patches not in force",
                      log, re.M)
    assert stock, log[-4000:]
    endpoint = re.search(rf"^FAIL  node 127\.0\.0\.3 \(\w{{8}}\) ready: user endpoint {re.escape(run['user_url'])}: "
                         r"\w+ from here.*; tracker: trainer.logger has wandb, WANDB_MODE is online here and no wandb key "
                         r"is here", log, re.M)
    assert endpoint, log[-4000:]
    head = [line for line in log.splitlines() if line.startswith("ok    node ")]
    assert len(head) == 1 and "user endpoint answering" in head[0] and "wandb online with a key" in head[0], head
    assert "test-key-never-used" not in log
    assert "error: 2 node(s) not ready" in log
    assert "TaskRunner" not in log and not (run["work"] / "checkpoints" / "global_step_3").exists()
