"""Every node of a Ray cluster checked before a training step runs.

The launch (trainer/verl/launch.py) patches the verl of the machine it runs on and hands the run to
Ray; verl's TaskRunner, its FSDP ranks, rollout servers and agent-loop workers run on whatever node
Ray places them, each with that node's own environment and files. So before verl starts on a
cluster (`RAY_ADDRESS` set, or `trainer.nnodes` > 1), one Ray task pinned to each alive node
(`NodeAffinitySchedulingStrategy`, hard) runs `node_report` there, in that node's interpreter, and
the launch refuses the run, naming the node, unless each one has:

- **the same patched verl as the launch's**: verl 0.9.0 with every patch of trainer/verl/patches in
  force, and each patched file's SHA-256 equal to the launch node's (a node at another commit of
  this project, or with stock verl, differs);
- **the process hooks in force**: verl loaded trainer/verl/hooks.py through its `verl.plugins` entry
  point when it was imported there (a node where this project is not installed, or installed
  without its entry points, has not);
- **every input at its path**: the config's data files, model path, agent-loop config, and each
  dataset the prepared parquet names (`extra_info.dataset`: the agent loop reads its task there);
- **the checkpoint directory shared**: a marker file the launch writes there is read back on the
  node with its content (each rank writes its own shards, so identical node-local paths are not
  enough);
- **the user and judge endpoints answering from there**: GET /models through the node's own HTTP
  environment (its proxies too), as its agent loop will reach them;
- **what the config needs there** (trainer/verl/node_needs.py): its compiled kernels import, its
  tracker can start, ninja and nvcc are on the workers' PATH where vLLM JIT-compiles, and the
  checkpoint directory has room for the saves kept.

`scripts/start_ray.sh` runs the same checks on its own node before Ray starts there
(`python -m trainer.verl.node_check --role head|worker`, trainer/verl/node_check.py): the verl and hooks checks always; with `CONFIG`
set, the config's inputs and endpoints; with `CKPT_DIR` set, the head writes a marker the workers
must read. `DRY_RUN=true` prints what would be checked.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainer.verl.node_needs import Needs, need_problems, needs_of
from trainer.verl.node_needs import describe as describe_needs
from trainer.verl.preflight import Check, cfg_get, input_paths, local_path, openai_endpoints

HOOKS_MODULE = "trainer.verl.hooks"
HOOKS_MARK = "_thinkingbox_text_position_ids"  # hooks.MARK (not imported here: importing it installs the hook)
AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
HEAD_MARKER = ".tbt-cluster-head"  # start_ray.sh: the head's marker in CKPT_DIR, read by each worker
ANSWER_S = 300.0  # how long a node's check may take (it imports verl's agent loop: ~10 s on 2 cores)


@dataclass(frozen=True)
class NodeSpec:
    """What every node must hold: sent to each node's task."""

    paths: tuple[tuple[str, str], ...] = ()  # (what, path): relative paths are read from the node's checkout
    marker: str | None = None  # a file in the checkpoint directory the launch wrote ...
    token: str = ""  # ... holding this ("": its existence is enough)
    marker_by: str = "the launch node"  # who wrote it (start_ray.sh: the head)
    endpoints: tuple[tuple[str, str], ...] = ()  # (role, base URL of an OpenAI-compatible server)
    keys: tuple[tuple[str, str], ...] = ()  # (role, the variable its API key is read from on the node)
    needs: Needs = Needs()  # kernels, tracker, JIT tools, checkpoint space (trainer/verl/node_needs.py)


@dataclass
class NodeReport:
    node: str  # "IP (node id)": how the refusal names it
    python: str = sys.executable
    verl: str = ""  # the verl package's directory, or why none
    patched: dict[str, str] = field(default_factory=dict)  # patched file (relative) -> SHA-256
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was checked and held



def verl_problems(report: NodeReport) -> None:
    """verl 0.9.0 with every patch in force; the patched files' hashes recorded."""
    from trainer.verl.patching import PatchError, site_of_installed, states

    try:
        site = site_of_installed()
        report.verl = str(site / "verl")
        found = states(site)
    except PatchError as e:
        report.problems.append(f"verl: {e}")
        return
    stock = [s for s in found if s.state != "applied"]
    if stock:
        names = ", ".join(f"{s.patch.path.name.split('-')[0]} {s.state}" for s in stock)
        foreign = [s.detail for s in stock if s.state == "foreign"]
        report.problems.append(f"verl at {report.verl}: {len(stock)} of {len(found)} patches not in force ({names})"
                               + (f"; {'; '.join(foreign)}" if foreign else "")
                               + " (run on this node: python scripts/prepare_verl.py --install)")
    for s in found:
        target = site / s.patch.target
        if target.is_file():
            report.patched[s.patch.target] = hashlib.sha256(target.read_bytes()).hexdigest()
    if not stock:
        report.notes.append(f"verl at {report.verl}: {len(found)} patches in force")


def hooks_problems(report: NodeReport) -> None:
    """verl's plugin loader put trainer/verl/hooks.py in force when verl was imported here."""
    import importlib

    # a node's check runs in a fresh Ray worker (or start_ray.sh's python) that never imports the hooks
    # itself, so after `import verl` the module is there only if verl's plugin loader put it there;
    # a process that had imported it already (a test) is taken as it is
    already = HOOKS_MODULE in sys.modules
    try:
        importlib.import_module("verl")
        module = importlib.import_module(AGENT_LOOP)
    except Exception as e:  # noqa: BLE001 - the node's verl does not import: said, not raised
        report.problems.append(f"verl does not import here: {type(e).__name__}: {e}")
        return
    loaded_by_verl = already or HOOKS_MODULE in sys.modules
    marked = bool(getattr(module.AgentLoopWorker._compute_position_ids, HOOKS_MARK, False))
    if not (loaded_by_verl and marked):
        report.problems.append("the process hooks (trainer/verl/hooks.py) are not in force: verl loads them through "
                               "this project's `verl.plugins` entry point (run on this node: uv sync, so the project "
                               "and its entry points are installed in the environment Ray runs)")
    else:
        report.notes.append("hooks in force")


def path_problems(report: NodeReport, spec: NodeSpec) -> None:
    missing = [f"{what}: {path} does not exist here" for what, path in spec.paths if not local_path(path).exists()]
    report.problems += missing
    if spec.paths and not missing:
        report.notes.append(f"{len(spec.paths)} input paths")


def marker_problems(report: NodeReport, spec: NodeSpec) -> None:
    if not spec.marker:
        return
    try:
        ok = Path(spec.marker).read_text(encoding="utf-8").strip() == spec.token or not spec.token
    except OSError:
        ok = False
    if ok:
        report.notes.append("checkpoint directory shared")
    else:
        report.problems.append(f"the checkpoint directory is not shared with {spec.marker_by}: the marker "
                               f"{spec.marker} it wrote is not here (every rank writes its own shards there: mount "
                               "one shared filesystem at that path on every node, and start the head first)")


def endpoint_problems(endpoints: Sequence[tuple[str, str]], timeout: float = 5.0) -> list[str]:
    """The endpoints that do not answer GET /models from this process (its proxies included)."""
    import httpx

    out = []
    for role, url in endpoints:
        try:
            httpx.get(url.rstrip("/") + "/models", timeout=timeout)
        except httpx.HTTPError as e:
            out.append(f"{role} endpoint {url}: {type(e).__name__} from here (it must answer from every node)")
    return out


def node_name() -> str:
    """This process's node as the launch names it: its IP and Ray node id (the host name outside Ray)."""
    try:
        import ray

        if ray.is_initialized():
            return f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
    except Exception:  # noqa: BLE001
        pass
    return socket.gethostname()


def node_report(spec: NodeSpec, name: str | None = None) -> NodeReport:
    """Every check of the module docstring, run in this process on this node."""
    report = NodeReport(node=name or node_name())
    verl_problems(report)
    hooks_problems(report)
    path_problems(report, spec)
    marker_problems(report, spec)
    problems = endpoint_problems(spec.endpoints)
    problems += [f"{role} endpoint key: {var} is not set here (the agent loop on this node reads it: set it in the "
                 "environment this node's scripts/start_ray.sh runs in)" for role, var in spec.keys if not os.environ.get(var)]
    report.problems += problems
    if spec.endpoints and not problems:
        report.notes.append(" and ".join(role for role, _ in spec.endpoints) + " endpoint answering")
    needed, held = need_problems(spec.needs)
    report.problems += needed
    report.notes += held
    return report


def compare(report: NodeReport, reference: Mapping[str, str]) -> list[str]:
    """The patched files whose content differs from the launch node's."""
    out = []
    for target, sha in reference.items():
        have = report.patched.get(target)
        if have is not None and have != sha:
            out.append(f"{target} differs from the launch node's (sha256 {have[:12]} here, {sha[:12]} there: "
                       "another commit of this project or another verl; check out the launch node's commit and run "
                       "python scripts/prepare_verl.py --install)")
    return out


def checks(reports: Sequence[NodeReport], reference: Mapping[str, str]) -> list[Check]:
    out = []
    for r in reports:
        problems = r.problems + compare(r, reference)
        out.append(Check(f"node {r.node} ready", not problems,
                         "; ".join(problems) if problems else ", ".join(r.notes) + f" ({r.python})",
                         brief=f"node {r.node} not ready", site=True))
    return out


def spec_of(cfg: Any, marker: str | None = None, token: str = "") -> NodeSpec:
    """What a composed verl config needs on every node (module docstring)."""
    paths = [(k, p) for k, p in input_paths(cfg)]
    for key, p in list(paths):
        if key in ("data.train_files", "data.val_files") and p.endswith(".parquet") and local_path(p).is_file():
            paths += [(f"dataset named by {p}", d) for d in parquet_datasets(local_path(p))]
    found = openai_endpoints(cfg)
    return NodeSpec(paths=tuple(dict.fromkeys(paths)), marker=marker, token=token,
                    endpoints=tuple((role, url) for role, url, _ in found), keys=tuple((role, var) for role, _, var in found),
                    needs=needs_of(cfg))


def parquet_datasets(path: Path) -> list[str]:
    """The datasets a prepared parquet's rows name (`extra_info.dataset`)."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=["extra_info"])
    except Exception:  # noqa: BLE001 - not a prepared parquet: nothing named
        return []
    return sorted({row["dataset"] for row in table.column("extra_info").to_pylist() if row and row.get("dataset")})


def _remote_report(spec: NodeSpec) -> NodeReport:
    return node_report(spec)


def cluster_reports(spec: NodeSpec, address: str, timeout: float = ANSWER_S,
                    env_vars: Mapping[str, str] | None = None) -> list[NodeReport]:
    """`node_report` on every alive node of the cluster at `address`, each in a task pinned to it,
    with `env_vars` set as the run's `ray_kwargs.ray_init.runtime_env.env_vars` set them for verl's workers."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # the node's own interpreter, not `uv run`'s (launch.py)
    ray.init(address=address or "auto", log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": dict(env_vars)} if env_vars else None)
    try:
        task = ray.remote(num_cpus=0, max_retries=0)(_remote_report)
        nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeManagerAddress"])
        pending = {}
        for n in nodes:
            name = f"{n['NodeManagerAddress']} ({n['NodeID'][:8]})"
            strategy = NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
            pending[name] = task.options(scheduling_strategy=strategy).remote(spec)
        ready, _ = ray.wait(list(pending.values()), num_returns=len(pending), timeout=timeout)
        reports = []
        for name, ref in pending.items():
            if ref not in ready:
                reports.append(NodeReport(node=name, python="?", problems=[
                    f"its check did not answer within {timeout:.0f} s (is the node's raylet alive? ray status)"]))
                continue
            try:
                reports.append(ray.get(ref))
            except Exception as e:  # noqa: BLE001 - the check could not run there: the node is named
                last = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                reports.append(NodeReport(node=name, python="?", problems=[
                    f"the check could not run there ({last}): install this project on the node (uv sync) "
                    "and start its Ray from that environment (scripts/start_ray.sh)"]))
        return reports
    finally:
        ray.shutdown()


def cluster_checks(cfg: Any, env: Mapping[str, str]) -> list[Check]:
    """The launch's node checks: a marker in the checkpoint directory, a report from every node,
    each compared with this node's verl."""
    ckpt = str(cfg_get(cfg, "trainer.default_local_dir", "") or "")
    token = uuid.uuid4().hex
    marker = None
    if ckpt.startswith("/"):
        Path(ckpt).mkdir(parents=True, exist_ok=True)
        marker = str(Path(ckpt) / f".tbt-node-check-{token}")
        Path(marker).write_text(token, encoding="utf-8")
    try:
        spec = spec_of(cfg, marker, token)
        head = NodeReport(node="launch")
        verl_problems(head)
        reports = cluster_reports(spec, env.get("RAY_ADDRESS", ""), env_vars=run_env_vars(cfg))
    finally:
        if marker:
            Path(marker).unlink(missing_ok=True)
    return checks(reports, head.patched)


def run_env_vars(cfg: Any) -> dict[str, str]:
    """The variables the run gives every Ray worker (`ray_kwargs.ray_init.runtime_env.env_vars`)."""
    from omegaconf import OmegaConf

    found = cfg_get(cfg, "ray_kwargs.ray_init.runtime_env.env_vars")
    if found is None:
        return {}
    return {str(k): str(v) for k, v in OmegaConf.to_container(found, resolve=True).items() if v is not None}


def describe(spec: NodeSpec) -> list[str]:
    """What the node checks would check (DRY_RUN: no cluster is asked)."""
    lines = ["verl 0.9.0 with every patch of trainer/verl/patches in force, each patched file as the launch node's",
             "the process hooks in force (trainer/verl/hooks.py, loaded by verl's plugin loader)"]
    lines += [f"{what}: {path}" for what, path in spec.paths]
    lines.append("the checkpoint directory shared: a marker the launch writes there is read on the node")
    lines += [f"{role} endpoint {url} answers GET /models from the node" for role, url in spec.endpoints]
    lines += [f"{role} endpoint key {var} set on the node" for role, var in spec.keys]
    return lines + describe_needs(spec.needs)


__all__ = ["ANSWER_S", "checks", "cluster_checks", "cluster_reports", "compare", "describe", "endpoint_problems",
           "node_report", "NodeReport", "NodeSpec", "parquet_datasets", "run_env_vars", "spec_of"]
