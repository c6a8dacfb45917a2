"""`tbt report`: agg.json files -> one HTML page of tables, with its plots as PNGs beside it.

    report(["base.agg.json", "candidate.agg.json"], "out/report.html", probes="bands.csv")

writes `out/report.html` and, in the same folder, `report-reliability.png` (always),
`report-heatmap-2.png` ... (one per candidate: every file after the first is compared with the
first, the base), `report-pareto.png` (when any run has a cost: aggregated with a price table)
and `report-bands.png` (when probe data is given), plus one `report-ANCHOR.png` per extra
`Section` (`tbt report --difficulty`: the online-difficulty trace). The HTML links them by relative name and holds
everything else itself (inline CSS, no script, no remote resource), so the folder can be moved or
served as it is.

Only like with like: a candidate of another k, or over other tasks, than the base is refused
unless told to compare on the common tasks / at a common k (`common_tasks`, `at_k`; tbt report
--common-tasks / --at-k), and the comparison's notes then say so (trainer/eval/compare.py).

Sections: the runs (tasks, attempts, pass@1 with its Jeffreys and task-bootstrap intervals, pass@k,
observed k/k, the noise floor: flip rate and minimum detectable pass@1 difference, cost); per candidate the seed's Table 1 (observed k/k, pass@1, pass@k: base ->
candidate, change) with the verdict on the pass@1 change (compare.py: one interval, distinguishable or not), Table 3 (costs) and the
per-domain heatmap (Figure 3, trainer/eval/report_plots.py); cost per successful attempt vs
pass@1 with the Pareto frontier (Figure 4); reliability curves (pass^k and pass@k vs k); per run,
the per-domain table; the band histogram of `bands.csv` (data/prepare_data.py).

With `view=True` (tbt report --view) the trajectory viewer (trainer/eval/view.py) of every run's
episodes is written beside the report as `NAME-episodes.html`, from the records files each agg.json
was aggregated from (its `sources`, found as written, i.e. from the working directory, or beside the
agg.json; the system errors from the `.errors.jsonl` among them or beside them): the runs table links
it, and each comparison lists the tasks whose pass share moved most, each count linking to that
task's episodes in the viewer (`NAME-episodes.html#uid=UID&run=I`). A source that cannot be found
or read is a `ReportError` before anything is written.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from trainer.eval import compare as cmp_mod
from trainer.eval import report_plots as plots
from trainer.formats.aggfile import AggDoc, AggFileError, Block, Cost, read_agg
from trainer.eval.compare import pct
from trainer.formats.bandsfile import BandsFileError, read_bands_csv

HEAT_METRICS = ("pass@1", "pass@{k}", "observed {k}/{k}")  # Figure 3's columns
CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f5f8}td:first-child,th:first-child{text-align:left}.up{color:#1a7f37}.down{color:#c62828}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}.note{color:#666;font-size:.9em}code{font-size:.92em}"""


class ReportError(ValueError):
    """Inputs that cannot be reported (the message names the file and what is wrong)."""


@dataclass(frozen=True)
class Section:
    """A section another layer builds (tbt report --difficulty: the online-difficulty trace): its
    anchor (also the PNG's name suffix), title, HTML body (escaped already) and one PNG."""

    anchor: str
    title: str
    body: str
    png: bytes


@dataclass
class Run:
    label: str
    path: Path
    doc: AggDoc

    @property
    def overall(self) -> Block:
        return self.doc.overall

    @property
    def k(self) -> int:
        return self.overall.k

    @property
    def cost(self) -> Cost | None:
        return self.overall.cost


def load_runs(paths: Sequence[str | Path]) -> list[Run]:
    """The agg.json files, labelled by their `label` (the file name added when two repeat)."""
    runs = []
    for p in paths:
        try:
            doc = read_agg(p)
        except AggFileError as e:
            raise ReportError(str(e)) from None
        runs.append(Run(doc.label or Path(p).stem, Path(p), doc))
    labels = [r.label for r in runs]
    for r in runs:
        if labels.count(r.label) > 1:
            r.label = f"{r.label} ({r.path.name})"
    return runs


def read_bands(path: str | Path) -> tuple[list[str], dict[str, dict[str, int]], dict[str, int], int]:
    """bands.csv (trainer/formats/bandsfile.py) -> (band names in order, {band: {domain: tasks}},
    {band: kept}, tasks without a band). Band order: the `mass_<band>` columns, else first appearance."""
    try:
        f = read_bands_csv(path, need=("uid", "domain", "band", "kept"))
    except BandsFileError as e:
        raise ReportError(str(e)) from None
    counts: dict[str, dict[str, int]] = {}
    kept: dict[str, int] = {}
    unbanded = 0
    for row in f.rows:
        if not row.band:
            unbanded += 1
            continue
        per = counts.setdefault(row.band, {})
        per[row.domain or "unknown"] = per.get(row.domain or "unknown", 0) + 1
        kept[row.band] = kept.get(row.band, 0) + row.kept
    return f.bands or list(counts), counts, kept, unbanded


# ---------------------------------------------------------------------------- formatting

def _e(x: Any) -> str:
    return html.escape(str(x))


def _interval(pair: Sequence[float] | None) -> str:
    return "—" if not pair else f"[{pair[0] * 100:.1f}, {pair[1] * 100:.1f}]"


def _signed(x: float | None, unit: str = "", digits: int = 2) -> str:
    if x is None:
        return "—"
    text = f"{abs(x):,.{digits}f}{unit}"
    if float(f"{abs(x):.{digits}f}") == 0:
        return f'<span>{text}</span>'
    return f'<span class="{"up" if x > 0 else "down"}">{"+" if x > 0 else cmp_mod.MINUS}{text}</span>'


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table; cells are HTML already (escape text with `_e`)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(name: str, alt: str) -> str:
    return f'<p><img src="{_e(name)}" alt="{_e(alt)}"></p>'


# ---------------------------------------------------------------------------- sections

def runs_section(runs: Sequence[Run], viewer: Viewer | None = None) -> str:
    any_cost = any(r.cost for r in runs)
    headers = ["run", "file", "tasks", "attempts", "pass@1", "95% Jeffreys", "95% task bootstrap", "pass@k",
               "observed k/k", "flip rate", "min. detectable Δ pass@1"] + (
        ["campaign cost", "per successful attempt", "per dependable task"] if any_cost else []) + (
        ["episodes"] if viewer else [])
    rows = []
    for i, r in enumerate(runs):
        o, k = r.overall, r.k
        obs = o.observed_k_of_k
        row = [_e(r.label), f"<code>{_e(r.path.name)}</code>", f"{o.tasks:,}",
               f"{o.attempts:,}", pct(o.pass_at_1.value), _interval(o.pass_at_1.jeffreys),
               _interval(o.pass_at_1.bootstrap), f"pass@{k} {pct(o.pass_at_k.get(k))}",
               f"{obs.tasks:,} of {obs.over:,} ({pct(obs.share)}) at {k}/{k}", pct(o.flip_rate, 0),
               "—" if o.min_detectable_difference is None else f"{o.min_detectable_difference * 100:.1f} pt"]
        if any_cost:
            c = r.cost
            row += ([_e(cmp_mod.dollars(c.campaign)) + ("" if c.complete else " (lower bound)"),
                     _e(cmp_mod.dollars(c.per_successful_attempt)), _e(cmp_mod.dollars(c.per_dependable_task))]
                    if c else [_e(cmp_mod.dollars(None))] * 3)
        if viewer:
            row.append(f'<a href="{_e(viewer.name)}">{viewer.episodes[i]:,} in the viewer</a>')
        rows.append(row)
    notes = "".join(f'<p class="note">{_e(r.label)}: {_e(r.overall.note)}</p>' for r in runs if r.overall.note)
    if viewer:
        notes += (f'<p class="note">Every episode of these runs, to click through (tasks × repetitions, the '
                  f'conversation, tool calls, verdict and golden-row diff of each): <a href="{_e(viewer.name)}">'
                  f"{_e(viewer.name)}</a>.</p>")
    return "<h2 id=runs>Runs</h2>" + table(headers, rows) + notes


@dataclass
class Viewer:
    """The trajectory viewer page written beside the report (`report(view=True)`): its file name,
    the episodes of each run in it (the report's run order), and its page."""

    name: str
    episodes: list[int]
    page: str

    def link(self, uid: str, run: int) -> str:
        return f"{self.name}#uid={quote(uid, safe='')}&run={run}"


def _sources(run: Run) -> tuple[list[Path], list[Path]]:
    """(records files, errors files) of an agg.json's `sources`, each found as written or beside
    the agg.json; the errors file beside a records file is added when it exists."""
    from trainer.rollout.runner import default_errors_path

    if not run.doc.sources:
        raise ReportError(f"--view: {run.path} names no records file (its sources are empty): write the viewer "
                          "with tbt view RECORDS -o PAGE.html")
    records: list[Path] = []
    errors: list[Path] = []
    for src in run.doc.sources:
        p = Path(src)
        found = next((c for c in ([p] if p.is_absolute() else [p, run.path.parent / p, run.path.parent / p.name])
                      if c.is_file()), None)
        if found is None:
            raise ReportError(f"--view: {run.path} was aggregated from {src}, which is not there (looked from the "
                              f"working directory and in {run.path.parent})")
        (errors if found.name.endswith(".errors.jsonl") else records).append(found)
    for r in records:
        beside = default_errors_path(r)
        if beside.is_file() and all(beside.resolve() != e.resolve() for e in errors):
            errors.append(beside)
    return records, errors


def viewer_page(runs: Sequence[Run], name: str) -> Viewer:
    """The viewer of every run's episodes, from the records its agg.json names (module docstring);
    tasks grouped by the agg.json's domains."""
    from trainer.eval import view
    from trainer.formats.attempts import AttemptError, read_attempts

    vruns: list[view.Run] = []
    domains: dict[str, str] = {}
    for r in runs:
        records, errors = _sources(r)
        try:
            scored = read_attempts(records, keep_records=True).attempts
            failed = read_attempts(errors, keep_records=True).attempts if errors else []
        except AttemptError as e:
            raise ReportError(f"--view: {e}") from None
        vruns.append(view.Run(records[0], scored, failed, errors[0] if errors else None, name=r.label))
        domains.update({u: t.domain for u, t in r.doc.tasks.items() if u not in domains})
    data = view.page_data(vruns, domains_of=domains, title="Episodes: " + ", ".join(r.label for r in runs))
    counts = [sum(e["run"] == i for e in data["episodes"]) for i in range(len(runs))]
    return Viewer(name, counts, view.render(data))


def moved_section(base: Run, cand: Run, index: int, viewer: Viewer, top: int = 10) -> str:
    """The tasks whose pass share moved most from base to candidate, each count linking to the
    task's episodes of that run in the viewer."""
    both = [u for u in base.doc.tasks if u in cand.doc.tasks and base.doc.tasks[u].n and cand.doc.tasks[u].n]
    share = {u: (base.doc.tasks[u].c / base.doc.tasks[u].n, cand.doc.tasks[u].c / cand.doc.tasks[u].n) for u in both}
    moved = sorted((u for u in both if share[u][0] != share[u][1]),
                   key=lambda u: (-abs(share[u][1] - share[u][0]), u))[:top]
    if not moved:
        return f'<p class="note">No task\'s pass share moved (<a href="{_e(viewer.name)}">the episodes</a>).</p>'
    rows = []
    for u in moved:
        b, c = base.doc.tasks[u], cand.doc.tasks[u]
        rows.append([_e(u), _e(b.domain), f'<a href="{_e(viewer.link(u, 0))}">{b.c}/{b.n}</a>', "→",
                     f'<a href="{_e(viewer.link(u, index - 1))}">{c.c}/{c.n}</a>',
                     _signed((share[u][1] - share[u][0]) * 100, " pt", 0)])
    return (f"<h3>Tasks that moved most ({len(moved)} of {len(both)}; a count opens its episodes)</h3>"
            + table(["task", "domain", "base", "", "candidate", "change in pass share"], rows))


def _heat_rows(c: Mapping[str, Any], base: Run, cand: Run) -> tuple[list[str], list[list[float | None]], list[list[float | None]]]:
    names, b, d = [], [], []
    keys = ("pass_at_1", "solved_at_least_once", "observed_k_of_k")
    for dom in c["domains"]:
        names.append(dom["domain"])
        b.append([None if dom["base"] is None or dom["base"][m] is None else dom["base"][m] * 100 for m in keys])
        d.append([None if dom["candidate"] is None or dom["candidate"][m] is None else dom["candidate"][m] * 100 for m in keys])

    def overall(o: Block) -> list[float | None]:
        vals = (o.pass_at_1.value, o.solved_at_least_once.share, o.observed_k_of_k.share)
        return [None if v is None else v * 100 for v in vals]
    return names + ["Overall"], b + [overall(base.overall)], d + [overall(cand.overall)]


def comparison_section(base: Run, cand: Run, index: int, out_dir: Path, stem: str, *, common_tasks: bool = False,
                       at_k: int | None = None, viewer: Viewer | None = None) -> tuple[str, Path]:
    try:
        c = cmp_mod.compare(base.doc, cand.doc, common_tasks=common_tasks, at_k=at_k, names=(base.label, cand.label))
    except cmp_mod.CompareError as e:
        raise ReportError(f"{base.path} vs {cand.path}: {e}") from None
    k = c["k"]
    rows = []
    for row in c["table1"]:
        unit = " tasks" if row["unit"] == "tasks" else " pt"
        digits = 2 if row["unit"] != "tasks" else (0 if isinstance(row["change"], int) else 1)
        rows.append([_e(row["metric"] + (" (estimated)" if row.get("estimated") else "")),
                     f"{cmp_mod.count(row['base']['count'])} ({pct(row['base']['share'])})", "→",
                     f"{cmp_mod.count(row['candidate']['count'])} ({pct(row['candidate']['share'])})",
                     _signed(row["change"], unit, digits)])
    out = [f"<h2 id=compare-{index}>{_e(base.label)} → {_e(cand.label)}</h2>"]
    out += [f'<p class="note">{_e(n)}</p>' for n in c["notes"]]
    out.append(table(["metric", "base", "", "candidate", "change"], rows))
    ch = c.get("change")
    if ch:
        lines = [cmp_mod.change_line("pass@1 change", ch), f"pairing: by {ch['pairing']} ({ch['pairing_why']})"]
        lines += [cmp_mod.change_line(d, x) for d, x in ch["domains"].items()]
        out.append('<p class="note">' + "<br>".join(_e(x) for x in lines) + "</p>")
    if c.get("table3"):
        trows = []
        for row in c["table3"]["rows"]:
            fmt = (lambda v: f"{v:,}" if v is not None else "—") if row["key"] == "dependable_tasks" else cmp_mod.dollars
            change = (f"{row['times']:.1f}× as many" if row.get("times") is not None else "—") if "times" in row \
                else _signed(row.get("percent"), "%", 1)
            trows.append([_e(row["metric"]), _e(fmt(row["base"])), "→", _e(fmt(row["candidate"])), change])
        out.append("<h3>Cost</h3>" + table(["measure", "base", "", "candidate", "change"], trows))
        if not c["table3"]["complete"]:
            out.append('<p class="note">Some tokens have no price: the costs are lower bounds.</p>')
    names, b, d = _heat_rows(c, base, cand)
    png = out_dir / f"{stem}-heatmap-{index}.png"
    plots.heatmap(names, [m.format(k=k) for m in HEAT_METRICS], b, d, (base.label, cand.label), png)
    out.append(f"<h3>Per domain (Figure 3)</h3>{_img(png.name, f'per-domain heatmap: {base.label} vs {cand.label}')}")
    drows = [[_e(dom["domain"])] + [pct(None if x is None else x / 100) for x in (*bv, *dv)]
             + [_signed(None if bv[j] is None or dv[j] is None else dv[j] - bv[j], " pt") for j in range(3)]
             for dom, bv, dv in zip(c["domains"] + [{"domain": "Overall"}], b, d)]
    heads = [f"{m.format(k=k)}" for m in HEAT_METRICS]
    out.append(table(["domain"] + [f"{h} base" for h in heads] + [f"{h} cand." for h in heads]
                     + [f"Δ {h}" for h in heads], drows))
    if c.get("tags"):
        tnz = (ch or {}).get("tags") or {}
        trows = [[_e(g["tag"]), f'{(g["candidate"] or g["base"] or {}).get("tasks", 0):,}', pct(g["base"]["pass_at_1"] if g["base"] else None),
                  pct(g["candidate"]["pass_at_1"] if g["candidate"] else None),
                  _signed(g["change_pt"]["pass_at_1"] if g["change_pt"] else None, " pt"),
                  _e(cmp_mod.change_mark(tnz.get(g["tag"])))] for g in c["tags"]]
        out.append(f'<h3>Per tag</h3><p class="note">The pass@1 change of each tag by the sign-flip test over its '
                   f'tasks, the {ch["tag_tests"] if ch else len(trows)} tags judged together (Bonferroni).</p>'
                   + table(["tag", "tasks", "pass@1 base", "pass@1 cand.", "Δ pass@1", "verdict"], trows))
    if viewer is not None:
        out.append(moved_section(base, cand, index, viewer))
    return "".join(out), png


def pareto_section(runs: Sequence[Run], out_dir: Path, stem: str) -> tuple[str, Path | None]:
    priced = [r for r in runs if r.cost and r.cost.per_successful_attempt is not None]
    if not priced:
        return ("<h2 id=cost>Cost vs pass@1</h2><p class=note>No run has a cost: aggregate with a price table "
                "(<code>tbt aggregate --prices prices.yaml</code>) to plot cost per successful attempt.</p>"), None
    pts = [plots.ParetoPoint(r.label, (r.overall.pass_at_1.value or 0.0) * 100, r.cost.per_successful_attempt)
           for r in priced if r.cost and r.cost.per_successful_attempt is not None]
    png = plots.pareto(pts, out_dir / f"{stem}-pareto.png")
    front = {priced[i].label for i in plots.pareto_front([(p.pass_at_1, p.cost) for p in pts])}
    rows = [[_e(r.label), pct(r.overall.pass_at_1.value), _e(cmp_mod.dollars(p.cost)), "yes" if r.label in front else ""]
            for r, p in zip(priced, pts)]
    skipped = [r.label for r in runs if r not in priced]
    note = (f'<p class="note">Not plotted (no cost, or no successful attempt to divide it by): '
            f'{_e(", ".join(skipped))}.</p>') if skipped else ""
    return ("<h2 id=cost>Cost per successful attempt vs pass@1 (Figure 4)</h2>"
            + _img(png.name, "cost per successful attempt vs pass@1 with the Pareto frontier")
            + table(["run", "pass@1", "cost per successful attempt", "on the Pareto frontier"], rows) + note), png


def reliability_section(runs: Sequence[Run], out_dir: Path, stem: str) -> tuple[str, Path]:
    def curve(by_k: Mapping[int, float | None]) -> dict[int, float | None]:
        return {k: (None if v is None else v * 100) for k, v in by_k.items()}
    series = [plots.Curve(r.label, curve(r.overall.pass_hat_k), curve(r.overall.pass_at_k)) for r in runs]
    png = plots.reliability(series, out_dir / f"{stem}-reliability.png")
    kmax = max((max(s.pass_hat_k, default=1) for s in series), default=1)
    ks = sorted({1, 2, 4, 8, 16, kmax, *((kmax + 1) // 2,)} & set(range(1, kmax + 1)))
    rows = [[_e(s.label)] + [pct(None if s.pass_hat_k.get(k) is None else s.pass_hat_k[k] / 100, 1) for k in ks]
            for s in series]
    return ("<h2 id=reliability>Reliability curves</h2>" + _img(png.name, "pass^k and pass@k against k")
            + table(["run"] + [f"pass^{k}" for k in ks], rows)), png


def domains_section(runs: Sequence[Run]) -> str:
    out = ["<h2 id=domains>Per domain</h2>"]
    for r in runs:
        k = r.k
        rows = []
        for name, b in r.doc.by_domain.items():
            obs = b.observed_k_of_k
            rows.append([_e(name), f"{b.tasks:,}", pct(b.pass_at_1.value), _interval(b.pass_at_1.jeffreys),
                         pct(b.pass_at_k.get(k)), f"{obs.tasks:,} ({pct(obs.share)})"])
        out.append(f"<h3>{_e(r.label)}</h3>" + table(["domain", "tasks", "pass@1", "95% Jeffreys", f"pass@{k}",
                                                      f"observed {k}/{k}"], rows))
    return "".join(out)


def bands_section(path: Path, out_dir: Path, stem: str) -> tuple[str, Path]:
    names, counts, kept, unbanded = read_bands(path)
    png = plots.bands(names, counts, kept, out_dir / f"{stem}-bands.png")
    rows = [[_e(b), f"{sum(counts.get(b, {}).values()):,}", f"{kept.get(b, 0):,}"] for b in names]
    note = f'<p class="note">{unbanded:,} task(s) without a band (not probed, or too few probes).</p>' if unbanded else ""
    return (f"<h2 id=bands>Difficulty bands (<code>{_e(path.name)}</code>)</h2>"
            + _img(png.name, "tasks per difficulty band") + table(["band", "tasks", "kept"], rows) + note), png


def report(agg_paths: Sequence[str | Path], html_path: str | Path, probes: str | Path | None = None,
           sections: Sequence[Section] = (), *, common_tasks: bool = False, at_k: int | None = None,
           view: bool = False) -> list[Path]:
    """Write the HTML and its PNGs (module docstring); the files written, the HTML first (and with
    `view`, the viewer page last). A candidate of another k or over other tasks than the base is a
    `ReportError` unless `common_tasks` / `at_k` say how to compare them (trainer/eval/compare.py;
    said in the page)."""
    if not agg_paths:
        raise ReportError("give at least one agg.json")
    runs = load_runs(agg_paths)
    for cand in runs[1:]:  # every comparison checked before anything is written
        try:
            cmp_mod.check_comparable(runs[0].doc, cand.doc, names=(runs[0].label, cand.label),
                                     common_tasks=common_tasks, at_k=at_k)
        except cmp_mod.CompareError as e:
            raise ReportError(f"{runs[0].path} vs {cand.path}: {e}") from None
    html_path = Path(html_path)
    out_dir = html_path.parent
    stem = html_path.stem
    viewer = viewer_page(runs, f"{stem}-episodes.html") if view else None  # every source read before writing
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs: list[Path] = []
    parts = [runs_section(runs, viewer)]
    for i, cand in enumerate(runs[1:], start=2):
        text, png = comparison_section(runs[0], cand, i, out_dir, stem, common_tasks=common_tasks, at_k=at_k,
                                       viewer=viewer)
        parts.append(text)
        pngs.append(png)
    text, png = pareto_section(runs, out_dir, stem)
    parts.append(text)
    pngs += [png] if png else []
    text, png = reliability_section(runs, out_dir, stem)
    parts += [text, domains_section(runs)]
    pngs.append(png)
    if probes is not None:
        text, png = bands_section(Path(probes), out_dir, stem)
        parts.append(text)
        pngs.append(png)
    for sec in sections:
        png = out_dir / f"{stem}-{sec.anchor}.png"
        png.write_bytes(sec.png)
        parts.append(f"<h2 id={_e(sec.anchor)}>{_e(sec.title)}</h2>" + _img(png.name, sec.title) + sec.body)
        pngs.append(png)
    title = "Evaluation report: " + ", ".join(r.label for r in runs)
    page = (f"<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{_e(title)}</h1>"
            f'<p class="note">From {_e(", ".join(str(p) for p in agg_paths))}'
            f'{_e(f" and {probes}") if probes else ""}. pass@k and pass^k are the unbiased estimators; '
            "system errors are excluded and re-run, never counted as failures.</p>"
            + "".join(parts) + "</body></html>\n")
    extra: list[Path] = []
    if viewer is not None:
        from trainer.eval.view import write_page

        write_page(viewer.page, out_dir / viewer.name)
        extra.append(out_dir / viewer.name)
    tmp = html_path.with_name(html_path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(html_path)
    return [html_path, *pngs, *extra]


__all__ = ["ReportError", "Run", "Section", "Viewer", "load_runs", "read_bands", "report", "table", "viewer_page"]
