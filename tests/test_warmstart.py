"""The golden warm start (trainer/data/warmstart.py, `tbt warm-start`): golden episodes played by the
one run assembly, token level, with the real Qwen3 tokenizer; examples whose loss covers exactly the
assistant's tokens; transformers' Trainer on a tiny Qwen3 model built here; a checkpoint that `hf:`
loads and plays. The full warm start on the laptop pool, with the pass rates it reaches, is the
engine test at the end."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.formats.record import read_records
from trainer.rollout.runner import RunPlan, run
from trainer.rollout.setup import RunSpec
from trainer.data import warmstart as ws

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
UIDS = ("toy_traps.py:test_checkout_suspended", "toy_loans.py:test_checkout_book")  # 3 and 5 assistant turns


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from trainer.verl.tiny import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model", hidden=32, layers=1)


@pytest.fixture(scope="module")
def golden(base, tmp_path_factory):
    out = tmp_path_factory.mktemp("golden") / "golden.jsonl"
    result = run(RunSpec(dataset=str(SAMPLES), policy=ws.golden_policy(base)), RunPlan(output=out, only=frozenset(UIDS)))
    assert result.written == result.passed == 2
    return {r.uid: r for r in read_records(out)}


@pytest.fixture(scope="module")
def tokenizer(base):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(base))


def assistant_turns_in(text: str, prompt: str) -> list[str]:
    """The assistant turns of a rendered conversation after its prompt, read from the chat markup:
    what follows each `<|im_start|>assistant\\n`, through its `<|im_end|>`."""
    rest = text[len(prompt):]
    first, *later = rest.split("<|im_start|>assistant\n")
    return [t[:t.index("<|im_end|>") + len("<|im_end|>")] for t in [first, *later]]


def labelled_spans(ex: ws.Example) -> list[list[int]]:
    spans, cur = [], []
    for i, (tid, lab) in enumerate(zip(ex.input_ids, ex.labels)):
        if lab != ws.IGNORE:
            assert lab == tid
            cur.append(tid)
        elif cur:
            spans.append(cur)
            cur = []
    return spans + ([cur] if cur else [])


@pytest.mark.parametrize("uid", UIDS)
def test_the_loss_covers_exactly_the_assistant_tokens(golden, tokenizer, uid):
    rec = golden[uid]
    ex = ws.example_from_record(rec)
    prompt = tokenizer.decode(rec.tokens.prompt_ids)
    text = tokenizer.decode(ex.input_ids)
    assert ex.input_ids == rec.tokens.prompt_ids + rec.tokens.response_ids  # the ids training gets, not re-rendered
    spans = [tokenizer.decode(s) for s in labelled_spans(ex)]
    assert spans == assistant_turns_in(text, prompt)
    assert len(spans) == ex.turns == ex.total_turns == rec.turns["agent"]
    assert all(s.endswith("<|im_end|>") for s in spans)
    unlabelled = tokenizer.decode([t for t, lab in zip(ex.input_ids, ex.labels) if lab == ws.IGNORE])
    for call in rec.tool_calls:  # every tool result is in the input and outside the loss
        assert json.dumps(call["result"])[:40] in text or "<tool_response>" in unlabelled
    assert unlabelled.count("<tool_response>") == len(rec.tool_calls) and "<tool_response>" not in "".join(spans)
    assert rec.messages[-1]["role"] == "assistant" and rec.messages[-1]["content"] in spans[-1]


def test_keep_turns_cuts_after_the_last_kept_turn(golden, tokenizer):
    rec = golden["toy_loans.py:test_checkout_book"]
    full = ws.example_from_record(rec)
    half = ws.example_from_record(rec, keep_turns=0.5)
    assert (half.turns, half.total_turns) == (3, 5)  # ceil(2.5)
    assert full.input_ids[:len(half.input_ids)] == half.input_ids and full.labels[:len(half.labels)] == half.labels
    assert tokenizer.decode(half.input_ids[-1:]) == "<|im_end|>" and half.labels[-1] != ws.IGNORE
    assert len(labelled_spans(half)) == 3
    assert ws.example_from_record(rec, keep_turns=0.01).turns == 1
    with pytest.raises(ws.WarmStartError, match="keep_turns=0"):
        ws.example_from_record(rec, keep_turns=0)


def test_selection_skips_failed_episodes_and_keeps_a_seeded_share_of_tasks(golden):
    from dataclasses import replace

    recs = list(golden.values())
    failed = replace(recs[0], uid="x.py:test_failed", verdict={**recs[0].verdict, "passed": False, "reward": 0.0})
    sel = ws.examples_from_records([*recs, failed])
    assert [e.uid for e in sel.examples] == sorted(UIDS) and sel.failed == ["x.py:test_failed"] and sel.left_out == []
    halves = [ws.examples_from_records(recs, keep_tasks=0.5, seed=s) for s in range(6)]
    assert all(len(h.examples) == 1 and len(h.left_out) == 1 for h in halves)
    assert len({h.examples[0].uid for h in halves}) == 2  # the seed chooses
    assert [e.uid for e in ws.examples_from_records(recs, keep_tasks=0.5, seed=3).examples] == [halves[3].examples[0].uid]
    no_tokens = replace(recs[0], tokens=None)
    with pytest.raises(ws.WarmStartError, match="no token trajectory"):
        ws.examples_from_records([no_tokens])


def test_the_loss_is_the_models_own_shifted_loss(base, golden):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base))
    batch = ws.collate(151643)([{"input_ids": e.input_ids, "labels": e.labels}
                                for e in (ws.example_from_record(r) for r in golden.values())])
    assert batch["attention_mask"].sum().item() == sum(len(e) for e in
                                                       (ws.example_from_record(r).input_ids for r in golden.values()))
    for row in range(2):  # each sequence alone: transformers' loss is a token mean over the labels
        n = int(batch["attention_mask"][row].sum())
        ids, labels, attn = (batch[k][row:row + 1, :n] for k in ("input_ids", "labels", "attention_mask"))
        with torch.no_grad():
            ours = ws.masked_lm_loss(model, ids, labels, attn)
            theirs = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)


def test_fine_tune_writes_a_checkpoint_hf_loads_and_plays(base, golden, tmp_path):
    import torch
    from safetensors.torch import load_file

    from trainer.rollout.setup import make_policy

    examples = [ws.example_from_record(r) for r in golden.values()]
    out = tmp_path / "warm"
    res = ws.fine_tune(base, examples, out, ws.TrainOptions(epochs=1, learning_rate=1e-2, logging_steps=1, threads=1))
    assert res.steps == 2 and len(res.losses) == 2 and all(l["loss"] > 0 for l in res.losses)
    before, after = load_file(str(Path(base) / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
    policy = make_policy(f"hf:{out},max_tokens=8")
    assert policy.tokenizer.convert_tokens_to_ids("<|im_end|>") == 151645
    records = tmp_path / "runs.jsonl"
    result = run(RunSpec(dataset=str(SAMPLES), policy=f"hf:{out},max_tokens=8", user="scripted", judge="synthetic"),
                 RunPlan(output=records, only=frozenset(UIDS[:1]), preflight=False))
    [rec] = read_records(records)
    assert result.written == 1 and rec.policy["model"] == str(out) and rec.tokens.response_mask.count(1) > 0
    with pytest.raises(ws.WarmStartError, match="epochs=0"):
        ws.fine_tune(base, examples, tmp_path / "never", ws.TrainOptions(epochs=0))


runner = CliRunner()


def test_the_golden_replay_pins_the_wall_clock_so_a_rerun_trains_on_the_same_tokens(base, tmp_path, monkeypatch):
    """The toy domain stamps each new loan with real time (`recorded_at`, unstable): two golden
    plays differ in those tool-result tokens, unless `tbt warm-start`'s pin stamps the session's
    fixed clock (2025-03-03T09:00:00Z)."""
    from datetime import datetime, timezone

    from trainer.domains.kit import WALL_CLOCK_ENV, pinned_wall_clock

    monkeypatch.delenv(WALL_CLOCK_ENV, raising=False)
    uid = "toy_loans.py:test_checkout_book"

    def play(name):
        out = tmp_path / f"{name}.jsonl"
        run(RunSpec(dataset=str(SAMPLES), policy=ws.golden_policy(base)), RunPlan(output=out, only=frozenset({uid})))
        (rec,) = read_records(out)
        stamps = re.findall(r'recorded_at\\?": ([0-9.]+)', json.dumps(rec.messages))
        return rec.tokens, [float(x) for x in stamps]

    free_a, free_b = play("free-a"), play("free-b")
    assert free_a[1] and free_a[1] != free_b[1] and free_a[0] != free_b[0]  # real time: not the same tokens
    with pinned_wall_clock():
        pinned_a = play("pinned-a")
    with pinned_wall_clock():
        pinned_b = play("pinned-b")
    assert pinned_a == pinned_b
    assert set(pinned_a[1]) == {datetime(2025, 3, 3, 9, tzinfo=timezone.utc).timestamp()}
    assert WALL_CLOCK_ENV not in os.environ  # restored after the golden play
    monkeypatch.setenv(WALL_CLOCK_ENV, "12.5")  # the caller's own pin is kept
    with pinned_wall_clock():
        assert set(play("caller")[1]) == {12.5}
    monkeypatch.setenv(WALL_CLOCK_ENV, "noon")
    with pytest.raises(ValueError, match=r"TBT_WALL_CLOCK='noon': expected epoch seconds or 'session'"):
        from trainer.domains import domain

        server = domain("toy").create_server()
        server.session.wall_clock()


def test_cli_bad_input_is_one_clear_message(tmp_path):
    def bad(*args):
        r = runner.invoke(app, ["warm-start", str(SAMPLES), "-o", str(tmp_path / "w"), *args])
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        return r.output

    assert "--keep-turns 0.0: expected a fraction in (0, 1]" in bad("--keep-turns", "0")
    assert "--keep-tasks 1.5" in bad("--keep-tasks", "1.5")
    assert "epochs=-1.0" in bad("--epochs", "-1")
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.json").write_text("{}")
    assert re.search(r"already holds a checkpoint \(config.json\); --force replaces it", bad())


def test_golden_probability_is_that_of_the_sampling_distribution(base, golden):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base))
    ex = ws.example_from_record(golden[UIDS[0]], keep_turns=0.01)  # the first turn: ~30 tokens, p ~ 1e-150
    untruncated = ws.golden_probability(model, [ex])[ex.uid]
    with torch.no_grad():  # by hand: the model's own shifted loss is the mean of -log p over the labelled tokens
        loss = model(input_ids=torch.tensor([ex.input_ids]), labels=torch.tensor([ex.labels])).loss.item()
    assert 0 < untruncated < 1e-100
    assert math.log(untruncated) == pytest.approx(-loss * ex.trained_tokens, rel=1e-4)
    # a random model's golden tokens are never all inside a top-20 nucleus; greedy reproduces them or not
    assert ws.golden_probability(model, [ex], top_k=20, top_p=0.95)[ex.uid] == 0.0
    assert ws.golden_probability(model, [ex], temperature=0)[ex.uid] == 0.0
