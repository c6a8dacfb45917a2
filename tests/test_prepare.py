"""Data preparation with real components: probe records written by the real runner
(`run_episodes`, through `tbt probe` or directly) with the synthetic policy on the sample tasks
(or renamed copies of them), read by `trainer/data/probes.py`, banded, excluded, screened, split
and written by `trainer/data/prepare.py` and `data/prepare_data.py`.

The statistical test gives tasks known success probabilities (`synthetic:map=FILE`) and uneven
probe counts, loses some probes to system errors, and compares the band of every task with the
rate computed exactly from the binomial and the banding rule (docstring of the test).
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from lazy_import import lazy
from typer.testing import CliRunner

from trainer.cli import app as tbt_app
from trainer.data.bands import Bands, assign, band_table
from trainer.data.prepare import AGENT_LOOP_NAME, CSV_COLUMNS, PrepareConfig, PrepareError, prepare
from trainer.data.probes import MixedProbesError, tally_probes
from trainer.env.taskformat.tasks import load_dataset, read_test_list
from trainer.formats.identity import of_record
from trainer.formats.record import read_records
from trainer.rollout.runner import default_errors_path, local_execute, run_episodes, run_identity
from trainer.rollout.setup import RunSpec, build_setup, close_setup, load_run_dataset

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
SCRIPT = ROOT / "data" / "prepare_data.py"
OUTPUTS = ("train.yaml", "test.yaml", "train.parquet", "test.parquet", "bands.csv", "bands.png", "summary.json",
           "manifest.json")
BANDS = Bands()
beta_dist, binom = lazy("scipy.stats", "beta"), lazy("scipy.stats", "binom")  # scipy on first use, not at collection

# Sample tasks every deviation of the synthetic policy fails (each of their deviations: every
# dropped step, every early stop, every argument mutation, was played once while these tests were
# written, and none passed; `test_the_chosen_tasks_pass_only_on_the_golden_path` checks it again
# on every run): for them P(pass) is exactly the policy's p.
SURE_FAIL = ("property_accounts.py:test_update_phone", "property_accounts.py:test_update_phone_and_email",
             "telecom_accounts.py:test_update_email", "telecom_accounts.py:test_update_email_and_address")
# Trap tasks every deviation passes (the right answer is to refuse: doing less is still right).
TRAPS = ("toy_traps.py:test_checkout_suspended", "toy_traps.py:test_borrow_with_unpaid_fines")

cli = CliRunner()


def tbt(*args: str):
    return cli.invoke(tbt_app, [str(a) for a in args])


def flat(text: str) -> str:
    """`tbt`'s output with rich's line wrapping (80 columns when not a terminal) undone."""
    return " ".join(text.split())


def _load_script():
    spec = importlib.util.spec_from_file_location("prepare_data_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PREPARE_APP = _load_script().app


def prepare_cli(*args: str):
    return cli.invoke(PREPARE_APP, [str(a) for a in args])


def write_list(path: Path, uids) -> Path:
    path.write_text("".join(f"- {u}\n" for u in uids))
    return path


def play(dataset: Path, policy: str, repeat: int, out: Path, *, uids=None, test_list: Path | None = None,
         wrap=None, seed: int = 0, retries: int = 2):
    """The real runner over `uids` (default: every task of the dataset / list), into `out`, sampling
    as `tbt probe` does (configs/sampling.yaml: probes of one policy have one run identity)."""
    from trainer.rollout.sampling import load_sampling

    spec = RunSpec(dataset=str(dataset), policy=policy, test_list=str(test_list) if test_list else None,
                   sampling=load_sampling())
    ds = load_run_dataset(spec)
    assert not ds.errors, ds.errors
    setup = build_setup(spec, ds)
    execute = local_execute(setup)
    if wrap is not None:
        execute = wrap(execute)
    tasks = [ds.tasks[u] for u in uids] if uids is not None else list(ds.tasks.values())
    try:
        return asyncio.run(run_episodes(tasks, repeat, execute, output=out, concurrency=8, retries=retries, seed=seed,
                                        identity=run_identity(spec, setup, list(ds.tasks.values()), seed=seed)))
    finally:
        asyncio.run(close_setup(setup))


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def by_uid(rows):
    return {r["uid"]: r for r in rows}


def listed(path: Path) -> list[str]:
    entries, errors = read_test_list(path)
    assert not errors
    return [f"{f}:{t}" for f, t, _ in entries]


def sha256(path: Path) -> str:
    """A file's SHA-256; a directory's: of its files' "relative path<TAB>SHA-256" lines, sorted."""
    if path.is_dir():
        files = sorted(f.relative_to(path).as_posix() for f in path.rglob("*")
                       if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc")
        return hashlib.sha256("".join(f"{f}\t{sha256(path / f)}\n" for f in files).encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def copy_dataset(dst: Path, *, files=None) -> Path:
    """A copy of the sample dataset (with `files`: only those test files, by basename)."""
    shutil.copytree(SAMPLES, dst, ignore=None if files is None else (
        lambda d, names: [n for n in names if n.endswith(".py") and n not in files]))
    return dst


# ---------------------------------------------------------------------------- the statistical test

def test_the_chosen_tasks_pass_only_on_the_golden_path(tmp_path):
    """The premise of the statistical test: p = 0 (always a deviation) never passes these tasks,
    p = 1 (the golden path) always does."""
    lst = write_list(tmp_path / "sure.yaml", SURE_FAIL)
    never = play(SAMPLES, "synthetic:p=0", 10, tmp_path / "p0.jsonl", test_list=lst)
    always = play(SAMPLES, "synthetic:p=1", 3, tmp_path / "p1.jsonl", test_list=lst)
    assert (never.written, never.passed) == (40, 0)
    assert (always.written, always.passed) == (12, 12)
    notes = Counter(r.messages[-1]["reasoning_content"].split("deviating: ")[-1].split(" ")[0]
                    for r in read_records(tmp_path / "p0.jsonl"))
    assert set(notes) <= {"dropped", "stopped", "step"} and len(notes) >= 2  # drops, stops and mutations


def _exact_band_count(qs: list[float]) -> list[float]:
    """The distribution of how many of independent tasks land in a band, task i with
    probability qs[i] (a Poisson-binomial, by convolution): pmf[0..len(qs)]."""
    pmf = [1.0]
    for q in qs:
        nxt = [0.0] * (len(pmf) + 1)
        for j, x in enumerate(pmf):
            nxt[j] += x * (1 - q)
            nxt[j + 1] += x * q
        pmf = nxt
    return pmf


def _acceptance(pmf: list[float], alpha: float) -> tuple[int, int]:
    """The central interval [lo, hi] with P(count < lo) <= alpha/2 and P(count > hi) <= alpha/2."""
    lo, below = 0, 0.0
    while below + pmf[lo] <= alpha / 2:
        below += pmf[lo]
        lo += 1
    hi, above = len(pmf) - 1, 0.0
    while above + pmf[hi] <= alpha / 2:
        above += pmf[hi]
        hi -= 1
    return lo, hi


def band_probabilities(n: int, p: float, bands: Bands = BANDS) -> dict[str, float]:
    """P(band | n probes, success probability p) = sum over k of Binomial(n, p).pmf(k) where the
    banding rule sends k of n to that band."""
    table = band_table(n, bands)
    out = dict.fromkeys(bands.names, 0.0)
    for k, b in enumerate(table):
        out[b] += float(binom.pmf(k, n, p))
    return out


# groups of the statistical test: success probability x planned probes -> tasks (copies)
STAT_P = (0.15, 0.5, 0.8)
STAT_N = {4: 36, 12: 20, 20: 12}  # more tasks where probes are cheap: 1872 planned episodes


def _stable(*parts) -> float:
    """A uniform number in [0, 1) from the parts (independent of the policy's draws)."""
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def test_band_frequencies_match_the_exact_binomial_rate(tmp_path):
    """Tasks whose success probability is known land in each band at the rate the binomial and
    the banding rule give, with uneven probe counts and probes lost to system errors.

    Setup: 204 renamed copies of the four SURE_FAIL tasks (a copy is a task of its own: its own
    uid, its own episode seeds), each given p in {0.15, 0.5, 0.8} by `synthetic:map=`, and
    n in {4, 12, 20} planned probes (36, 20 and 12 tasks per p; 1872 planned episodes). Probes
    are lost: ~15% of (task, repetition) always hit a system error (the executor raises, as a
    dead worker does; after the one retry the probe is unresolved), another ~5% only on the first
    attempt (re-run, then recorded with attempt 1). Both the records and the errors file go to
    prepare: the errors file's records must count as system errors, not as failed probes. So a
    task's valid probes m are n minus its lost ones and, given m, k ~ Binomial(m, p) exactly
    (which probes are lost does not depend on their outcome; that a probe passes exactly when
    the policy took the golden path is checked on every record).

    Checks, 51 counts: per group (p, planned n) and band, and over all tasks per band (9 x 5 + 5),
    the number of tasks in the band is a sum of independent Bernoullis, task i with
    q_i = P(band | m_i, p_i) = sum of Binomial(m_i, p_i).pmf(k) over the k the rule puts there;
    and the sum of the tasks' band indices, a sum of independent variables on 0..4. Each count's
    exact distribution (Poisson-binomial / convolution) gives the central interval holding it
    with probability 1 - 1e-4; with a correct pipeline the chance that any of the 51 falls
    outside (or that the pass rate of one of the three p's, k summed over its tasks ~
    Binomial(sum m, p), falls outside its own such interval) is <= 54 x 1e-4 ~ 0.5% (Bonferroni).
    The seeds are fixed, so the run either passes for good or shows a bug. The same intervals reject the two likely bugs (checked at the end):
    lost probes counted as failures, and a uniform prior instead of the Jeffreys prior.
    """
    ds_dir = tmp_path / "ds"
    (ds_dir / "test_case").mkdir(parents=True)
    shutil.copytree(SAMPLES / "agent", ds_dir / "agent")
    shutil.copytree(SAMPLES / "scenario", ds_dir / "scenario")
    base_files = sorted({u.split(":")[0] for u in SURE_FAIL})
    copies = sum(STAT_N.values()) * len(STAT_P) // len(SURE_FAIL)  # 51 copies of each task
    for f in base_files:
        sub = "property" if f.startswith("property") else "telecom"
        (ds_dir / "test_case" / sub).mkdir(exist_ok=True)
        for c in range(copies):
            shutil.copy(SAMPLES / "test_case" / sub / f, ds_dir / "test_case" / sub / f.replace(".py", f"_c{c:02d}.py"))
    uids = [f"{u.split(':')[0].replace('.py', f'_c{c:02d}.py')}:{u.split(':')[1]}" for c in range(copies) for u in SURE_FAIL]
    # interleave: every (p, n) group gets copies of all four base tasks
    plan: dict[str, tuple[float, int]] = {}
    groups = [(p, n) for p in STAT_P for n, t in STAT_N.items() for _ in range(t)]
    assert len(groups) == len(uids) == 204
    for uid, g in zip(uids, groups):
        plan[uid] = g
    pmap = tmp_path / "p.yaml"
    pmap.write_text(yaml.safe_dump({u: p for u, (p, _) in plan.items()}))
    lst = write_list(tmp_path / "copies.yaml", uids)
    out = tmp_path / "probes.jsonl"

    lost = {(u, r) for u, (_, n) in plan.items() for r in range(n) if _stable("lost", u, r) < 0.15}
    flaky = {(u, r) for u, (_, n) in plan.items() for r in range(n) if (u, r) not in lost and _stable("flaky", u, r) < 0.05}

    def wrap(inner):
        async def execute(task, rep, seed, attempt):
            if (task.uid, rep) in lost or ((task.uid, rep) in flaky and attempt == 0):
                raise ConnectionError("policy worker died (injected)")
            return await inner(task, rep, seed, attempt)
        return execute

    for n in STAT_N:  # one run per planned n, over that n's tasks
        res = play(ds_dir, f"synthetic:map={pmap}", n, out, test_list=lst, wrap=wrap, retries=1,
                   uids=[u for u in uids if plan[u][1] == n])
        assert len(res.unresolved) == sum(1 for u, r in lost if plan[u][1] == n)
    records = read_records(out)
    errors = read_records(default_errors_path(out))
    assert len(records) == sum(n for _, n in plan.values()) - len(lost)
    assert len(errors) == 2 * len(lost) + len(flaky) and all(e.system_error for e in errors)
    assert all(r.attempt == 1 for r in records if r.key in flaky)
    for r in records:  # every probe passed exactly when the policy took the golden path
        said = [m.get("reasoning_content") or "" for m in r.messages if m["role"] == "assistant"]
        assert r.passed == any("following the golden path" in x for x in said), r.uid

    result = prepare(PrepareConfig(probes=[out, default_errors_path(out)], datasets=[ds_dir], test_lists=[lst],
                                   out_dir=tmp_path / "prepared"))
    rows = by_uid(read_csv(tmp_path / "prepared" / "bands.csv"))
    assert set(rows) == set(uids) and result.summary["problems"] == []
    valid: dict[str, int] = {}
    for u, (p, n) in plan.items():
        lost_here = sum(1 for r in range(n) if (u, r) in lost)
        row = rows[u]
        m = n - lost_here
        valid[u] = m
        assert int(row["n"]) == m, u
        assert int(row["system_errors"]) == 2 * lost_here + sum(1 for r in range(n) if (u, r) in flaky)
        assert int(row["k"]) == sum(rec.passed for rec in records if rec.uid == u)
        if m == 0:
            assert row["band"] == "" and row["reason"] == "not probed (%s system errors)" % row["system_errors"]
        else:
            assert row["band"] == assign(int(row["k"]), m, BANDS)[0]
        if 0 < m < 4:
            assert row["reason"] == f"too few probes (n={m} < 4)" and row["kept"] == "no"
    assert min(valid.values()) < 4 < max(valid.values()) and len(set(valid.values())) >= 8  # really uneven

    # the pass rate itself: k summed over a group is Binomial(sum m, p)
    for p in STAT_P:
        m_sum = sum(valid[u] for u in uids if plan[u][0] == p)
        k_sum = sum(int(rows[u]["k"]) for u in uids if plan[u][0] == p)
        lo, hi = binom.interval(1 - 1e-4, m_sum, p)
        assert lo <= k_sum <= hi, (p, k_sum, m_sum)

    def checks(model) -> list[tuple[str, int, int, int]]:
        """(what, observed, lo, hi) of every count under `model(u) -> {band: q}`."""
        out_ = []
        scopes = [(f"p={p} n={n}", [u for u in uids if plan[u] == (p, n)]) for p in STAT_P for n in STAT_N]
        scopes.append(("all", [u for u in uids if valid[u] > 0]))
        for what, members in scopes:
            members = [u for u in members if valid[u] > 0]
            qs = {u: model(u) for u in members}
            for b in BANDS.names:
                obs = sum(rows[u]["band"] == b for u in members)
                lo, hi = _acceptance(_exact_band_count([qs[u][b] for u in members]), 1e-4)
                out_.append((f"{what} {b}", obs, lo, hi))
        # and the sum of the band indices (0 rarely_solved .. 4 nearly_always_solved) over all
        # tasks: its exact distribution is the convolution of each task's
        pmf = [1.0]
        for u in (u for u in uids if valid[u] > 0):
            q = model(u)
            step = [q[b] for b in BANDS.names]
            nxt = [0.0] * (len(pmf) + len(step) - 1)
            for i, x in enumerate(pmf):
                for j, y in enumerate(step):
                    nxt[i + j] += x * y
            pmf = nxt
        obs = sum(BANDS.names.index(rows[u]["band"]) for u in uids if valid[u] > 0)
        out_.append(("sum of band indices", obs, *_acceptance(pmf, 1e-4)))
        return out_

    jeffreys = checks(lambda u: band_probabilities(valid[u], plan[u][0]))
    assert len(jeffreys) == 51
    outside = [c for c in jeffreys if not c[2] <= c[1] <= c[3]]
    assert outside == [], outside

    # power: the intervals are tight enough to tell the likely bugs apart
    def as_failures(u):  # lost probes counted as failed ones: k of the valid m, banded as k of n
        p, n = plan[u]
        table = band_table(n, BANDS)
        q = dict.fromkeys(BANDS.names, 0.0)
        for k in range(valid[u] + 1):
            q[table[k]] += float(binom.pmf(k, valid[u], p))
        return q

    uniform_tables: dict[int, list[str]] = {}

    def uniform_table(m: int) -> list[str]:  # the band of k of m under Beta(k + 1, m - k + 1)
        if m not in uniform_tables:
            rows_ = []
            for k in range(m + 1):
                cdf = [0.0, *(float(beta_dist.cdf(x, k + 1, m - k + 1)) for x in BANDS.boundaries), 1.0]
                masses = [cdf[i + 1] - cdf[i] for i in range(len(BANDS.names))]
                rows_.append(BANDS.names[masses.index(max(masses))])
            uniform_tables[m] = rows_
        return uniform_tables[m]

    def uniform_prior(u):
        p, m = plan[u][0], valid[u]
        q = dict.fromkeys(BANDS.names, 0.0)
        for k, b in enumerate(uniform_table(m)):
            q[b] += float(binom.pmf(k, m, p))
        return q

    for wrong in (as_failures, uniform_prior):
        assert any(not c[2] <= c[1] <= c[3] for c in checks(wrong)), wrong.__name__


# ---------------------------------------------------------------------------- probes of the sample tasks

SAMPLE_POLICY = "synthetic:dist=bimodal"  # tbt quickstart's: tasks across all five bands
N = 4  # probes per sample task (k of 4: one band each)
EPISODES = 141 * N


@pytest.fixture(scope="module")
def sample_probes(tmp_path_factory) -> Path:
    """`tbt probe data/samples --policy ... --n 4 --output probes.jsonl`: 141 tasks x 4 (the help
    example with --n 8 runs in tests/test_cli.py)."""
    out = tmp_path_factory.mktemp("probes") / "probes.jsonl"
    r = tbt("probe", SAMPLES, "--policy", SAMPLE_POLICY, "--n", N, "--output", out, "--no-progress")
    assert r.exit_code == 0, r.output
    assert f"141 task(s) × {N} = {EPISODES} episode(s): 0 already recorded, {EPISODES} written now" in flat(r.output)
    return out


@pytest.fixture(scope="module")
def prepared(sample_probes, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared")
    return prepare(PrepareConfig(probes=[sample_probes], datasets=[SAMPLES], out_dir=out)), out


def test_tbt_probe_resumes_and_a_rerun_writes_nothing(sample_probes):
    before = sample_probes.read_bytes()
    r = tbt("probe", SAMPLES, "--policy", SAMPLE_POLICY, "--n", N, "--output", sample_probes, "--no-progress")
    assert r.exit_code == 0, r.output
    assert f"{EPISODES} already recorded, 0 written now" in flat(r.output)
    assert sample_probes.read_bytes() == before
    recs = read_records(sample_probes)
    assert len({r.key for r in recs}) == len(recs) == EPISODES
    assert all(r.synthetic and r.fingerprint for r in recs)


def test_prepare_writes_every_output(prepared, sample_probes):
    result, out = prepared
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)  # nothing else (no temporaries left)
    assert set(result.outputs) == set(OUTPUTS)
    tasks = load_dataset(SAMPLES).tasks
    recs = read_records(sample_probes)
    k = Counter(r.uid for r in recs if r.passed)

    rows = read_csv(out / "bands.csv")
    header = list(rows[0])
    assert {"uid", "n", "k", "band", "kept"} <= set(header)
    assert header == [*CSV_COLUMNS[:7], *(f"mass_{b}" for b in BANDS.names), *CSV_COLUMNS[7:]]
    assert [r["uid"] for r in rows] == sorted(tasks)  # one row per candidate
    for r in rows:
        assert (int(r["n"]), int(r["k"]), r["system_errors"]) == (N, k[r["uid"]], "0")
        band, masses = assign(int(r["k"]), N, BANDS)
        assert r["band"] == band
        assert [float(r[f"mass_{b}"]) for b in BANDS.names] == pytest.approx(masses, abs=1e-6)
        assert r["kept"] == ("yes" if band in BANDS.keep else "no")
        assert r["reason"] == ("" if band in BANDS.keep else f"band {band} is dropped")
        assert r["split"] in (("train", "validation") if band in BANDS.keep else ("",))
        assert r["domain"] == next(t.split(":", 1)[1] for t in tasks[r["uid"]].tags if t.startswith("domain:"))
        assert r["dataset"] == str(SAMPLES)
    assert len({r["band"] for r in rows}) == 5  # the bimodal draw fills every band

    train, test = listed(out / "train.yaml"), listed(out / "test.yaml")
    assert train == sorted(train) and test == sorted(test) and not set(train) & set(test)
    assert set(train) == {r["uid"] for r in rows if r["split"] == "train"}
    assert set(test) == {r["uid"] for r in rows if r["split"] == "validation"}
    kept = [r for r in rows if r["kept"] == "yes"]
    assert len(test) == round(0.1 * len(kept)) and len(train) + len(test) == len(kept)
    assert (out / "train.yaml").read_text().startswith(f"# train tasks chosen by data/prepare_data.py (seed 0, "
                                                       f"bands 0.08,0.4,0.6,0.9, kept difficult,frequently_solved,"
                                                       f"intermediate): {len(train)} task(s)\n")
    # the lists load as test lists of the dataset
    assert list(load_dataset(SAMPLES, test_list=out / "train.yaml", strict=True).tasks) == train

    s = json.loads((out / "summary.json").read_text())
    assert s == result.summary
    assert (s["candidates"], s["kept"], s["train"], s["validation"]) == (141, len(kept), len(train), len(test))
    assert {b: v["tasks"] for b, v in s["bands"].items()} == Counter(r["band"] for r in rows)
    assert {b for b, v in s["bands"].items() if v["kept"]} == BANDS.keep
    assert s["not_kept"] == dict(Counter(r["reason"] for r in rows if r["kept"] == "no"))
    assert (s["probe_lines"], s["unknown_uids"], s["changed_tasks"], s["duplicate_probes"], s["problems"]) == (
        EPISODES, {}, {}, 0, [])
    for b, v in s["bands"].items():
        assert v["by_domain"] == dict(sorted(Counter(r["domain"] for r in rows if r["band"] == b).items()))

    png = (out / "bands.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_the_manifest_has_the_configuration_and_the_hash_of_every_file(prepared, sample_probes):
    result, out = prepared
    m = json.loads((out / "manifest.json").read_text())
    assert m["tool"] == "data/prepare_data.py"
    assert m["inputs"] == {str(sample_probes): sha256(sample_probes), str(SAMPLES): sha256(SAMPLES)}
    assert len(m["inputs"][str(SAMPLES)]) == 64
    assert set(m["outputs"]) == set(OUTPUTS) - {"manifest.json"}
    for name, digest in m["outputs"].items():
        assert sha256(out / name) == digest, name
    c = m["config"]
    assert c["probes"] == [str(sample_probes)] and c["datasets"] == [str(SAMPLES)] and c["out_dir"] == str(out)
    assert c["bands"] == {"boundaries": [0.08, 0.4, 0.6, 0.9], "names": list(BANDS.names),
                          "keep": sorted(BANDS.keep)}
    assert (c["seed"], c["min_probes"], c["val_fraction"]) == (0, 4, 0.1)
    assert c["exclude_lists"] == c["exclude_datasets"] == c["screen"] == c["test_lists"] == []


def test_parquet_rows_are_what_the_training_stage_reads(prepared):
    """train.parquet / test.parquet: one row per listed task, in the lists' order; the row's
    extra_info.uid + extra_info.dataset find the task."""
    import pyarrow.parquet as pq

    result, out = prepared
    bands = by_uid(read_csv(out / "bands.csv"))
    datasets = {}
    for which, lst in (("train", "train.yaml"), ("test", "test.yaml")):
        table = pq.read_table(out / f"{which}.parquet")
        assert table.column_names == ["data_source", "agent_name", "prompt", "reward_model", "extra_info"]
        rows = table.to_pylist()
        assert [r["extra_info"]["uid"] for r in rows] == listed(out / lst)
        for i, r in enumerate(rows):
            info = r["extra_info"]
            if info["dataset"] not in datasets:
                datasets[info["dataset"]] = load_dataset(info["dataset"])
            ds = datasets[info["dataset"]]
            task = ds.tasks[info["uid"]]
            assert r["prompt"] == [{"role": "user", "content": task.query}]
            assert r["agent_name"] == AGENT_LOOP_NAME
            assert r["reward_model"] == {"style": "thinkingbox", "ground_truth": ""}
            assert r["data_source"] == bands[info["uid"]]["domain"]
            assert (info["band"], info["index"]) == (bands[info["uid"]]["band"], i)
    assert list(datasets) == [str(SAMPLES)]


def test_same_seed_same_bytes_other_seed_other_split_same_bands(prepared, sample_probes, tmp_path):
    result, out = prepared
    again = prepare(PrepareConfig(probes=[sample_probes], datasets=[SAMPLES], out_dir=tmp_path / "again"))
    for name in ("train.yaml", "test.yaml", "train.parquet", "test.parquet", "bands.csv", "summary.json"):
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name
    assert again.summary == result.summary
    # into the same directory: the manifest too
    before = {n: (out / n).read_bytes() for n in OUTPUTS}
    prepare(PrepareConfig(probes=[sample_probes], datasets=[SAMPLES], out_dir=out))
    assert {n: (out / n).read_bytes() for n in OUTPUTS if n != "bands.png"} == {
        n: b for n, b in before.items() if n != "bands.png"}

    base = read_csv(out / "bands.csv")
    strata = Counter((r["band"], r["domain"]) for r in base if r["split"] == "validation")
    tests = {(out / "test.yaml").read_text().split("\n", 1)[1]}
    for seed in (1, 2, 3):
        d = tmp_path / f"seed{seed}"
        prepare(PrepareConfig(probes=[sample_probes], datasets=[SAMPLES], out_dir=d, seed=seed))
        rows = read_csv(d / "bands.csv")
        strip = lambda rs: [{k: v for k, v in r.items() if k != "split"} for r in rs]  # noqa: E731
        assert strip(rows) == strip(base)  # the same bands, kept, reasons
        # the split is stratified: each (band, domain) holds out as many, only which ones changes
        assert Counter((r["band"], r["domain"]) for r in rows if r["split"] == "validation") == strata
        tests.add((d / "test.yaml").read_text().split("\n", 1)[1])
        assert f"(seed {seed}," in (d / "train.yaml").read_text().splitlines()[0]
    assert len(tests) > 1  # some other seed did hold out other tasks


# ---------------------------------------------------------------------------- data/prepare_data.py

def test_prepare_data_help():
    r = prepare_cli("--help")
    assert r.exit_code == 0, r.output
    for opt in ("--probes", "--dataset", "--out-dir", "--bands", "--band-names", "--keep", "--min-probes",
                "--val-fraction", "--seed", "--exclude-list", "--exclude-dataset", "--screen", "--test-list"):
        assert opt in r.output, opt
    assert "python data/prepare_data.py --probes probes.jsonl --dataset data/samples --out-dir prepared" in r.output


def test_the_minimal_command_writes_every_output_and_reruns_byte_identical(sample_probes, prepared, tmp_path):
    """`python data/prepare_data.py --probes probes.jsonl --dataset data/samples --out-dir DIR`,
    as a user runs it (a new process, paths relative to the checkout), twice."""
    shutil.copy(sample_probes, tmp_path / "probes.jsonl")
    cmd = [sys.executable, str(SCRIPT), "--probes", "probes.jsonl", "--dataset", str(SAMPLES), "--out-dir", "DIR"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "DIR").iterdir()) == sorted(OUTPUTS)
    assert "tasks per difficulty band" in r.stdout and "141 candidate(s):" in r.stdout
    assert "written to DIR: train.yaml, test.yaml" in r.stdout
    first = {n: (tmp_path / "DIR" / n).read_bytes() for n in OUTPUTS}
    _, out = prepared  # the same inputs and seed as the in-process run: the same lists
    for name in ("train.yaml", "test.yaml", "bands.csv", "train.parquet"):
        assert first[name] == (out / name).read_bytes(), name
    m = json.loads(first["manifest.json"])
    assert m["inputs"] == {"probes.jsonl": sha256(sample_probes), str(SAMPLES): sha256(SAMPLES)}
    # the rerun (in this process: the same code, a new process only adds imports)
    r = prepare_cli("--probes", tmp_path / "probes.jsonl", "--dataset", SAMPLES, "--out-dir", tmp_path / "DIR", "--quiet")
    assert r.exit_code == 0 and r.output.strip() == str(tmp_path / "DIR")
    for name in ("train.yaml", "test.yaml", "train.parquet", "test.parquet", "bands.csv", "summary.json"):
        assert (tmp_path / "DIR" / name).read_bytes() == first[name], name


@pytest.mark.parametrize("args, message", [
    (["--bands", "0.4,0.2,0.6,0.9"], "error: --bands/--band-names/--keep: band boundaries must increase: 0.4 then 0.2"),
    (["--bands", "0.08,0.4,0.6,1"], "error: --bands/--band-names/--keep: band boundary #4 = 1.0: boundaries must lie inside (0, 1)"),
    (["--bands", "0,0.4,0.6,0.9"], "error: --bands/--band-names/--keep: band boundary #1 = 0.0: boundaries must lie inside (0, 1)"),
    (["--bands", "0.1,x,0.6,0.9"], "error: --bands/--band-names/--keep: band boundary #2 = 'x' is not a number"),
    (["--bands", "0.3,0.6"], "error: --bands/--band-names/--keep: 2 boundaries make 3 bands, but 5 names are given"),
    (["--bands", "0.3,0.6", "--band-names", "hard,mid,easy", "--keep", "medium"],
     "error: --bands/--band-names/--keep: kept band(s) medium are not band names (hard, mid, easy)"),
    (["--val-fraction", "1"], "error: --val-fraction 1.0: must be in [0, 1)"),
])
def test_a_bad_configuration_is_exit_2_with_one_message(sample_probes, tmp_path, args, message):
    r = prepare_cli("--probes", sample_probes, "--dataset", SAMPLES, "--out-dir", tmp_path / "o", *args)
    assert r.exit_code == 2, r.output
    assert r.output.strip() == message
    assert not (tmp_path / "o").exists()  # nothing written


def test_a_custom_band_configuration(sample_probes, tmp_path):
    r = prepare_cli("--probes", sample_probes, "--dataset", SAMPLES, "--out-dir", tmp_path, "--bands", "0.25,0.75",
                    "--band-names", "hard,medium,easy", "--keep", "hard,medium", "--min-probes", "3")
    assert r.exit_code == 0, r.output
    three = Bands((0.25, 0.75), ("hard", "medium", "easy"), frozenset({"hard", "medium"}))
    rows = read_csv(tmp_path / "bands.csv")
    assert list(rows[0])[7:10] == ["mass_hard", "mass_medium", "mass_easy"]
    for row in rows:
        assert row["band"] == assign(int(row["k"]), int(row["n"]), three)[0]
        assert row["kept"] == ("yes" if row["band"] != "easy" else "no")


# ---------------------------------------------------------------------------- bad input

def test_empty_probe_records_are_a_clear_error(tmp_path):
    for text in ("", "\n\n  \n"):
        p = tmp_path / "empty.jsonl"
        p.write_text(text)
        with pytest.raises(PrepareError, match=rf"^the probe records are empty: {p}$"):
            prepare(PrepareConfig(probes=[p], datasets=[SAMPLES], out_dir=tmp_path / "o"))
        r = prepare_cli("--probes", p, "--dataset", SAMPLES, "--out-dir", tmp_path / "o")
        assert r.exit_code == 2 and r.output.strip() == f"error: the probe records are empty: {p}"
    with pytest.raises(PrepareError, match=r"no probe records given"):
        prepare(PrepareConfig(probes=[], datasets=[SAMPLES], out_dir=tmp_path / "o"))
    with pytest.raises(PrepareError, match=r"missing\.jsonl: No such file"):
        prepare(PrepareConfig(probes=[tmp_path / "missing.jsonl"], datasets=[SAMPLES], out_dir=tmp_path / "o"))
    assert not (tmp_path / "o").exists()


def test_unreadable_lines_are_reported_with_file_and_line_and_the_rest_is_used(sample_probes, prepared, tmp_path):
    lines = sample_probes.read_bytes().splitlines(keepends=True)
    gone = json.loads(lines[5])  # this record is replaced by garbage: its task has one probe fewer
    bad = [*lines[:2], b"not json at all\n", *lines[2:5], b'{"uid": 5, "version": 1}\n', b'{"hello": "world"}\n',
           b'{"uid": "x.py:test_y", "test_result": "pass"}\n', b"\xff\xfe\n", b'{"uid": "a", \n', *lines[6:]]
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"".join(bad))
    res = prepare(PrepareConfig(probes=[p], datasets=[SAMPLES], out_dir=tmp_path / "o"))
    problems = res.summary["problems"]
    uid = "uid: expected the task uid ('file.py:test_name'), got"
    assert problems == [f"{p}:3: not JSON (Expecting value: line 1 column 1 (char 0))",
                        f"{p}:7: {uid} 5", f"{p}:8: {uid} None",
                        f"{p}:9: test_result: expected {{result, reward, is_system_error}}",
                        f"{p}:10: not JSON (Expecting value: line 1 column 1 (char 0))",
                        f"{p}:11: not JSON (Expecting property name enclosed in double quotes: line 1 column 14 (char 13))"]
    clean = by_uid(read_csv(prepared[1] / "bands.csv"))
    rows = by_uid(read_csv(tmp_path / "o" / "bands.csv"))
    for uid, row in rows.items():
        want_n = N - (uid == gone["uid"])
        want_k = int(clean[uid]["k"]) - (uid == gone["uid"] and gone["verdict"]["passed"])
        assert (int(row["n"]), int(row["k"])) == (want_n, want_k), uid
    assert res.summary["probe_lines"] == EPISODES - 1 + 6
    r = prepare_cli("--probes", p, "--dataset", SAMPLES, "--out-dir", tmp_path / "o2")
    assert r.exit_code == 0
    assert f"warning  {p}:3: not JSON" in r.output and f"warning  {p}:11: not JSON" in r.output


def test_a_probe_counted_twice_is_reported_and_counted_once(sample_probes, prepared, tmp_path):
    lines = sample_probes.read_bytes().splitlines(keepends=True)
    p = tmp_path / "dup.jsonl"
    p.write_bytes(b"".join(lines) + lines[0] + lines[1])
    res = prepare(PrepareConfig(probes=[p], datasets=[SAMPLES], out_dir=tmp_path / "o"))
    assert res.summary["duplicate_probes"] == 2
    first = json.loads(lines[0])
    assert res.summary["problems"][0] == (f"{p}:{EPISODES + 1}: {first['uid']} repetition {first['repetition']} "
                                          "counted already (kept the first)")
    assert (tmp_path / "o" / "bands.csv").read_bytes() == (prepared[1] / "bands.csv").read_bytes()


def test_probes_of_another_dataset_version_are_reported_not_mixed_in(sample_probes, prepared, tmp_path):
    """The dataset changed since the probes: one test file is gone (its uids are unknown) and one
    task's query was edited (its fingerprint changed): those records are reported, not counted."""
    ds = copy_dataset(tmp_path / "v2")
    (ds / "test_case" / "toy" / "toy_traps.py").unlink()
    loans = ds / "test_case" / "toy" / "toy_loans.py"
    text = loans.read_text()
    old = 'query: I\'d like to borrow "The Left Hand of Darkness", please. My email is ben@example.org.'
    assert text.count(old) == 1
    loans.write_text(text.replace(old, old + " Thanks!"))
    edited = "toy_loans.py:test_checkout_book"
    res = prepare(PrepareConfig(probes=[sample_probes], datasets=[ds], out_dir=tmp_path / "o"))
    s = res.summary
    assert s["unknown_uids"] == {"toy_traps.py:test_borrow_with_unpaid_fines": N, "toy_traps.py:test_checkout_suspended": N}
    assert s["changed_tasks"] == {edited: N}
    rows = by_uid(read_csv(tmp_path / "o" / "bands.csv"))
    assert (rows[edited]["n"], rows[edited]["band"], rows[edited]["kept"], rows[edited]["reason"]) == (
        "0", "", "no", "probes of an older version of the task")
    assert edited not in listed(tmp_path / "o" / "train.yaml") + listed(tmp_path / "o" / "test.yaml")
    clean = by_uid(read_csv(prepared[1] / "bands.csv"))
    assert set(rows) == set(clean) - {"toy_traps.py:test_borrow_with_unpaid_fines", "toy_traps.py:test_checkout_suspended"}
    for uid in set(rows) - {edited}:
        assert rows[uid]["band"] == clean[uid]["band"] and rows[uid]["k"] == clean[uid]["k"]
    r = prepare_cli("--probes", sample_probes, "--dataset", ds, "--out-dir", tmp_path / "o2")
    assert r.exit_code == 0
    assert ("warning  2 probed uid(s) are not in the dataset (another dataset or version?): "
            "toy_traps.py:test_borrow_with_unpaid_fines, toy_traps.py:test_checkout_suspended") in r.output
    assert f"warning  1 task(s) changed since they were probed; their probes are not used: {edited}" in r.output
    # the manifest tells the two dataset versions apart
    digest = json.loads((tmp_path / "o" / "manifest.json").read_text())["inputs"][str(ds)]
    assert digest == sha256(ds) != json.loads((prepared[1] / "manifest.json").read_text())["inputs"][str(SAMPLES)]

    # probes of an entirely different dataset: nothing to prepare
    other = copy_dataset(tmp_path / "toy_only", files={"toy_loans.py"})
    only_traps = tmp_path / "traps.jsonl"
    only_traps.write_text("".join(line + "\n" for line in sample_probes.read_text().splitlines()
                                  if '"uid":"toy_traps.py:' in line))
    with pytest.raises(PrepareError, match=r"no probe record names a task of .*toy_only \(2 unknown uid\(s\), "
                                           r"0 unreadable line\(s\)\)"):
        prepare(PrepareConfig(probes=[only_traps], datasets=[other], out_dir=tmp_path / "o3"))


def test_tb_infer_records_band_like_ours(sample_probes, prepared, tmp_path):
    """`tb infer` JSONL of the ThinkingBox framework: uid, test_result {result, reward,
    is_system_error}, metadata {scenario, repetition}; every way it says pass or fail, and its
    system errors (not probes)."""
    lines = []
    for i, r in enumerate(read_records(sample_probes)):
        form = i % 4
        result = {0: r.passed, 1: "pass" if r.passed else "fail", 2: None, 3: 1 if r.passed else 0}[form]
        lines.append({"uid": r.uid, "test_result": {"result": result, "reward": 1.0 if r.passed else 0.0,
                                                    "is_system_error": False},
                      "metadata": {"scenario": r.scenario, "repetition": r.repetition}})
        if i % 50 == 0:  # a lost attempt next to it: counted as a system error, not as a probe
            lines.append({"uid": r.uid, "test_result": {"result": False, "reward": 0.0, "is_system_error": True},
                          "metadata": {"scenario": r.scenario, "repetition": r.repetition}})
    p = tmp_path / "infer.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = prepare(PrepareConfig(probes=[p], datasets=[SAMPLES], out_dir=tmp_path / "o"))
    assert res.summary["problems"] == [] and res.summary["duplicate_probes"] == 0
    ours = by_uid(read_csv(prepared[1] / "bands.csv"))
    theirs = by_uid(read_csv(tmp_path / "o" / "bands.csv"))
    errors = Counter(x["uid"] for x in lines if x["test_result"]["is_system_error"])
    assert sum(errors.values()) == len(range(0, EPISODES, 50))
    for uid, row in theirs.items():
        assert int(row["system_errors"]) == errors[uid]
        strip = lambda r: {k: v for k, v in r.items() if k != "system_errors"}  # noqa: E731
        assert strip(row) == strip(ours[uid])
    assert (tmp_path / "o" / "train.yaml").read_bytes() == (prepared[1] / "train.yaml").read_bytes()

    # the same episodes twice: each probe counts once, the second copy is reported
    tasks = load_dataset(SAMPLES).tasks
    twice = tmp_path / "twice.jsonl"
    twice.write_bytes(sample_probes.read_bytes() * 2)
    report = tally_probes([twice], tasks)
    assert report.duplicates == EPISODES
    assert {u: (t.n, t.c) for u, t in report.tallies.items()} == {u: (N, int(r["k"])) for u, r in ours.items()}

    # ours (with a run identity) and tb infer's (none) in one file: two runs as far as anyone can
    # tell, refused, each named; told which to keep, the other is left out and counted
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(sample_probes.read_bytes() + p.read_bytes())
    with pytest.raises(MixedProbesError) as e:
        tally_probes([mixed], tasks)
    ours_id = of_record(read_records(sample_probes)[0]).id
    assert f"{ours_id}: {EPISODES} record(s)" in str(e.value) and f"unknown: {len(lines)} record(s)" in str(e.value)
    assert "--keep-identity" in str(e.value)
    report = tally_probes([mixed], tasks, keep_identity="unknown")
    assert report.identity == "unknown" and report.left_out == {ours_id: EPISODES} and report.duplicates == 0
    assert {u: (t.n, t.c) for u, t in report.tallies.items()} == {u: (N, int(r["k"])) for u, r in ours.items()}


# ---------------------------------------------------------------------------- exclusions

def test_benchmark_tasks_are_excluded_by_uid_and_by_content(sample_probes, tmp_path):
    """A benchmark dataset's tasks are excluded by uid, and a renamed copy of a benchmark task
    (another uid, the same query, user context and init) by its content fingerprint; an
    exclusion list excludes by uid."""
    bench = copy_dataset(tmp_path / "bench", files={"toy_loans.py", "toy_traps.py"})
    cand = copy_dataset(tmp_path / "cand")
    (cand / "test_case" / "toy" / "toy_loans.py").rename(cand / "test_case" / "toy" / "toy_lending.py")
    renamed = [u.replace("toy_loans.py", "toy_lending.py") for u in load_dataset(bench).tasks if u.startswith("toy_loans")]
    assert renamed and all(u in load_dataset(cand).tasks for u in renamed)
    cand_probes = tmp_path / "cand.jsonl"
    play(cand, SAMPLE_POLICY, 4, cand_probes, uids=renamed)
    excl = write_list(tmp_path / "excl.yaml", ["procurement_orders.py:test_cancel_po_nothing_received"])

    # without exclusions the renamed copies are ordinary candidates
    r = prepare_cli("--probes", sample_probes, "--probes", cand_probes, "--dataset", cand, "--out-dir", tmp_path / "a")
    assert r.exit_code == 0, r.output
    base = by_uid(read_csv(tmp_path / "a" / "bands.csv"))
    assert all(base[u]["n"] == "4" and base[u]["band"] for u in renamed)

    r = prepare_cli("--probes", sample_probes, "--probes", cand_probes, "--dataset", cand, "--out-dir", tmp_path / "b",
                    "--exclude-dataset", bench, "--exclude-list", excl)
    assert r.exit_code == 0, r.output
    rows = by_uid(read_csv(tmp_path / "b" / "bands.csv"))
    for u in renamed:
        orig = u.replace("toy_lending.py", "toy_loans.py")
        assert rows[u]["reason"] == f"excluded: same content as {orig} of bench" and rows[u]["kept"] == "no"
        assert rows[u]["band"] == base[u]["band"]  # still banded (bands.csv shows it), just not used
    for u in ("toy_traps.py:test_checkout_suspended", "toy_traps.py:test_borrow_with_unpaid_fines"):
        assert rows[u]["reason"] == f"excluded: a task of bench ({u})"
    assert rows["procurement_orders.py:test_cancel_po_nothing_received"]["reason"] == "excluded: on the list excl.yaml"
    out_of = {u for u, r in rows.items() if r["reason"].startswith("excluded")}
    assert len(out_of) == len(renamed) + 3
    chosen = set(listed(tmp_path / "b" / "train.yaml") + listed(tmp_path / "b" / "test.yaml"))
    assert not chosen & out_of
    assert chosen == {u for u, r in base.items() if r["kept"] == "yes"} - out_of
    s = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert s["not_kept"]["excluded"] == len(out_of)
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["config"]["exclude_datasets"] == [str(bench)]
    assert m["inputs"] == {str(sample_probes): sha256(sample_probes), str(cand_probes): sha256(cand_probes),
                           str(cand): sha256(cand), str(excl): sha256(excl), str(bench): sha256(bench)}


# ---------------------------------------------------------------------------- tbt probe --screen-policy

def test_the_solvability_screen_drops_what_the_strong_policy_never_solves(tmp_path):
    """`--screen-policy synthetic:p=0` (every episode a deviation) on four write tasks every
    deviation fails and two trap tasks every deviation passes: the write tasks are dropped with
    the reason, only the traps are probed; a rerun resumes both stages; prepare --screen
    records the reason."""
    lst = write_list(tmp_path / "l.yaml", [*SURE_FAIL, *TRAPS])
    out = tmp_path / "probes.jsonl"
    args = ["probe", SAMPLES, "--test-list", lst, "--policy", "synthetic:p=0.5", "--screen-policy", "synthetic:p=0",
            "--screen-n", "2", "--n", "4", "-o", out, "--no-progress"]
    r = tbt(*args)
    assert r.exit_code == 0, r.output
    verdicts = json.loads((tmp_path / "probes.screen.json").read_text())
    assert verdicts == {**{u: {"n": 2, "k": 0, "kept": False, "reason": "never solved by the screen policy (0 of 2)"}
                           for u in SURE_FAIL},
                        **{u: {"n": 2, "k": 2, "kept": True, "reason": ""} for u in TRAPS}}
    assert "screen: 2 of 6 task(s) solved at least once; 4 not probed" in flat(r.output)
    recs = read_records(out)
    assert sorted(r.key for r in recs) == sorted((u, i) for u in TRAPS for i in range(4))
    screen_recs = read_records(tmp_path / "probes.screen.jsonl")
    assert len(screen_recs) == 12 and {r.policy.get("p") for r in screen_recs} == {0.0}
    before = (out.read_bytes(), (tmp_path / "probes.screen.jsonl").read_bytes())
    r = tbt(*args)
    assert r.exit_code == 0 and "12 already recorded, 0 written now" in flat(r.output) and "8 already recorded, 0 written now" in flat(r.output)
    assert (out.read_bytes(), (tmp_path / "probes.screen.jsonl").read_bytes()) == before

    r = prepare_cli("--probes", out, "--dataset", SAMPLES, "--test-list", lst, "--screen", tmp_path / "probes.screen.jsonl",
                    "--out-dir", tmp_path / "o")
    assert r.exit_code == 0, r.output
    rows = by_uid(read_csv(tmp_path / "o" / "bands.csv"))
    assert sorted(rows) == sorted([*SURE_FAIL, *TRAPS])
    for u in SURE_FAIL:
        assert (rows[u]["kept"], rows[u]["reason"]) == ("no", "screen: never solved by the screen policy (0 of 2)")
    for u in TRAPS:
        assert rows[u]["n"] == "4" and not rows[u]["reason"].startswith("screen")
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["not_kept"]["screen"] == 4


# ---------------------------------------------------------------------------- tbt quickstart

def test_quickstart_runs_end_to_end(tmp_path):
    r = tbt("quickstart", "--n", "2", "--out-dir", tmp_path, "--no-progress")
    assert r.exit_code == 0, r.output
    assert "SYNTHETIC policy" in flat(r.output) and "tasks per difficulty band" in flat(r.output)
    assert "141 task(s) × 2 = 282 episode(s)" in flat(r.output)
    assert sorted(p.name for p in (tmp_path / "prepared").iterdir()) == sorted(OUTPUTS)
    rows = read_csv(tmp_path / "prepared" / "bands.csv")
    assert len(rows) == 141 and all(r["n"] == "2" and r["band"] for r in rows)
    # a short quickstart bands its tasks on the probes it made (min probes = n): kept as the bands say
    assert all((r["kept"] == "yes") == (r["band"] in BANDS.keep) for r in rows)
    assert {r["reason"] for r in rows if r["kept"] == "no"} <= {f"band {b} is dropped" for b in BANDS.names}
    kept = sum(r["kept"] == "yes" for r in rows)
    assert 0 < kept < 141 and f"141 candidate(s): {kept} kept" in flat(r.output)
    assert "python -m verl.trainer.main_ppo" in flat(r.output)  # ends with the training dry run, which passes
    assert "FAIL " not in r.output and "DRY_RUN: nothing started" in r.output
    assert "TBT_USER_SPEC, TBT_JUDGE_SPEC are shown with placeholders" in flat(r.output)
    assert "training pool:" in flat(r.output) and "--failed" in flat(r.output)
    again = tbt("quickstart", "--n", "2", "--out-dir", tmp_path, "--no-progress")
    assert again.exit_code == 0 and "282 already recorded, 0 written now" in flat(again.output)
