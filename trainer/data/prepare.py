"""Data preparation: probe tallies -> bands -> exclusions -> a seeded split -> the files training reads.

`prepare(config)` decides, for every candidate task (the datasets' tasks, or their test lists'),
one row of `bands.csv`: its probes (n valid, k passed, system errors), the posterior mass in each
band (trainer/data/bands.py), its band, whether it is kept, which split it went to and, when it
was not kept, the reason, first that applies:

    excluded: <why>          its uid is on an exclusion list, or its content fingerprint
                             (`Task.fingerprint`: query + user context + init) equals a task of an
                             excluded dataset (a renamed copy of a benchmark task is still out)
    screen: <why>            the solvability screen's policy never solved it
    not probed / too few probes (n < min) / probes of an older version of the task
    band <name> is dropped   the band's keep flag is off

Probes of several runs (run identities, trainer/formats/identity.py) are refused unless
`keep_identity` names the one to use (trainer/data/probes.py); summary.json's `probe_identity`
says which was used and how many records of others were left out.

Kept tasks are split train/validation by a seeded shuffle inside each (band, domain) stratum, the
validation share allotted across strata by largest remainder, so the split keeps the band and
domain mix. Domain = the task's `domain:` tag, else its scenario.

Outputs (in `out_dir`, each written atomically: a temporary file renamed into place):
    train.yaml, test.yaml    test lists (`file.py:test_name`), sorted; byte-identical for the same inputs and seed
    train.parquet, test.parquet   one row per task for verl's dataset (see `parquet_rows`)
    bands.csv                one row per candidate (columns in `CSV_COLUMNS`, trainer/formats/bandsfile.py)
    bands.png                the band histogram (kept and dropped per band, stacked by domain)
    summary.json             counts per band x domain, kept, excluded, dropped and why, input problems
    manifest.json            the configuration and the SHA-256 of every input (a dataset: of its
                             files, see `sha256`) and output
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tempfile
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from trainer.core.figures import figure_png
from trainer.data.bands import Bands, assign
from trainer.data.probes import MixedProbesError, ProbeReport, tally_probes
from trainer.env.taskformat.tasks import Dataset, Task, load_dataset, read_test_list
from trainer.formats.attempts import AttemptError
from trainer.formats.bandsfile import CSV_COLUMNS, BandsRow, bands_csv_text

AGENT_LOOP_NAME = "thinkingbox_agent"  # the verl agent loop that plays these rows (trainer/verl)


class PrepareError(ValueError):
    """Inputs that cannot be prepared (the message names the file and what is wrong)."""


@dataclass
class PrepareConfig:
    probes: list[Path]
    datasets: list[Path]
    out_dir: Path
    test_lists: list[Path] = field(default_factory=list)  # candidates: only these (any dataset)
    bands: Bands = field(default_factory=Bands)
    min_probes: int = 4
    val_fraction: float = 0.1
    seed: int = 0
    exclude_lists: list[Path] = field(default_factory=list)  # test lists of uids to exclude
    exclude_datasets: list[Path] = field(default_factory=list)  # their tasks' uids and fingerprints
    screen: list[Path] = field(default_factory=list)  # records of the solvability screen
    keep_identity: str | None = None  # probes of several runs: the run identity to use (its id)


@dataclass
class Decision:
    task: Task
    dataset: Path
    domain: str
    n: int = 0
    k: int = 0
    system_errors: int = 0
    masses: list[float] = field(default_factory=list)
    band: str = ""
    kept: bool = False
    split: str = ""
    reason: str = ""


@dataclass
class PrepareResult:
    decisions: list[Decision]
    summary: dict[str, Any]
    outputs: dict[str, Path]


def domain_of(task: Task) -> str:
    for t in task.tags:
        if t.startswith("domain:"):
            return t.split(":", 1)[1]
    return task.scenario.name


def _candidates(cfg: PrepareConfig) -> tuple[dict[str, tuple[Task, Path]], list[str]]:
    tasks: dict[str, tuple[Task, Path]] = {}
    problems: list[str] = []
    for root in cfg.datasets:
        ds = _load(root)
        problems += [str(e) for e in ds.errors]
        for uid, t in ds.tasks.items():
            if uid in tasks:
                raise PrepareError(f"task {uid} is in both {tasks[uid][1]} and {root}: uids must be unique")
            tasks[uid] = (t, root)
    if cfg.test_lists:
        wanted: set[str] = set()
        for lst in cfg.test_lists:
            entries, errs = read_test_list(lst)
            if errs:
                raise PrepareError("; ".join(str(e) for e in errs))
            wanted |= {f"{f}:{t}" for f, t, _ in entries}
        missing = sorted(wanted - set(tasks))
        problems += [f"test list names {uid}, which no dataset has" for uid in missing]
        tasks = {uid: v for uid, v in tasks.items() if uid in wanted}
    if not tasks:
        raise PrepareError(f"no candidate tasks in {', '.join(map(str, cfg.datasets))}")
    return tasks, problems


def _load(root: Path) -> Dataset:
    try:
        return load_dataset(root)
    except Exception as e:  # DatasetError names the path
        raise PrepareError(str(e)) from None


def _exclusions(cfg: PrepareConfig) -> tuple[dict[str, str], dict[str, str]]:
    """(uid -> why, fingerprint -> why) of the exclusions."""
    by_uid: dict[str, str] = {}
    by_fp: dict[str, str] = {}
    for lst in cfg.exclude_lists:
        entries, errs = read_test_list(lst)
        if errs:
            raise PrepareError("; ".join(str(e) for e in errs))
        for f, t, _ in entries:
            by_uid.setdefault(f"{f}:{t}", f"excluded: on the list {lst.name}")
    for root in cfg.exclude_datasets:
        ds = _load(root)
        for uid, t in ds.tasks.items():
            by_uid.setdefault(uid, f"excluded: a task of {root.name} ({uid})")
            by_fp.setdefault(t.fingerprint(), f"excluded: same content as {uid} of {root.name}")
    return by_uid, by_fp


def _decide(cfg: PrepareConfig, report: ProbeReport, screen: ProbeReport | None,
            tasks: dict[str, tuple[Task, Path]]) -> list[Decision]:
    by_uid, by_fp = _exclusions(cfg)
    out = []
    for uid in sorted(tasks):
        task, root = tasks[uid]
        d = Decision(task, root, domain_of(task))
        t = report.tallies.get(uid)
        if t is not None:
            d.n, d.k, d.system_errors = t.n, t.c, t.system_errors
        if d.n:
            d.band, d.masses = assign(d.k, d.n, cfg.bands)
        s = screen.tallies.get(uid) if screen is not None else None
        if uid in by_uid:
            d.reason = by_uid[uid]
        elif task.fingerprint() in by_fp:
            d.reason = by_fp[task.fingerprint()]
        elif screen is not None and (s is None or s.n == 0):
            d.reason = "screen: not screened"
        elif s is not None and s.c == 0:
            d.reason = f"screen: never solved by the screen policy (0 of {s.n})"
        elif d.n == 0:
            d.reason = ("probes of an older version of the task" if uid in report.changed else
                        "not probed" + (f" ({d.system_errors} system errors)" if d.system_errors else ""))
        elif d.n < cfg.min_probes:
            d.reason = f"too few probes (n={d.n} < {cfg.min_probes})"
        elif d.band not in cfg.bands.keep:
            d.reason = f"band {d.band} is dropped"
        else:
            d.kept = True
        out.append(d)
    return out


def split(decisions: list[Decision], fraction: float, seed: int) -> None:
    """Assign `split` ("train" | "validation") to the kept decisions (module docstring)."""
    strata: dict[tuple[str, str], list[Decision]] = defaultdict(list)
    for d in decisions:
        if d.kept:
            strata[(d.band, d.domain)].append(d)
    total = sum(len(v) for v in strata.values())
    want = round(fraction * total)
    quota = {k: fraction * len(v) for k, v in strata.items()}
    take = {k: int(q) for k, q in quota.items()}
    rest = sorted(strata, key=lambda k: (-(quota[k] - take[k]), k))
    for k in rest[: max(0, want - sum(take.values()))]:
        take[k] += 1
    for key in sorted(strata):
        members = sorted(strata[key], key=lambda d: d.task.uid)
        random.Random(f"{seed}:{key[0]}:{key[1]}").shuffle(members)
        for i, d in enumerate(members):
            d.split = "validation" if i < take[key] else "train"


def bands_csv(decisions: list[Decision], bands: Bands) -> str:
    """bands.csv (trainer/formats/bandsfile.py: the columns, `CSV_COLUMNS`, and their reader)."""
    return bands_csv_text(bands.names, (
        BandsRow(uid=d.task.uid, dataset=str(d.dataset), domain=d.domain, n=d.n, k=d.k, system_errors=d.system_errors,
                 band=d.band, masses=dict(zip(bands.names, d.masses)) if d.masses else None, kept=d.kept,
                 split=d.split, reason=d.reason) for d in decisions))


def test_list_text(decisions: list[Decision], which: str, cfg: PrepareConfig) -> str:
    uids = sorted(d.task.uid for d in decisions if d.kept and d.split == which)
    head = (f"# {which} tasks chosen by data/prepare_data.py (seed {cfg.seed}, bands "
            f"{','.join(str(b) for b in cfg.bands.boundaries)}, kept {','.join(sorted(cfg.bands.keep))}): "
            f"{len(uids)} task(s)\n")
    return head + "".join(f"- {u}\n" for u in uids) if uids else head + "[]\n"


def parquet_rows(decisions: list[Decision], which: str) -> list[dict[str, Any]]:
    """verl's dataset rows: `prompt` (the query as a chat message: verl measures and filters prompts
    with it; the agent loop renders the real prompt itself), `data_source` (the domain),
    `agent_name` (the agent loop), `reward_model` (the reward is the episode's verdict: no ground
    truth), and `extra_info` {uid, dataset, band, index, split} that the agent loop finds its task
    by (`split`: train or validation, which records file the episode goes to)."""
    rows = []
    chosen = sorted((d for d in decisions if d.kept and d.split == which), key=lambda d: d.task.uid)
    for i, d in enumerate(chosen):
        rows.append({"data_source": d.domain, "agent_name": AGENT_LOOP_NAME,
                     "prompt": [{"role": "user", "content": d.task.query}],
                     "reward_model": {"style": "thinkingbox", "ground_truth": ""},
                     "extra_info": {"uid": d.task.uid, "dataset": str(Path(d.dataset).resolve()), "band": d.band, "index": i,
                                    "split": which}})
    return rows


def parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("data_source", pa.string()), ("agent_name", pa.string()),
                        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
                        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
                        ("extra_info", pa.struct([("uid", pa.string()), ("dataset", pa.string()),
                                                  ("band", pa.string()), ("index", pa.int64()),
                                                  ("split", pa.string())]))])
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf)
    return buf.getvalue()


def summary(decisions: list[Decision], bands: Bands, report: ProbeReport, problems: list[str]) -> dict[str, Any]:
    per: dict[str, Counter] = {b: Counter() for b in bands.names}
    for d in decisions:
        if d.band:
            per[d.band][d.domain] += 1
    reasons = Counter(d.reason.split(":")[0] if d.reason.startswith(("excluded", "screen")) else d.reason
                      for d in decisions if not d.kept)
    return {
        "candidates": len(decisions), "kept": sum(d.kept for d in decisions),
        "train": sum(d.split == "train" for d in decisions), "validation": sum(d.split == "validation" for d in decisions),
        "bands": {b: {"tasks": sum(per[b].values()), "kept": b in bands.keep, "by_domain": dict(sorted(per[b].items()))}
                  for b in bands.names},
        "not_kept": dict(sorted(reasons.items())),
        "probe_lines": report.lines, "unknown_uids": dict(sorted(report.unknown_uids.items())),
        "changed_tasks": dict(sorted(report.changed.items())), "duplicate_probes": report.duplicates,
        "probe_identity": {"used": report.identity, "left_out": dict(report.left_out)},
        "problems": problems + report.problems,
    }


def histogram_png(decisions: list[Decision], bands: Bands) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    domains = sorted({d.domain for d in decisions if d.band})
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    bottom = [0] * len(bands.names)
    for dom in domains:
        counts = [sum(1 for d in decisions if d.band == b and d.domain == dom) for b in bands.names]
        ax.bar(range(len(bands.names)), counts, bottom=bottom, label=dom)
        bottom = [x + y for x, y in zip(bottom, counts)]
    labels = [f"{b.replace('_', ' ')}\n[{lo:g}, {hi:g}{']' if hi == 1 else ')'}\n{'keep' if b in bands.keep else 'drop'}"
              for b, (lo, hi) in zip(bands.names, zip(bands.edges, bands.edges[1:]))]
    ax.set_xticks(range(len(bands.names)), labels, fontsize=8)
    ax.set_ylabel("tasks")
    ax.set_title("offline policy-relative difficulty: tasks per band (largest Jeffreys posterior mass)")
    if domains:
        ax.legend(fontsize=8)
    return figure_png(fig)


def sha256(path: Path) -> str:
    """A file's SHA-256; a directory's (a dataset) is the SHA-256 of "relative/path<TAB>file sha256"
    lines, one per file, sorted (bytecode caches left out: importing tasks writes them)."""
    if path.is_dir():
        files = sorted(f.relative_to(path).as_posix() for f in path.rglob("*")
                       if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc")
        lines = "".join(f"{f}\t{sha256(path / f)}\n" for f in files)
        return hashlib.sha256(lines.encode("utf-8")).hexdigest()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)  # as an ordinary write would leave it (mkstemp makes it private)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prepare(cfg: PrepareConfig) -> PrepareResult:
    if not cfg.probes:
        raise PrepareError("no probe records given (--probes FILE)")
    if not 0.0 <= cfg.val_fraction < 1.0:
        raise PrepareError(f"--val-fraction {cfg.val_fraction}: must be in [0, 1)")
    tasks, problems = _candidates(cfg)
    task_map = {uid: t for uid, (t, _) in tasks.items()}
    try:
        report = tally_probes(cfg.probes, task_map, keep_identity=cfg.keep_identity)
        screen = tally_probes(cfg.screen, task_map) if cfg.screen else None
    except (AttemptError, MixedProbesError) as e:  # a file that cannot be read (its bad lines are only reported)
        raise PrepareError(str(e)) from None
    if report.lines == 0:
        raise PrepareError(f"the probe records are empty: {', '.join(map(str, cfg.probes))}")
    if not report.tallies and not report.changed:
        raise PrepareError(f"no probe record names a task of {', '.join(map(str, cfg.datasets))} "
                           f"({len(report.unknown_uids)} unknown uid(s), {len(report.problems)} unreadable line(s))")
    decisions = _decide(cfg, report, screen, tasks)
    split(decisions, cfg.val_fraction, cfg.seed)
    summ = summary(decisions, cfg.bands, report, problems)
    out = cfg.out_dir
    files: dict[str, Callable[[], bytes | str]] = {
        "train.yaml": lambda: test_list_text(decisions, "train", cfg),
        "test.yaml": lambda: test_list_text(decisions, "validation", cfg),
        "train.parquet": lambda: parquet_bytes(parquet_rows(decisions, "train")),
        "test.parquet": lambda: parquet_bytes(parquet_rows(decisions, "validation")),
        "bands.csv": lambda: bands_csv(decisions, cfg.bands),
        "bands.png": lambda: histogram_png(decisions, cfg.bands),
        "summary.json": lambda: json.dumps(summ, indent=2, sort_keys=True) + "\n",
    }
    outputs = {}
    for name, make in files.items():
        write_atomic(out / name, make())
        outputs[name] = out / name
    inputs = [*cfg.probes, *cfg.screen, *cfg.datasets, *cfg.test_lists, *cfg.exclude_lists, *cfg.exclude_datasets]
    manifest = {"tool": "data/prepare_data.py", "config": _config_json(cfg),
                "inputs": {str(p): sha256(p) for p in inputs},
                "outputs": {name: sha256(p) for name, p in outputs.items()}}
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    outputs["manifest.json"] = out / "manifest.json"
    return PrepareResult(decisions, summ, outputs)


def _config_json(cfg: PrepareConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["bands"] = {"boundaries": list(cfg.bands.boundaries), "names": list(cfg.bands.names),
                  "keep": sorted(cfg.bands.keep)}
    return json.loads(json.dumps(d, default=str))


__all__ = ["AGENT_LOOP_NAME", "CSV_COLUMNS", "Decision", "PrepareConfig", "PrepareError", "PrepareResult",
           "domain_of", "parquet_rows", "prepare", "split", "write_atomic"]
