"""The training launch: verl's own Hydra configuration composed offline, checked, then run.

    scripts/run_train.sh [overrides...]          (this module: python -m trainer.verl.launch)

1. Overrides, in order (later wins): the project config (`CONFIG`, default
   configs/train_single_node.yaml: dotted keys, `extends:` read first, `${env:NAME[,default]}`
   filled from the environment), the sampling config (configs/sampling.yaml, mapped onto
   `actor_rollout_ref.rollout.*` and `+thinkingbox.max_turn_tokens`: the one sampling config that
   training and evaluation share), then the command line (verl's syntax; new keys need `+`).
2. They are composed with verl 0.9.0's `ppo_trainer` config by Hydra's compose API, offline: a
   mistyped key fails here and is named; the legacy top-level `custom_reward_function.*` keys,
   which verl 0.9.0 silently ignores, are refused with the key to use instead.
3. Preflight (trainer/verl/preflight.py `preflight`), every rule checked and every problem named in one run: every
   `${env:NAME}` without a default that a surviving key needs is set (all of them listed at once;
   a command-line override of the key makes the variable unneeded); the input files exist (train
   and validation files, a local model path, the agent-loop config, a custom reward function's
   file; relative paths are read from the repository root, where the launch runs; a file under a
   directory the config's `prepare:` step is given is checked after that step); on several nodes
   the data and model paths are absolute; GPUs per node vs config (`NODE_GPUS`, else
   `nvidia-smi`), tensor / sequence parallel sizes divide the world, `train_batch_size x n`
   divides across ranks, one log-prob micro-batch size set (rollout and ref), the checkpoint
   directory absolute (and not node-local on several nodes); with `trainer.resume_mode=auto` and a
   `latest_checkpointed_iteration.txt` there, the step it names verified as `tbt checkpoint verify`
   does and saved on this run's world size (`resume_checks`); this node's NVIDIA driver new enough
   for the CUDA build of the installed torch (`NODE_DRIVER`, else `nvidia-smi`; skipped where
   neither says); the endpoint variables of openai:
   user / judge specs set (their values never printed); no `synthetic` judge (it answers Yes to
   every question) and no `scripted` user (the task's user context, no model) outside a smoke
   config: one whose top level says `smoke: true` (configs/cpu_smoke.yaml; inherited through
   `extends:`, read and removed by the launch, never passed to verl).
   Two kinds of check (`Check.site`): the *inputs of the launch site*, provided where and when the
   run is launched, not faults of the config (the variables set, every file exists, no scripted
   user / synthetic judge outside a smoke config, which a TBT_USER_SPEC / TBT_JUDGE_SPEC fixes,
   the endpoint variables, the checkpoint an automatic resume would load), and the *config checks*, everything else (the topology, the batch and
   micro-batch sizes, the checkpoint directory, absolute paths on several nodes, the fully-async
   checks): a config that can never run. A failed check is a `FAIL` line, except an input under
   `DRY_RUN=true`, a `need` line (point 6).
4. The patches of trainer/verl/patches: their state is printed; a real launch applies any that is
   not in force (trainer/verl/patching.py), so a re-sync that restored verl's stock files cannot
   make it train on unpatched verl.
5. A config may name `env:` (variables set for the run) and `prepare:` (argument lists run as
   `python ARGS` before it, e.g. building a local model: configs/cpu_smoke.yaml); both are printed.
   On a Ray cluster the launch did not start (`RAY_ADDRESS`, or `trainer.nnodes` > 1) the `env:`
   variables also go to every Ray worker, as `+ray_kwargs.ray_init.runtime_env.env_vars.NAME`
   overrides (`cluster_env`): those workers run in their node's `ray start` environment.
   Both add to those of the config it extends; `inherit_prepare: false` drops the inherited
   `prepare:` steps (configs/laptop_grpo.yaml: its model and pool are not the smoke's).
   `SKIP_PREPARE=true` says the caller ran them already (`tbt quickstart --train` does, to count
   the pool): they are printed as skipped and not run again; what they make is checked all the same.
   Its top-level `sampling: FILE` (read from the repository root; inherited through `extends:`)
   replaces configs/sampling.yaml as the sampling config of step 1 (configs/laptop_grpo.yaml:
   configs/sampling_laptop.yaml, which `tbt run --sampling` reads too).
   Its top-level `entrypoint:` picks verl's trainer (`ENTRIES`; inherited through `extends:`, read
   and removed by the launch): `ppo` (default: `verl.trainer.main_ppo`, the colocated synchronous
   trainer, composed from verl's `ppo_trainer` config) or `fully_async`
   (`verl.experimental.fully_async_policy.fully_async_main`, composed from its
   `fully_async_ppo_trainer` config: rollout and trainer on their own GPUs, `rollout.nnodes x
   rollout.n_gpus_per_node` and `trainer.nnodes x trainer.n_gpus_per_node`; configs/async_*.yaml).
   For it the GPU split is printed after the command, and the preflight checks the split (both
   pools' GPUs on each node, tensor parallel size in the rollout pool, the trainer's mini-batch
   across its ranks) and what verl's fully-async trainer asserts only after Ray is up, plus what
   our agent loop needs of it (`fully_async_checks`).
6. `DRY_RUN` (`dry_run`): empty, `false`, `0` or `no` is a real launch: any failed check is a `FAIL`
   line, then one `error:` line naming them all, exit 1; then the endpoints must answer, and the
   command runs against `RAY_ADDRESS`. `true` (`1`, `yes`): print the command (`python -m
   verl.trainer.main_ppo`, or the config's entrypoint) and every resolved override, one per line,
   secrets redacted, the preflight and the patches, and start nothing (no Ray, no GPU, no server,
   no model): a failed config check still fails it (`FAIL`, exit 1), a failed input of the launch
   site is a `need` line, and the run ends with `# DRY_RUN: nothing started (...)` and one
   `# a launch here would stop until: ...` line naming those inputs, exit 0. `strict`: the same
   dry run, failing (`FAIL`, exit 1, as a real launch) on every failed check, inputs included:
   the gate to run on the launch node just before launching. Any other value: exit 2, named.
   Where the gpu extra is installed (vLLM importable), `strict` also runs the rehearsal
   (trainer/verl/rehearsal.py, in a child process): the actor's model config and a tiny model of
   its architecture with the configured attention, the weight-sync backend, verl's vLLM server
   arguments through vLLM's parser, the compiled kernels the config names; its checks are printed
   after the preflight's and fail the run as they do. Without the gpu extra, or under `true`, a
   `# rehearsal: skipped (...)` line says why.
7. The node checks (trainer/verl/nodes.py), where the run goes to a Ray cluster the launch did not
   start (`RAY_ADDRESS` set, or `trainer.nnodes` > 1): after the prepare: steps, one Ray task on
   every alive node checks verl and its patches (each patched file as this node's), the process
   hooks, every input path (the prepared parquet's datasets too), the checkpoint directory shared
   (a marker written here, read there) and the user / judge endpoints from that node. A node that
   fails is a `FAIL` line naming it (IP and Ray node id), and nothing starts: exit 1. A dry run
   prints what would be checked.
8. Before verl starts, what it will replay is moved aside (trainer/verl/rollback.py): the records
   and metrics lines a killed attempt wrote for the steps after the one it resumes from go to
   `records/rolled_back/STAMP/` and `METRICS.rolled_back.jsonl` (fully-async: also the episodes
   of the prompts the checkpoint had in flight, which the rollouter plays again), and a torn last
   record line is cut, so a resumed run's files hold each step once. Printed as
   `# resume from step K: ...`.

Secrets: values of variables whose names hold KEY, TOKEN, SECRET or PASSWORD, and the user
info and query of every URL, never appear in the output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainer.core.redact import redact
from trainer.verl.config_read import plan
from trainer.verl.tracker import tracker_env
from trainer.verl.preflight import ROOT, Check, LaunchError, cfg_get, file_checks, gpu_split, on_cluster, openai_endpoints

UV_RAY_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"  # Ray's `uv run` runtime-env hook (main: off for the launch)


FALSE_WORDS, TRUE_WORDS = ("", "0", "false", "no"), ("1", "true", "yes")  # an environment switch's values
DRY_RUNS = {**dict.fromkeys(FALSE_WORDS),  # a real launch
            **dict.fromkeys(TRUE_WORDS, "true"),  # a dry run: inputs of the launch site may be missing
            "strict": "strict"}  # a dry run that fails on every failed check, those inputs included


def dry_run(env: Mapping[str, str]) -> str | None:
    """`DRY_RUN`: None (a real launch), "true" or "strict" (module docstring, point 6)."""
    value = env.get("DRY_RUN", "")
    if value.lower() not in DRY_RUNS:
        raise LaunchError(f"DRY_RUN={value}: expected true, strict or false")
    return DRY_RUNS[value.lower()]


def skip_prepare(env: Mapping[str, str]) -> bool:
    """`SKIP_PREPARE` (module docstring, point 5): true when the caller ran the prepare: steps."""
    value = env.get("SKIP_PREPARE", "")
    if value.lower() not in FALSE_WORDS + TRUE_WORDS:
        raise LaunchError(f"SKIP_PREPARE={value}: expected true or false")
    return value.lower() in TRUE_WORDS


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip() + "\n\nExamples: scripts/run_train.sh --help")
        return 0
    try:
        mode, skip = dry_run(env), skip_prepare(env)
        overrides, cfg, checks, extras = plan(argv, env)
    except LaunchError as e:
        print(redact(f"error: {e}", env, urls=True), file=sys.stderr)
        return 2
    lines = [f"python -m {extras.entry.module} \\"] + [f"    {o} \\" for o in overrides[:-1]] + [f"    {overrides[-1]}"]
    print(redact("\n".join(["# command", *lines]), env, urls=True))
    if extras.entry.split:
        print(redact(f"# GPUs (split): {gpu_split(cfg)}", env, urls=True))
    if extras.env or extras.prepare:
        print("# environment and preparation (the config's env: and prepare:)")
        for k, v in extras.env.items():
            print(redact(f"{k}={v}", {**env, **extras.env}, urls=True))
        for c in extras.prepare:
            print(redact("python " + " ".join(c) + ("   (skipped: SKIP_PREPARE, run by the caller)" if skip else ""), env, urls=True))
    dry, lenient = mode is not None, mode == "true"  # DRY_RUN=true: inputs of the launch site may be missing
    if not dry:
        checks = checks + this_node_checks(cfg, {**env, **tracker_env(cfg, env), **extras.env})
    print("# preflight")
    for c in checks:
        print(redact(c.line(lenient), env, urls=True))
    if dry:
        checks = checks + rehearsal(cfg, mode, {**env, **extras.env})
    needed = [c.brief or c.rule for c in checks if not c.ok and lenient and c.site]  # the `need` lines
    failed = [c.brief or c.rule for c in checks if not c.ok and not (lenient and c.site)]  # the `FAIL` lines
    if failed:
        also = f" (a launch here would also need: {'; '.join(needed)})" if needed else ""
        print(redact(f"error: preflight failed, {len(failed)} problem(s) (the FAIL lines above): "
                     + "; ".join(failed) + f"; nothing was started{also}", env, urls=True), file=sys.stderr)
        return 1
    from trainer.verl.patching import PatchError, apply_all, site_of_installed, states

    try:
        site = site_of_installed()
        print("# verl patches (trainer/verl/patches)" + ("" if dry else ": applied before launching"))
        for st in (states(site) if dry else apply_all(site)):
            note = "" if st.state == "applied" else "  (applied by the launch itself, or: python scripts/prepare_verl.py --install)"
            print(f"{st.state:<8}  {st.patch.path.name}{note}")
    except PatchError as e:
        print(f"error: verl: {e}", file=sys.stderr)
        return 2
    if dry:
        node_plan(cfg, env)
        print("# DRY_RUN: nothing started (no Ray, no GPU, no server, no model)")
        if needed:
            print(redact(f"# a launch here would stop until: {'; '.join(needed)} "
                         "(the need lines above; DRY_RUN=strict checks these too)", env, urls=True))
        return 0
    down = dead_endpoints(cfg)
    if down:
        print(redact("error: endpoint(s) not answering: " + "; ".join(down), env, urls=True), file=sys.stderr)
        return 1
    env.update({**tracker_env(cfg, env), **extras.env})  # wandb logs locally unless WANDB_MODE says otherwise
    # under `uv run` (`uv run tbt quickstart --train`), Ray's uv hook would rewrite verl's runtime
    # env to start every worker through `uv run` in a packaged working directory, and fails on the
    # working_dir verl leaves unset (TypeError: path_or_uri must be a string): the workers run
    # this interpreter, as they do under scripts/run_train.sh from a shell
    env.setdefault(UV_RAY_HOOK, "0")
    for c in [] if skip else extras.prepare:
        rc = subprocess.call([sys.executable, *c], env=env, cwd=str(ROOT))
        if rc != 0:
            print(f"error: prepare step failed (exit {rc}): python {' '.join(c)}", file=sys.stderr)
            return rc
    absent = [c for c in file_checks(cfg) if not c.ok]  # what the prepare steps were to make
    if absent:
        for c in absent:
            print(redact(c.line(), env, urls=True))
        print("error: the prepare: step did not make " + "; ".join(c.rule for c in absent), file=sys.stderr)
        return 1
    if node_checks(cfg, env):
        return 1
    roll_back_replayed(cfg, env)
    if env.get("VERL_FILE_LOGGER_PATH"):  # verl's file logger opens it without making its folder
        Path(env["VERL_FILE_LOGGER_PATH"]).parent.mkdir(parents=True, exist_ok=True)
    return subprocess.call([sys.executable, "-m", extras.entry.module, *overrides], env=env, cwd=str(ROOT))


def this_node_checks(cfg: Any, env: Mapping[str, str]) -> list[Check]:
    """A real launch whose run stays on this machine (verl starts its own Ray): what the config needs
    here (trainer/verl/node_needs.py: kernels, tracker, JIT tools, checkpoint space), one check
    naming the node and every problem, before anything starts. On a Ray cluster every node runs
    the same checks (node_checks)."""
    import socket

    from trainer.verl.node_needs import need_problems, needs_of
    if on_cluster(cfg, env):
        return []
    problems, notes = need_problems(needs_of(cfg), env)
    node = f"{socket.gethostname()} (this node)"
    return [Check(f"node {node} ready", not problems, "; ".join(problems) if problems else ", ".join(notes) or "nothing needed",
                  brief=f"node {node} not ready", site=True)]


def rehearsal(cfg: Any, mode: str, env: Mapping[str, str]) -> list[Check]:
    """The rehearsal's checks (module docstring, point 6), printed: run under DRY_RUN=strict where
    the gpu extra is installed; otherwise one line saying why not, and no checks."""
    from trainer.verl.rehearsal import gpu_extra_missing, run_isolated

    missing = gpu_extra_missing()
    if mode != "strict" or missing:
        print(f"# rehearsal: skipped ({missing or 'DRY_RUN=strict runs it'})")
        return []
    print("# rehearsal (trainer/verl/rehearsal.py): what a GPU start-up does first, run here without a GPU")
    checks = run_isolated(cfg, env)
    for c in checks:
        print(redact(c.line(), env, urls=True))
    return checks


def roll_back_replayed(cfg: Any, env: Mapping[str, str]) -> None:
    """Point 8: what the relaunch replays, moved aside (trainer/verl/rollback.py), printed."""
    from trainer.verl.rollback import inflight_groups, resumed_step, roll_back

    ckpt = str(cfg_get(cfg, "trainer.default_local_dir", "") or "")
    if not ckpt:
        return
    step = resumed_step(cfg, Path(ckpt))
    if step is None:
        print("# resume: the step resumed from is not known here: records and metrics left as they are")
        return
    records = None
    if cfg_get(cfg, "thinkingbox.records", True) is not False:
        records = Path(str(cfg_get(cfg, "thinkingbox.records_dir", None) or Path(ckpt) / "records"))
    metrics = Path(env["VERL_FILE_LOGGER_PATH"]) if env.get("VERL_FILE_LOGGER_PATH") else None
    done = roll_back(records, metrics, step, val_before_train=bool(cfg_get(cfg, "trainer.val_before_train", True)),
                     replayed_groups=inflight_groups(Path(ckpt), step))
    for line in done.lines():
        print(f"# resume from step {step}: {line}", flush=True)


def node_plan(cfg: Any, env: Mapping[str, str]) -> None:
    """DRY_RUN: what the node checks (point 7) would check on every node, where the run goes to a cluster."""
    from trainer.verl.nodes import describe, spec_of

    if not on_cluster(cfg, env):
        print("# nodes: a local Ray started by verl (no RAY_ADDRESS, trainer.nnodes=1): no node checks")
        return
    print("# nodes: before verl starts, a launch checks on every node of the Ray cluster (trainer/verl/nodes.py):")
    for line in describe(spec_of(cfg)):
        print(redact(f"would check  {line}", env, urls=True))


def node_checks(cfg: Any, env: Mapping[str, str]) -> bool:
    """The node checks (point 7) where the run goes to a cluster, printed; True when one failed."""
    from trainer.verl.nodes import cluster_checks

    if not on_cluster(cfg, env):
        return False
    print("# nodes: every node of the Ray cluster, before verl starts (trainer/verl/nodes.py)", flush=True)
    checks = cluster_checks(cfg, env)
    for c in checks:
        print(redact(c.line(), env, urls=True), flush=True)
    failed = [c.brief for c in checks if not c.ok]
    if failed:
        print(redact(f"error: {len(failed)} node(s) not ready (the FAIL lines above): {'; '.join(failed)}; "
                     "nothing was started", env, urls=True), file=sys.stderr)
    return bool(failed)


def dead_endpoints(cfg: Any, timeout: float = 5.0) -> list[str]:
    """The openai: user / judge endpoints that do not answer GET /models."""
    import httpx

    out = []
    for role, url, _ in openai_endpoints(cfg):
        try:
            httpx.get(url + "/models", timeout=timeout)
        except httpx.HTTPError as e:
            out.append(f"{role} {url}: {type(e).__name__}")
    return out


if __name__ == "__main__":
    sys.exit(main())
