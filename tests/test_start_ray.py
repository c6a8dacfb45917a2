"""scripts/start_ray.sh: the `ray start` command it renders for a head and a worker, every bad
variable refused by name, and one real head on 127.0.0.1 with a faked GPU count.

The real head is stopped by process id, not with `ray stop`, which kills every Ray process of the
user on the machine (other people's test clusters included): the script runs in a session of its
own, Ray's daemons stay in it, and the test ends exactly that session's processes.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "start_ray.sh"
RAY = ROOT / ".venv" / "bin" / "ray"


def start_ray(env: dict[str, str], *args: str, dry_run: bool = True) -> subprocess.CompletedProcess:
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env}
    if dry_run:
        full["DRY_RUN"] = "true"
    return subprocess.run(["bash", str(SCRIPT), *args], env=full, capture_output=True, text=True, timeout=60)


def rendered(env: dict[str, str], *args: str) -> list[str]:
    """The `ray start` arguments of a dry run (after the ray executable)."""
    r = start_ray(env, *args)
    assert r.returncode == 0, r.stderr
    argv = shlex.split(r.stdout.splitlines()[-1])  # after the node checks it would run
    assert Path(argv[0]).name == "ray", argv
    return argv[1:]


def test_script_parses_and_is_strict():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    assert "set -euo pipefail" in SCRIPT.read_text()
    assert os.access(SCRIPT, os.X_OK)


def test_head_dry_run():
    argv = rendered({"ROLE": "head", "NODE_IP": "10.0.0.1", "GPUS_PER_NODE": "8"})
    assert argv == ["start", "--head", "--node-ip-address", "10.0.0.1", "--port", "6379", "--num-gpus", "8",
                    "--dashboard-host", "10.0.0.1", "--dashboard-port", "8265"]
    assert "0.0.0.0" not in argv  # the dashboard on the node's address, not every interface


def test_head_dry_run_with_ports_dashboard_host_and_extra_arguments():
    argv = rendered({"ROLE": "head", "NODE_IP": "10.0.0.1", "GPUS_PER_NODE": "4", "RAY_PORT": "7000",
                     "DASHBOARD_PORT": "9000", "DASHBOARD_HOST": "0.0.0.0"}, "--temp-dir", "/scratch/ray", "--block")
    assert argv == ["start", "--head", "--node-ip-address", "10.0.0.1", "--port", "7000", "--num-gpus", "4",
                    "--dashboard-host", "0.0.0.0", "--dashboard-port", "9000", "--temp-dir", "/scratch/ray", "--block"]


@pytest.mark.parametrize("head", ["10.0.0.1:6379", "head-0.cluster.local:6380", "[fd00::1]:6379"])
def test_worker_dry_run(head):
    argv = rendered({"ROLE": "worker", "NODE_IP": "10.0.0.2", "HEAD_ADDRESS": head, "GPUS_PER_NODE": "8"})
    assert argv == ["start", "--address", head, "--node-ip-address", "10.0.0.2", "--num-gpus", "8"]
    assert "--head" not in argv and "--dashboard-host" not in argv


def test_without_gpus_per_node_ray_detects_them():
    r = start_ray({"ROLE": "worker", "NODE_IP": "fd00::2", "HEAD_ADDRESS": "10.0.0.1:6379"})
    assert r.returncode == 0 and "--num-gpus" not in r.stdout, r.stdout
    assert "GPUS_PER_NODE is not set: Ray detects" in r.stderr


def test_dry_run_starts_nothing_and_a_run_execs_ray(tmp_path):
    fake = tmp_path / "ray"
    fake.write_text(f'#!/usr/bin/env bash\necho "$@" > {tmp_path}/ran\n')
    fake.chmod(0o755)
    env = {"ROLE": "worker", "NODE_IP": "10.0.0.2", "HEAD_ADDRESS": "10.0.0.1:6379", "GPUS_PER_NODE": "0",
           "RAY": str(fake), "NODE_CHECK": "false"}  # the node checks: test_node_checks_before_ray_starts
    r = start_ray(env)
    assert r.returncode == 0 and shlex.split(r.stdout)[0] == str(fake) and not (tmp_path / "ran").exists()
    r = start_ray({**env, "DRY_RUN": "false"}, dry_run=False)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ran").read_text().split() == ["start", "--address", "10.0.0.1:6379", "--node-ip-address",
                                                      "10.0.0.2", "--num-gpus", "0"]
    r = start_ray({**env, "RAY": str(tmp_path / "nothing")}, dry_run=False)
    assert r.returncode == 2 and "RAY=" in r.stderr and "no such executable" in r.stderr


HEAD = {"ROLE": "head", "NODE_IP": "10.0.0.1", "GPUS_PER_NODE": "8"}
WORKER = {"ROLE": "worker", "NODE_IP": "10.0.0.2", "HEAD_ADDRESS": "10.0.0.1:6379", "GPUS_PER_NODE": "8"}
BAD = [  # (variables, the message)
    ({"NODE_IP": "10.0.0.1"}, "ROLE is not set"),
    ({**HEAD, "ROLE": "leader"}, "ROLE=leader: must be head or worker"),
    ({"ROLE": "head"}, "NODE_IP is not set"),
    ({**HEAD, "NODE_IP": "10.0.0.256"}, "NODE_IP=10.0.0.256: not an IPv4 or IPv6 address"),
    ({**HEAD, "NODE_IP": "node-1"}, "NODE_IP=node-1: not an IPv4 or IPv6 address"),
    ({**HEAD, "NODE_IP": "10.0.0"}, "NODE_IP=10.0.0: not an IPv4 or IPv6 address"),
    ({**HEAD, "NODE_IP": "fd00:::1"}, "NODE_IP=fd00:::1: not an IPv4 or IPv6 address"),
    ({**HEAD, "GPUS_PER_NODE": "-1"}, "GPUS_PER_NODE=-1: not a non-negative integer"),
    ({**HEAD, "GPUS_PER_NODE": "eight"}, "GPUS_PER_NODE=eight: not a non-negative integer"),
    ({**WORKER, "GPUS_PER_NODE": "2.5"}, "GPUS_PER_NODE=2.5: not a non-negative integer"),
    ({**HEAD, "RAY_PORT": "65536"}, "RAY_PORT=65536: not a port number (1-65535)"),
    ({**HEAD, "RAY_PORT": "0"}, "RAY_PORT=0: not a port number"),
    ({**HEAD, "DASHBOARD_PORT": "http"}, "DASHBOARD_PORT=http: not a port number"),
    ({**HEAD, "DASHBOARD_PORT": "6379"}, "RAY_PORT=6379 and DASHBOARD_PORT=6379: the same port"),
    ({**HEAD, "DASHBOARD_HOST": "everywhere"}, "DASHBOARD_HOST=everywhere: not an IPv4 or IPv6 address"),
    ({**WORKER, "HEAD_ADDRESS": ""}, "HEAD_ADDRESS is not set"),
    ({**WORKER, "HEAD_ADDRESS": "10.0.0.1"}, "HEAD_ADDRESS=10.0.0.1: not host:port"),
    ({**WORKER, "HEAD_ADDRESS": "10.0.0.1:port"}, "HEAD_ADDRESS=10.0.0.1:port: 'port' is not a port number"),
    ({**WORKER, "HEAD_ADDRESS": "10.0.0.1:99999"}, "HEAD_ADDRESS=10.0.0.1:99999: '99999' is not a port number"),
    ({**WORKER, "HEAD_ADDRESS": ":6379"}, "HEAD_ADDRESS=:6379: '' is not an IP address or host name"),
    ({**WORKER, "HEAD_ADDRESS": "10.0.0.300:6379"}, "'10.0.0.300' is not an IP address or host name"),
    ({**WORKER, "HEAD_ADDRESS": "bad_host!:6379"}, "'bad_host!' is not an IP address or host name"),
    ({**WORKER, "HEAD_ADDRESS": "fd00::1:6379"}, "write an IPv6 head as [address]:port"),
    ({**WORKER, "DRY_RUN": "maybe"}, "DRY_RUN=maybe: must be true or false"),
]


@pytest.mark.parametrize("env,message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_variable_is_named_and_exits_2(env, message):
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ["PATH"], "DRY_RUN": "true", **env})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert r.stdout == ""  # nothing rendered, nothing run


# ---------------------------------------------------------------------------- one real head

def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def session_pids(sid: int) -> list[int]:
    """Processes of session `sid` (field 6 of /proc/PID/stat, after the command name)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


def end_session(sid: int, grace: float = 3.0) -> list[int]:
    """SIGTERM, then SIGKILL after `grace` seconds, every process of session `sid`; what is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in session_pids(sid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while session_pids(sid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not session_pids(sid):
            return []
    return session_pids(sid)


@pytest.mark.engine
@pytest.mark.skipif(not RAY.exists(), reason="no .venv/bin/ray")
def test_a_real_head_with_faked_gpus():
    gcs, dashboard, *more = free_ports(9)
    temp = tempfile.mkdtemp(prefix="tbtray", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "ROLE": "head", "NODE_IP": "127.0.0.1",
           "GPUS_PER_NODE": "2", "RAY_PORT": str(gcs), "DASHBOARD_PORT": str(dashboard),
           "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    extra = ["--temp-dir", temp, "--num-cpus", "1", "--disable-usage-stats", "--include-log-monitor", "false"]
    for flag, port in zip(("--ray-client-server-port", "--node-manager-port", "--object-manager-port",
                           "--metrics-export-port", "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                           "--runtime-env-agent-port"), more):
        extra += [flag, str(port)]
    proc = subprocess.Popen(["bash", str(SCRIPT), *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    sid = proc.pid  # a session of its own: its id is the script's pid, and every Ray daemon stays in it
    try:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out[-3000:]
        deadline = time.monotonic() + 40
        while True:  # the autoscaler's status comes a few seconds after `ray start` returns
            status = subprocess.run([str(RAY), "status", "--address", f"127.0.0.1:{gcs}"], env=env,
                                    capture_output=True, text=True, timeout=60)
            assert status.returncode == 0, status.stdout + status.stderr
            if "No cluster status" not in status.stdout or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert "0.0/2.0 GPU" in status.stdout, status.stdout
        dash = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in session_pids(sid)]
        dash = [[a.decode() for a in argv] for argv in dash if any(a.endswith(b"dashboard/dashboard.py") for a in argv)]
        assert dash and "--host=127.0.0.1" in dash[0] and f"--port={dashboard}" in dash[0], dash
    finally:
        if proc.poll() is None:
            proc.kill()
        left = end_session(sid)
        shutil.rmtree(temp, ignore_errors=True)
    assert left == [], f"Ray processes left running: {left}"


def test_rays_workers_get_the_environments_bin_and_the_cuda_toolkit_on_path(tmp_path):
    """`ray start` runs with the environment's bin/ (ninja) and $CUDA_HOME/bin (nvcc) first on PATH,
    the PATH every worker of the node inherits (vLLM's FlashInfer JIT runs both there)."""
    env_bin, cuda = tmp_path / "env" / "bin", tmp_path / "cuda"
    env_bin.mkdir(parents=True)
    (cuda / "bin").mkdir(parents=True)
    (env_bin / "ray").write_text('#!/bin/sh\necho "$PATH" > "$SEEN"\n')
    (env_bin / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(os.path.realpath(sys.executable))} "$@"\n')
    for f in ("ray", "python"):
        (env_bin / f).chmod(0o755)
    r = start_ray({"ROLE": "head", "NODE_IP": "127.0.0.1", "GPUS_PER_NODE": "0", "RAY": str(env_bin / "ray"),
                   "NODE_CHECK": "false", "CUDA_HOME": str(cuda), "SEEN": str(tmp_path / "seen")}, dry_run=False)
    assert r.returncode == 0, r.stderr
    path = (tmp_path / "seen").read_text().strip().split(":")
    assert path[:2] == [str(env_bin), str(cuda / "bin")] and path[2:] == os.environ["PATH"].split(":")
