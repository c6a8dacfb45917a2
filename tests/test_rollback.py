"""trainer/verl/rollback.py: what a relaunch replays is moved aside before verl starts, so a
resumed run's records and metrics hold each step once, and nothing a killed attempt wrote is lost."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from trainer.verl.rollback import resumed_step, roll_back


def record_line(uid: str) -> str:
    return json.dumps({"uid": uid}) + "\n"


def test_records_and_metrics_after_the_resumed_step_move_aside_and_a_torn_line_is_cut(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    (records / "step_1.jsonl").write_text(record_line("a") + record_line("b"))
    (records / "step_2.jsonl").write_text(record_line("c") + '{"uid": "d", "tok')  # killed mid-write
    (records / "step_3.jsonl").write_text(record_line("e"))  # the killed step: partial
    (records / "step_3.errors.jsonl").write_text(record_line("e-err"))
    (records / "val_step_2.jsonl").write_text(record_line("v2"))  # validated again before training
    (records / "val_step_1.jsonl").write_text(record_line("v1"))
    (records / "notes.txt").write_text("not a record file")
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": n, "data": {"x": n}}) + "\n" for n in (1, 2, 3)) + '{"step": 4, "da')

    done = roll_back(records, metrics, 2, val_before_train=True, stamp="T1")

    moved = tmp_path / "records" / "rolled_back" / "T1"
    assert sorted(done.records) == ["step_3.errors.jsonl", "step_3.jsonl", "val_step_2.jsonl"]
    assert sorted(p.name for p in moved.iterdir()) == sorted(done.records)
    assert (moved / "step_3.jsonl").read_text() == record_line("e")  # kept as it was: nothing lost
    assert (records / "step_2.jsonl").read_text() == record_line("c")  # the torn tail cut: appends line up
    assert done.repaired == ["step_2.jsonl"]
    assert (records / "step_1.jsonl").read_text() == record_line("a") + record_line("b")
    assert (records / "val_step_1.jsonl").exists() and (records / "notes.txt").exists()
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines()] == [1, 2]
    aside = (tmp_path / "metrics.rolled_back.jsonl").read_text().splitlines()
    assert json.loads(aside[0])["step"] == 3 and aside[1] == '{"step": 4, "da'
    assert done.metrics_steps == [3] and done.metrics_into == tmp_path / "metrics.rolled_back.jsonl"
    lines = done.lines()
    assert any("step_3.jsonl" in line and str(moved) in line for line in lines)
    assert any("metrics lines of steps 3 moved to" in line for line in lines)

    again = roll_back(records, metrics, 2, val_before_train=True, stamp="T2")  # a second relaunch: nothing new
    assert again.records == [] and again.metrics_steps == [] and again.repaired == []


def test_without_validation_before_training_the_resumed_steps_validation_stays(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    (records / "val_step_2.jsonl").write_text(record_line("v2"))
    assert roll_back(records, None, 2, val_before_train=False).records == []
    assert roll_back(records, None, 0, val_before_train=False).records == ["val_step_2.jsonl"]  # from scratch


def test_the_step_resumed_from_is_the_one_verl_will_load(tmp_path):
    cfg = lambda **t: OmegaConf.create({"trainer": t})  # noqa: E731
    assert resumed_step(cfg(resume_mode="auto"), tmp_path) == 0  # no tracker: from scratch
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("7")
    assert resumed_step(cfg(resume_mode="auto"), tmp_path) == 7
    assert resumed_step(cfg(resume_mode="disable"), tmp_path) == 0
    assert resumed_step(cfg(resume_mode="resume_path", resume_from_path="/ck/global_step_3"), tmp_path) == 3
    assert resumed_step(cfg(resume_mode="resume_path", resume_from_path="/ck/elsewhere"), tmp_path) is None
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("")
    assert resumed_step(cfg(resume_mode="auto"), tmp_path) is None


def test_two_relaunches_in_one_second_never_share_a_directory(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    (records / "step_2.jsonl").write_text(record_line("first"))
    a = roll_back(records, None, 1, stamp="T")
    (records / "step_2.jsonl").write_text(record_line("second"))
    b = roll_back(records, None, 1, stamp="T")
    assert a.into != b.into and (a.into / "step_2.jsonl").read_text() == record_line("first")
    assert (b.into / "step_2.jsonl").read_text() == record_line("second")


def test_fully_async_records_of_the_prompts_in_flight_at_the_checkpoint_move_aside(tmp_path):
    """A fully-async checkpoint at step 1 had samples 3 and 4 in flight (verl patch 0013's ledger):
    their episodes, recorded under step 1 (started on weight version 0), are played again by the
    relaunch, so they move aside; sample 1's (trained at step 1) and the validation stay."""
    import numpy as np
    import torch

    from trainer.verl.rollback import INFLIGHT, inflight_groups

    def rec(uid: str, group: str) -> str:
        return json.dumps({"uid": uid, "run": {"seed": 1, "group": group}}) + "\n"

    ckpt = tmp_path / "checkpoints"
    (ckpt / "global_step_1").mkdir(parents=True)
    batch = {"input_ids": torch.tensor([[1, 2]]), "extra_info": np.array([{"uid": "t"}], dtype=object)}
    torch.save({"format": "thinkingbox-rollouter-inflight/1", "next_sample": 5, "epoch": 0, "feed_done": False,
                "inflight": [("sample_0_3", 0, batch), ("sample_0_4", 0, batch)]}, ckpt / "global_step_1" / INFLIGHT)
    assert inflight_groups(ckpt, 1) == {"uid_sample_0_3", "uid_sample_0_4"}
    assert inflight_groups(ckpt, 0) == set() and inflight_groups(ckpt, 2) == set()  # none saved there

    records = ckpt / "records"
    records.mkdir()
    step1 = rec("a", "uid_sample_0_1") + rec("b", "uid_sample_0_3") + rec("c", "uid_sample_0_1") + rec("d", "uid_sample_0_4")
    (records / "step_1.jsonl").write_text(step1)
    (records / "step_2.jsonl").write_text(rec("e", "uid_sample_0_5"))
    (records / "val_step_1.jsonl").write_text(rec("v", "uid_sample_0_3"))  # validation groups are verl's own

    done = roll_back(records, None, 1, stamp="T", replayed_groups=inflight_groups(ckpt, 1))
    moved = records / "rolled_back" / "T"
    assert (records / "step_1.jsonl").read_text() == rec("a", "uid_sample_0_1") + rec("c", "uid_sample_0_1")
    assert (moved / "step_1.jsonl").read_text() == rec("b", "uid_sample_0_3") + rec("d", "uid_sample_0_4")
    assert done.records == ["step_2.jsonl"] and done.replayed == {"step_1.jsonl": 2}
    assert (records / "val_step_1.jsonl").exists()
    assert any("in flight at the checkpoint" in line and "2 of step_1.jsonl" in line for line in done.lines())
    again = roll_back(records, None, 1, stamp="T2", replayed_groups=inflight_groups(ckpt, 1))
    assert again.replayed == {} and again.records == []  # a second relaunch: nothing new to move
