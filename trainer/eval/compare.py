"""Two agg.json files side by side: the seed's tables, base → candidate.

- Table 1: observed k/k, pass@1 (successful attempts), pass@k (tasks solved at least once),
  each as count (share), base → candidate, change (tasks or percentage points); under it the
  pass@1 change with a paired task-clustered bootstrap over the tasks both runs hold
  (`metrics.paired_bootstrap_delta`, seeded);
- Table 2: pass@1 (%) per domain, overall and observed k/k, one row per run and the change;
- per domain (the seed's Figure 3): pass@1, pass@k, observed k/k in %, base → candidate (points);
- Table 3 (when both have costs): campaign cost, cost per successful attempt, tasks passing
  k/k, cost per dependable task; changes in % (of the unrounded figures) and "N× as many".

`compare` returns the figures as data (`tbt compare --json`) from two `AggDoc`s
(trainer/eval/aggfile.py); `render` the text.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from trainer.eval import metrics
from trainer.eval.aggfile import AggDoc, Block, Cost, Share, as_doc

MINUS = "\u2212"  # the seed writes −7 tasks, −7.6%


def compare(base: AggDoc | Mapping[str, Any], cand: AggDoc | Mapping[str, Any], *, resamples: int = metrics.RESAMPLES,
            seed: int = 0) -> dict[str, Any]:
    """The figures (module docstring) as one JSON-ready dict. `base` and `cand` are `AggDoc`s, or
    the dicts of agg.json files (read as `AggDoc`s: `AggFileError` on a fault)."""
    base, cand = as_doc(base, "base"), as_doc(cand, "candidate")
    bo, co = base.overall, cand.overall
    kb, kc = bo.k, co.k
    k = f"{kb}" if kb == kc else f"{kb}|{kc}"
    common = [u for u in base.tasks if u in cand.tasks and base.tasks[u].n and cand.tasks[u].n]
    paired = metrics.paired_bootstrap_delta([base.tasks[u].tally for u in common], [cand.tasks[u].tally for u in common],
                                            resamples=resamples, seed=seed)
    out: dict[str, Any] = {
        "base": base.label or "base", "candidate": cand.label or "candidate", "k": k,
        "tasks": {"base": bo.tasks, "candidate": co.tasks, "paired": len(common),
                  "only_in_base": sorted(set(base.tasks) - set(cand.tasks)),
                  "only_in_candidate": sorted(set(cand.tasks) - set(base.tasks))},
        "table1": [
            _row(f"Observed {k}/{k}", bo.observed_k_of_k, co.observed_k_of_k, "tasks"),
            _row("pass@1 (successful attempts)", Share(bo.passes, bo.attempts, bo.pass_at_1.value),
                 Share(co.passes, co.attempts, co.pass_at_1.value), "pt"),
            _row(f"pass@{k} (tasks solved at least once)", bo.solved_at_least_once, co.solved_at_least_once, "tasks"),
        ],
        "paired_pass_at_1": paired,
        "domains": [_domain(d, base.by_domain.get(d), cand.by_domain.get(d))
                    for d in dict.fromkeys([*base.by_domain, *cand.by_domain])],
    }
    if bo.cost is not None and co.cost is not None:
        out["table3"] = _costs(bo.cost, co.cost, k)
    return out


def _row(metric: str, b: Share, c: Share, unit: str) -> dict[str, Any]:
    change = (c.tasks - b.tasks) if unit == "tasks" else _diff(c.share, b.share, 100)
    return {"metric": metric, "base": {"count": b.tasks, "share": b.share},
            "candidate": {"count": c.tasks, "share": c.share}, "change": change, "unit": unit}


def _diff(a: float | None, b: float | None, scale: float = 1.0) -> float | None:
    return None if a is None or b is None else (a - b) * scale


def _domain(name: str, b: Block | None, c: Block | None) -> dict[str, Any]:
    def figures(x: Block | None) -> dict[str, Any] | None:
        if x is None:
            return None
        return {"tasks": x.tasks, "pass_at_1": x.pass_at_1.value, "pass_at_k": x.pass_at_k.get(x.k),
                "solved_at_least_once": x.solved_at_least_once.share, "observed_k_of_k": x.observed_k_of_k.share,
                "observed_tasks": x.observed_k_of_k.tasks}

    fb, fc = figures(b), figures(c)
    change = None
    if fb and fc:
        change = {m: _diff(fc[m], fb[m], 100) for m in ("pass_at_1", "solved_at_least_once", "observed_k_of_k")}
    return {"domain": name, "base": fb, "candidate": fc, "change_pt": change}


def _costs(b: Cost, c: Cost, k: str) -> dict[str, Any]:
    rows = []
    for metric, key in ((f"Campaign cost, {k} runs", "campaign"), ("Cost per successful attempt", "per_successful_attempt"),
                        (f"Tasks passing {k}/{k}", "dependable_tasks"), ("Cost per dependable task", "per_dependable_task")):
        vb, vc = getattr(b, key), getattr(c, key)
        if key == "dependable_tasks":
            change = {"times": vc / vb if vb else None}
        else:
            change = {"percent": (vc / vb - 1) * 100 if vb and vc is not None else None}
        rows.append({"metric": metric, "key": key, "base": vb, "candidate": vc, **change})
    return {"rows": rows, "complete": b.complete and c.complete,
            "unpriced": {"base": list(b.unpriced), "candidate": list(c.unpriced)}}


# ---------------------------------------------------------------------------- text

def _signed(x: float | None, fmt: str) -> str:
    """+9.08, −7, 0.00 (no sign on what shows as zero)."""
    if x is None:
        return "—"
    s = format(abs(x), fmt)
    if float(s.replace(",", "")) == 0:
        return s
    return ("+" if x > 0 else MINUS) + s


def pct(share: float | None, digits: int = 2) -> str:
    """0.517 -> 51.70% (— for None)."""
    return "—" if share is None else f"{share * 100:.{digits}f}%"


def dollars(x: float | None) -> str:
    """$925.80, $1,234.50, $0.177, $0.000412 (three significant digits under a cent)."""
    if x is None:
        return "—"
    if x >= 1:
        return f"${x:,.2f}"
    if x >= 0.01:
        return f"${x:.3f}"
    if x <= 0:
        return "$0.00"
    return f"${x:.{2 - math.floor(math.log10(x))}f}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows)))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def render(cmp: Mapping[str, Any]) -> str:
    b, c, k = cmp["base"], cmp["candidate"], cmp["k"]
    t = cmp["tasks"]
    lines = [f"Table 1. {b} → {c} ({t['base']} → {t['candidate']} tasks, {k} attempts each)"]
    rows = [["Metric", b, "", c, "Change"]]
    for r in cmp["table1"]:
        change = (f"{_signed(r['change'], 'd')} tasks" if r["unit"] == "tasks" else f"{_signed(r['change'], '.2f')} pt")
        rows.append([r["metric"], f"{r['base']['count']:,} ({pct(r['base']['share'])})", "→",
                     f"{r['candidate']['count']:,} ({pct(r['candidate']['share'])})", change])
    lines += _table(rows)
    p = cmp["paired_pass_at_1"]
    if p["delta"] is not None:
        lo, hi = p["interval"]
        lines.append(f"pass@1 change, paired bootstrap over {p['tasks']} tasks ({p['resamples']} resamples): "
                     f"{_signed(p['delta'] * 100, '.2f')} pt, {p['level']:.0%} interval {_signed(lo * 100, '.2f')} to "
                     f"{_signed(hi * 100, '.2f')} pt, share of resamples with no gain {p['p_le_0']:.3f}")
    if t["only_in_base"] or t["only_in_candidate"]:
        lines.append(f"tasks in one run only (not paired): {len(t['only_in_base'])} base, "
                     f"{len(t['only_in_candidate'])} candidate")
    doms = cmp["domains"]
    lines += ["", f"Table 2. pass@1 (%) by domain; observed {k}/{k} over all tasks"]
    rows = [["Model", *(d["domain"] for d in doms), "Overall", f"Observed {k}/{k}"]]
    obs, p1 = cmp["table1"][0], cmp["table1"][1]
    for who, name in (("base", b), ("candidate", c)):
        rows.append([name, *(_num(d[who], "pass_at_1") for d in doms), pct(p1[who]["share"]).rstrip("%"),
                     f"{obs[who]['count']} ({pct(obs[who]['share'])})"])
    rows.append(["change", *(_signed(d["change_pt"]["pass_at_1"], ".2f") if d["change_pt"] else "—" for d in doms),
                 _signed(p1["change"], ".2f"), _signed(obs["change"], "d")])
    lines += _table(rows)
    lines += ["", "Per domain (%): base → candidate (change, points)"]
    rows = [["Domain", "Tasks", "pass@1", f"pass@{k}", f"Observed {k}/{k}"]]
    for d in doms:
        rows.append([d["domain"], _tasks(d), *(_move(d, m) for m in ("pass_at_1", "solved_at_least_once", "observed_k_of_k"))])
    lines += _table(rows)
    if "table3" in cmp:
        lines += ["", "Table 3. Estimated cost and dependability"]
        rows = [["Measure", b, "", c, "Change"]]
        for r in cmp["table3"]["rows"]:
            if r["key"] == "dependable_tasks":
                fb, fc = f"{r['base']:,}", f"{r['candidate']:,}"
                change = "—" if r["times"] is None else f"{r['times']:.1f}× as many"
            else:
                fb, fc = dollars(r["base"]), dollars(r["candidate"])
                change = "—" if r["percent"] is None else f"{_signed(r['percent'], '.1f')}%"
            rows.append([r["metric"], fb, "→", fc, change])
        lines += _table(rows)
        for who, items in cmp["table3"]["unpriced"].items():
            for item in items:
                lines.append(f"unpriced ({who}, not counted: the figures are lower bounds): {item}")
    return "\n".join(lines)


def _num(fig: Mapping[str, Any] | None, key: str) -> str:
    return "—" if not fig or fig[key] is None else f"{fig[key] * 100:.2f}"


def _tasks(d: Mapping[str, Any]) -> str:
    nb, nc = (d[w]["tasks"] if d[w] else 0 for w in ("base", "candidate"))
    return str(nb) if nb == nc else f"{nb} → {nc}"


def _move(d: Mapping[str, Any], key: str) -> str:
    ch = d["change_pt"][key] if d["change_pt"] else None
    return f"{_num(d['base'], key)} → {_num(d['candidate'], key)} ({_signed(ch, '.1f')})"


__all__ = ["MINUS", "compare", "dollars", "pct", "render"]
