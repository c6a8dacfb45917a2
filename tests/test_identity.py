"""Run identity (issue 24 item 1): every record names what produced it; a run refuses to append to
a file of another run (or of records without an identity) before any episode; a task changed
since it was recorded is re-run, said so, and coverage counts the old record as replaced; probes
and aggregation refuse records of several runs unless told which to keep.

Real components: the sample dataset, the synthetic policy through tb_interpret, the real
`tbt run` / `tbt eval` / `tbt aggregate` / data/prepare_data.py commands and records files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from trainer.cli import app
from trainer.formats.identity import of_record, public_spec, run_block
from trainer.formats.record import read_records

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def run_toy(out, policy="synthetic:p=0.5", *extra, dataset=SAMPLES):
    return cli("run", dataset, "--test-list", dataset / "lists" / "toy.yaml", "--policy", policy, "-n", 2, "-o", out,
               "--no-progress", *extra)


def test_every_record_carries_its_run_identity_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "r.jsonl"
    res = run_toy(out, "synthetic:p=0.5", "--seed", 3)
    assert res.exit_code == 0, res.output
    recs = read_records(out)
    assert len(recs) == 10
    run = recs[0].run
    assert run["policy"] == "synthetic:p=0.5" and run["user"] == "scripted" and run["judge"] == "synthetic"
    assert run["seed"] == 3 and run["dataset"]["name"] == "samples" and run["dataset"]["test_list"] == "toy.yaml"
    assert run["dataset"]["tasks"] == 5 and len(run["dataset"]["fingerprint"]) == 16
    assert len({of_record(r) for r in recs}) == 1  # one identity, the one the run checks against
    ident = of_record(recs[0])
    assert ident.fields["policy"]["p"] == 0.5 and ident.fields["seed"] == 3 and ident.fields["sampling"]["top_k"] == 20
    res = run_toy(out, "synthetic:p=0.5", "--seed", 3)
    assert res.exit_code == 0 and "10 already recorded, 0 written" in res.output, res.output


def test_appending_another_policy_is_refused_naming_the_fields(tmp_path):
    out = tmp_path / "r.jsonl"
    assert run_toy(out, "synthetic:p=0.5").exit_code == 0
    before = out.read_bytes()
    res = run_toy(out, "synthetic:p=0.9", "--seed", 1)
    assert res.exit_code == 2, res.output
    msg = " ".join(res.output.split())
    assert "written by another run" in msg and "nothing was run" in msg
    assert "policy.p: 0.5 (recorded) ≠ 0.9 (this run)" in msg and "seed: 0 (recorded) ≠ 1 (this run)" in msg
    assert "new --output" in msg
    assert out.read_bytes() == before  # nothing appended
    # the same through tbt eval (the issue's case: p=0.9 reported under p=0.5's records)
    res = cli("eval", SAMPLES, "--test-list", TOY, "--policy", "synthetic:p=0.9", "-n", 2, "-o", out,
              "--aggregate-output", tmp_path / "agg.json", "--no-progress")
    assert res.exit_code == 2 and "policy.p" in res.output and not (tmp_path / "agg.json").exists()
    # another sampling or budget is another run too
    res = run_toy(out, "synthetic:p=0.5", "--max-episode-tokens", 100)
    assert res.exit_code == 2 and "budgets.max_episode_tokens: null (recorded) ≠ 100 (this run)" in \
        " ".join(res.output.split())
    # a spec spelled otherwise that parses to the same policy is the same run
    res = run_toy(out, "synthetic:p=0.50")
    assert res.exit_code == 0 and "10 already recorded" in res.output, res.output


def test_records_without_an_identity_are_not_mixed_with_a_run(tmp_path):
    out = tmp_path / "old.jsonl"
    assert run_toy(out).exit_code == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for d in lines[:4]:
        d.pop("run")  # written before records carried one
    out.write_text("".join(json.dumps(d) + "\n" for d in lines[:4]))
    res = run_toy(out)
    msg = " ".join(res.output.split())
    assert res.exit_code == 2 and "4 of 4 record(s) carry no run identity" in msg and "new --output" in msg, msg
    assert len(out.read_text().splitlines()) == 4
    res = cli("aggregate", out, "--coverage-profile", "none", "-o", tmp_path / "old.agg.json")
    assert res.exit_code == 0, res.output  # the old file still aggregates on its own


def test_a_task_changed_since_it_was_recorded_is_rerun_and_coverage_counts_it_replaced(tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(SAMPLES, ds)
    out, agg = tmp_path / "r.jsonl", tmp_path / "agg.json"
    base = ("eval", ds, "--test-list", ds / "lists" / "toy.yaml", "--policy", "synthetic:p=0.5", "-n", 2, "-o", out,
            "--aggregate-output", agg, "--no-progress")
    assert cli(*base).exit_code == 0
    # change one task's content (its query)
    f = next((ds / "test_case" / "toy").glob("toy_loans.py"))
    text = f.read_text()
    assert "query:" in text
    f.write_text(text.replace("query:", "query: (rephrased)", 1) if "query: |" not in text
                 else text.replace("query: |\n", "query: |\n  Rephrased.\n", 1))
    changed = [r for r in read_records(out)]
    from trainer.env.taskformat.tasks import load_dataset

    now = {u: t.fingerprint() for u, t in load_dataset(ds, test_list=ds / "lists" / "toy.yaml").tasks.items()}
    stale = sorted({r.uid for r in changed if r.fingerprint != now[r.uid]})
    assert len(stale) == 1, stale
    res = cli(*base)
    assert res.exit_code == 0, res.output
    msg = " ".join(res.output.split())
    assert "re-run 2 recorded episode(s) of task(s) whose content changed" in msg and stale[0] in msg
    assert "8 already recorded, 2 written now" in msg
    doc = json.loads(agg.read_text())
    assert doc["coverage"]["complete"] and len(doc["coverage"]["replaced"]) == 2 and doc["coverage"]["stale"] == []
    assert doc["overall"]["attempts"] == 10  # the old records are not counted
    assert cli(*base).exit_code == 0 and "10 already recorded" in cli(*base).output


def test_prepare_and_aggregate_refuse_probes_of_two_runs_unless_told_which(tmp_path):
    a, b, mixed = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "mixed.jsonl"
    assert run_toy(a, "synthetic:p=0.5").exit_code == 0 and run_toy(b, "synthetic:p=0.9").exit_code == 0
    mixed.write_bytes(a.read_bytes() + b.read_bytes())
    id_b = of_record(read_records(b)[0]).id
    from trainer.data.prepare import PrepareConfig, PrepareError, prepare

    cfg = PrepareConfig(probes=[mixed], datasets=[SAMPLES], test_lists=[TOY], out_dir=tmp_path / "prep", min_probes=1)
    try:
        prepare(cfg)
        raise AssertionError("mixed probes were prepared")
    except PrepareError as e:
        assert "2 different runs" in str(e) and id_b in str(e) and "policy.p: 0.5" in str(e)
        assert "--keep-identity" in str(e)
    cfg.keep_identity = id_b
    res = prepare(cfg)
    assert res.summary["probe_identity"] == {"used": id_b, "left_out": {of_record(read_records(a)[0]).id: 10}}
    assert all(d.n == 2 and d.k == 2 for d in res.decisions)  # p=0.9's records only
    res = cli("aggregate", mixed, "-o", tmp_path / "m.agg.json")
    assert res.exit_code == 2 and "2 different runs" in res.output and not (tmp_path / "m.agg.json").exists()
    res = cli("aggregate", mixed, "-o", tmp_path / "m.agg.json", "--keep-identity", id_b)
    assert res.exit_code == 0 and "10 record(s) of 1 other run(s) left out" in res.output, res.output
    doc = json.loads((tmp_path / "m.agg.json").read_text())
    assert doc["label"] == "synthetic:p=0.9" and doc["identities"]["id"] == id_b  # the label tells runs apart


def test_specs_in_identities_carry_no_secret():
    spec = "openai:https://bob:hunter2@api.example.com/v1?api_key=sk-SECRET#gpt-x,temperature=0.2,key_env=MY_KEY"
    assert public_spec(spec) == "openai:https://api.example.com/v1#gpt-x,temperature=0.2,key_env=MY_KEY"
    block = run_block(policy=spec, user="openai:http://u:pw@h/v1#m", judge=None, seed=0, dataset={})
    text = json.dumps(block)
    assert "hunter2" not in text and "sk-SECRET" not in text and "pw@" not in text and "bob" not in text
    assert public_spec("synthetic:p=0.9") == "synthetic:p=0.9"
