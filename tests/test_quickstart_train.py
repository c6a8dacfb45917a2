"""`tbt quickstart --train` (trainer/quickstart_train_cli.py, its plan and stage runner
trainer/verl/quickstart_train.py): the learning loop's stages run the real
commands in order, each with its log; a failing stage stops the run with its exit code and the
end of its log; a rerun keeps what is done. The whole loop (warm start, evaluations, one GRPO step
through verl's trainer, merge, compare, report: ~20 min on 2 cores) runs with TBT_CPU_SMOKE=1."""

import json
import os
import sys

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.quickstart_train_cli import train_loop, verdict
from trainer.verl.quickstart_train import CONFIG, ROOT, Runner, StageError, TrainPlan, pool_tasks


def test_a_failing_stage_stops_with_its_exit_code_and_the_end_of_its_log(tmp_path):
    said = []
    run = Runner(TrainPlan(out=tmp_path), said.append)
    with pytest.raises(StageError) as e:
        run.stage(2, "base evaluation", [sys.executable, "-c", "import sys; print('line one'); print('it broke'); sys.exit(3)"])
    assert e.value.code == 3
    log = tmp_path / "logs" / "2-base-evaluation.log"
    assert "base evaluation failed (exit 3)" in str(e.value) and str(log) in str(e.value) and "it broke" in str(e.value)
    assert "it broke" in log.read_text()
    assert said[0].startswith("[2/6] base evaluation: ")


def test_a_run_started_from_an_unfinished_one_stops_naming_what_is_missing(tmp_path):
    """TrainPlan.start (a control beside its GRPO run) needs that run's warm start and base
    evaluation; without them the loop stops before any stage, naming the directory and the files."""
    src = tmp_path / "grpo"
    (src / "warm").mkdir(parents=True)
    (src / "base.agg.json").write_text("{}")
    said = []
    with pytest.raises(StageError) as e:
        train_loop(TrainPlan(out=tmp_path / "control", control=True, start=src), said.append)
    assert str(src) in str(e.value) and "warm/config.json" in str(e.value) and e.value.code == 2
    assert said == [] and not (tmp_path / "control" / "warm").exists()


def test_the_summary_carries_compares_one_verdict():
    """The JSON line's change is `tbt compare`'s verdict (trainer/eval/compare.py `change`), not a
    second reading of it: the same delta, interval and distinguishable, with its method and pairing."""
    res = CliRunner().invoke(app, ["compare", "tests/fixtures/eval/base.agg.json", "tests/fixtures/eval/candidate.agg.json",
                                   "--json"])
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    s = verdict(cmp)
    ch = cmp["change"]
    assert s == {"base_pass_at_1": 28 / 60, "trained_pass_at_1": 37 / 60, "delta": ch["delta"],
                 "delta_interval": ch["delta_interval"], "distinguishable": ch["distinguishable"],
                 "method": "sign-flip", "pairing": "task", "tasks": 12, "coverage_warning": ch["coverage_warning"]}
    lo, hi = s["delta_interval"]
    assert s["distinguishable"] is False and lo <= 0 <= hi  # one verdict: the interval and the call agree


def test_a_tbt_stage_is_said_as_the_user_types_it_and_logged_as_it_runs(tmp_path):
    """The stages run this interpreter's trainer.cli (a process each, from the command line's layer:
    trainer/quickstart_train_cli.py); the progress shows the `tbt ...` a user types."""
    from trainer.quickstart_train_cli import shown, tbt

    cmd = tbt("eval", tmp_path / "d", "-n", 2)
    assert cmd == [sys.executable, "-m", "trainer.cli", "eval", str(tmp_path / "d"), "-n", "2"]
    assert shown(cmd) == ["tbt", "eval", str(tmp_path / "d"), "-n", "2"]
    said = []
    Runner(TrainPlan(out=tmp_path), said.append).stage(1, "warm start", [sys.executable, "-c", "print('ok')"],
                                                      shown=["tbt", "warm-start", "X"])
    log = tmp_path / "logs" / "1-warm-start.log"
    assert said[0] == f"[1/6] warm start: tbt warm-start X  (log {log})"
    assert f"{sys.executable} -c print('ok')" in log.read_text().splitlines()[0]


def test_a_stage_that_passes_is_timed_and_said_done(tmp_path):
    said = []
    run = Runner(TrainPlan(out=tmp_path), said.append)
    run.stage(5, "trained evaluation", [sys.executable, "-c", "print('fine')"])
    assert run.seconds["trained evaluation"] >= 0 and said[-1].startswith("[5/6] trained evaluation: done in")
    run.stage(5, "trained evaluation", [sys.executable, "-c", "print('again')"])  # a rerun: the first log is kept
    log = (tmp_path / "logs" / "5-trained-evaluation.log").read_text()
    assert log.index("fine") < log.index("again") and log.count("--- ") == 2


def test_the_pool_size_comes_from_the_configs_own_prepare_step_and_an_empty_pool_stops(tmp_path):
    """GRPO's BATCH is every pool task: the config's `prepare:` step (here a script that writes the
    pool's train.yaml from what it is given, as data/prepare_data.py does) runs with the stage's
    environment, its output in the GRPO log; a pool without tasks, or a failing step, stops the run."""
    make = tmp_path / "make_pool.py"
    make.write_text("import sys, pathlib\nd = pathlib.Path(sys.argv[1]) / 'pool'\nd.mkdir(exist_ok=True)\n"
                    "n = int(sys.argv[2])\nprint('banding', n)\n(d / 'train.yaml').write_text('# chosen\\n' + ''.join("
                    "f'- t{i}.py:test_{i}\\n' for i in range(n)))\nsys.exit(0 if n >= 0 else 4)\n")
    config = tmp_path / "laptop.yaml"
    config.write_text(f"prepare:\n  - [{make}, '${{env:LAPTOP_DIR}}', '${{env:N}}']\n")
    run = Runner(TrainPlan(out=tmp_path), [].append)
    env = {"LAPTOP_DIR": str(tmp_path), "N": "5"}
    assert pool_tasks(run, env, config) == 5
    assert "banding 5" in (tmp_path / "logs" / "3-GRPO.log").read_text()
    with pytest.raises(StageError, match="no task of the base evaluation has mixed verdicts"):
        pool_tasks(run, {**env, "N": "0"}, config)
    with pytest.raises(StageError, match="prepare step failed") as e:
        pool_tasks(run, {**env, "N": "-1"}, config)
    assert e.value.code == 4


def test_every_stage_plays_the_wall_clock_pinned_to_the_session_unless_the_caller_pinned_it(tmp_path, monkeypatch):
    """The toy loans show the agent a wall-clock stamp: real time would make two runs of the same
    seeds differ in those tokens. A real domain session in the stage's process reads the pin."""
    stamp = ("import os; from trainer.domains.kit import Domain, Session; "
             "d = Domain('t', schema='CREATE TABLE x (a)', now='2025-03-03T09:00:00Z'); "
             "print('clock', os.environ['TBT_WALL_CLOCK'], Session(d).wall_clock())")
    monkeypatch.delenv("TBT_WALL_CLOCK", raising=False)
    Runner(TrainPlan(out=tmp_path), [].append).stage(2, "base evaluation", [sys.executable, "-c", stamp])
    monkeypatch.setenv("TBT_WALL_CLOCK", "123")
    Runner(TrainPlan(out=tmp_path), [].append).stage(2, "base evaluation", [sys.executable, "-c", stamp])
    said = [line for line in (tmp_path / "logs" / "2-base-evaluation.log").read_text().splitlines() if line.startswith("clock")]
    assert said == ["clock session 1740992400.0", "clock 123 123.0"]


def test_both_evaluations_end_episodes_at_the_agent_turn_cap_training_ends_them_at(tmp_path, monkeypatch):
    """The base evaluation (also the probes that band GRPO's pool) and the trained evaluation play
    episodes to the cap GRPO's do: the evaluation command the loop builds, read by the real `tbt
    eval` into its run spec, caps agent turns where the agent loop does with verl's config as the
    launch composes it from configs/laptop_grpo.yaml (nothing is run: the stages are recorded)."""
    import typer

    import trainer.eval_cli as eval_cli
    from trainer.verl.env import TBConfig
    from trainer.verl.launch import plan

    commands = {}

    def stage(self, i, name, cmd, **kw):
        commands[name] = cmd
        if name == "base evaluation":
            raise StageError("recorded")

    monkeypatch.setattr(Runner, "stage", stage)
    with pytest.raises(StageError, match="recorded"):
        train_loop(TrainPlan(out=tmp_path, progress=False), [].append)
    specs = []

    def play(spec, run_plan, **kw):
        specs.append(spec)
        raise typer.Exit(0)

    monkeypatch.setattr(eval_cli, "play", play)
    cmd = commands["base evaluation"]
    assert cmd[3] == "eval" and CliRunner().invoke(app, cmd[3:]).exit_code == 0
    env = {**os.environ, "CONFIG": str(ROOT / CONFIG), "LAPTOP_DIR": str(tmp_path), "CKPT_DIR": str(tmp_path / "ckpt")}
    trained = TBConfig.from_trainer(plan([], env)[1]).max_agent_turns
    assert trained == 10 and specs[0].config.max_agent_turns == trained


def test_json_without_train_is_refused_before_anything_runs(tmp_path):
    res = CliRunner().invoke(app, ["quickstart", "--n", "1", "--out-dir", str(tmp_path / "qs"), "--json", "--no-progress"])
    assert res.exit_code == 2, res.output
    assert "--json applies to --train only" in res.output and not (tmp_path / "qs").exists()


def test_control_without_train_is_refused_before_anything_runs(tmp_path):
    res = CliRunner().invoke(app, ["quickstart", "--n", "1", "--out-dir", str(tmp_path / "qs"), "--control", "--no-progress"])
    assert res.exit_code == 2, res.output
    assert "--control applies to --train only" in res.output and not (tmp_path / "qs").exists()


def test_lora_without_train_is_refused_before_anything_runs(tmp_path):
    res = CliRunner().invoke(app, ["quickstart", "--lora", "--out-dir", str(tmp_path / "qs")])
    assert res.exit_code == 2
    assert "--lora applies to --train only" in res.output and not (tmp_path / "qs").exists()


def test_lora_trains_an_adapter_merged_at_each_sync_and_the_launch_accepts_it(tmp_path):
    """--lora's GRPO stage: verl's LoRA keys before the caller's overrides, alpha twice the rank, the
    adapter merged into the weights the rollout plays; the launch's dry run of the laptop config with
    them passes its preflight (the LoRA check included) and carries each key."""
    import subprocess

    from trainer.verl.quickstart_train import LORA_LR

    plan = TrainPlan(out=tmp_path, lora_rank=8, overrides=("actor_rollout_ref.actor.optim.betas=[0.9,0.99]",))
    assert plan.grpo_overrides == (
        "actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=16",
        "actor_rollout_ref.model.target_modules=all-linear", "actor_rollout_ref.model.lora.merge=true",
        "actor_rollout_ref.actor.optim.betas=[0.9,0.99]")
    assert TrainPlan(out=tmp_path).grpo_overrides == () and LORA_LR == 10 * TrainPlan.lr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TBT_", "CKPT_DIR", "CONFIG", "SMOKE_", "LAPTOP_"))}
    r = subprocess.run(["./scripts/run_train.sh", *plan.grpo_overrides[:4]], cwd=ROOT, capture_output=True, text=True,
                       timeout=180, env={**env, "DRY_RUN": "true", "CONFIG": CONFIG, "LAPTOP_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    for o in plan.grpo_overrides[:4]:
        assert o in lines, o
    assert not [x for x in lines if x.startswith("FAIL")]


def test_the_update_cost_is_read_from_the_metrics_and_the_last_checkpoint(tmp_path):
    from trainer.quickstart_train_cli import update_cost

    actor = tmp_path / "global_step_2" / "actor"
    actor.mkdir(parents=True)
    (actor / "optim_world_size_1_rank_0.pt").write_bytes(b"x" * 1000)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"x" * 5000)  # not the optimizer's
    steps = [(1, {"timing_s/step": 40.0, "timing_s/update_actor": 10.0, "actor/perf/cpu_memory_used_gb": 7.4}),
             (2, {"timing_s/step": 20.0, "timing_s/update_actor": 6.0, "actor/perf/cpu_memory_used_gb": 7.7})]
    assert update_cost(steps, tmp_path / "global_step_2") == {
        "seconds_per_step": 30.0, "update_seconds": 8.0, "actor_memory_gb": 7.7, "optimizer_state_bytes": 1000}
    assert update_cost([], tmp_path / "nowhere") == {"seconds_per_step": None, "update_seconds": None,
                                                     "actor_memory_gb": None, "optimizer_state_bytes": None}


def test_the_loop_trains_standard_grpo_and_its_control_the_permuted_rewards(tmp_path):
    """What the GRPO stage runs, read from configs/laptop_grpo.yaml as the launch reads it: the
    cluster's algorithm (GRPO's advantages, token-mean), or with --control the permuted rewards."""
    from trainer.verl.quickstart_train import TrainPlan, algorithm

    assert algorithm(TrainPlan(out=tmp_path)) == {"adv_estimator": "grpo", "loss_agg_mode": "token-mean"}
    assert algorithm(TrainPlan(out=tmp_path, control=True))["adv_estimator"] == "grpo_permuted"


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    if os.environ.get("TBT_CPU_SMOKE") != "1":
        pytest.skip("the whole loop on CPU (~20 min on 2 cores) runs only with TBT_CPU_SMOKE=1")
    out = tmp_path_factory.mktemp("qs")
    # `tbt quickstart --n 2 --train --steps 1 --k 4`, its help example, as shown (plus where and how it reports)
    args = ["quickstart", "--n", "2", "--train", "--steps", "1", "--k", "4", "--out-dir", str(out), "--json", "--no-progress"]
    with pytest.MonkeyPatch.context() as mp:
        # as from a shell's `uv run tbt quickstart --train` (CI runs the tests under `uv run` too):
        # without conftest's setting, so the launch must keep Ray's uv hook off itself
        mp.delenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", raising=False)
        # two groups a step, not the whole pool (the default): the loop's plumbing, in CI's time
        # (pool_tasks, which sizes the default, has its own test above)
        mp.setenv("BATCH", "2")
        first = CliRunner().invoke(app, args)
        again = CliRunner().invoke(app, args)
    return out / "train", first, again


@pytest.mark.engine
@pytest.mark.timeout(3600)  # the loop (the module's fixture) runs inside the first test
def test_the_whole_loop_runs_and_its_last_line_is_the_summary(loop):
    out, first, _ = loop
    assert first.exit_code == 0, first.output[-6000:]
    s = json.loads(first.stdout.strip().splitlines()[-1])
    assert s["steps"] == 1 and s["k"] == 4 and s["tasks"] == 8 and s["max_agent_turns"] == 10  # configs/laptop_grpo.yaml's
    assert s["algorithm"] == {"adv_estimator": "grpo", "loss_agg_mode": "token-mean"} and s["control"] is False
    assert 0 <= s["base_pass_at_1"] <= 1 and 0 <= s["trained_pass_at_1"] <= 1
    lo, hi = s["delta_interval"]
    assert lo <= s["delta"] <= hi and s["distinguishable"] == (not lo <= 0 <= hi) and s["delta"] == pytest.approx(s["trained_pass_at_1"] - s["base_pass_at_1"])
    assert len(s["reward_per_step"]) == 1 and 0 <= s["reward_per_step"][0] <= 1
    for stage in ("warm start", "base evaluation", "GRPO", "merge", "trained evaluation", "report"):
        assert stage in s["seconds"], stage
    page = (out / "report.html").read_text()
    assert "Reward per training step" in page
    assert (out / "trained" / "config.json").is_file() and (out / "checkpoints" / "global_step_1").is_dir()
    ch = json.loads((out / "compare.json").read_text())["change"]  # compare's one verdict, as the summary says it
    assert (ch["delta_interval"], ch["distinguishable"], ch["pairing"]) == (s["delta_interval"], s["distinguishable"], "seed")


@pytest.mark.engine
@pytest.mark.timeout(3600)
def test_a_rerun_keeps_every_stage_and_gives_the_same_numbers(loop):
    out, first, again = loop
    assert again.exit_code == 0, again.output[-6000:]
    for stage in ("warm start", "GRPO", "merge"):
        assert f"{stage}: kept" in again.output, stage
    a, b = (json.loads(r.stdout.strip().splitlines()[-1]) for r in (first, again))
    assert (a["base_pass_at_1"], a["trained_pass_at_1"], a["delta_interval"], a["distinguishable"]) == \
        (b["base_pass_at_1"], b["trained_pass_at_1"], b["delta_interval"], b["distinguishable"])
