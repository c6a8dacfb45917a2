"""Two agg.json files side by side: the seed's tables, base → candidate.

- Table 1: observed k/k, pass@1 (successful attempts), pass@k (tasks solved at least once),
  each as count (share), base → candidate, change (tasks or percentage points);
- the verdict on the pass@1 change (`change`, `metrics.pass_at_1_change`): one interval and one
  `distinguishable`, from the sign-flip test over the tasks both runs hold (the tasks are the
  unit; exact up to 16 tasks, seeded Monte Carlo beyond), with the `pairing` of the runs' attempts
  ("seed": both runs drew the same episode seeds, so attempt r of a task pairs with attempt r of
  it in the other run; "task": not known or not so, the tasks alone pair) and, when not
  distinguishable, the tasks or attempts per task that would tell a change that size (`needed`).
  The same verdict per domain (when there are several: the domains judged together, Bonferroni)
  and per tag (the tags a family of their own), so that neither moves the overall verdict;
- Table 2: pass@1 (%) per domain, overall and observed k/k, one row per run and the change;
- per domain (the seed's Figure 3): pass@1, pass@k, observed k/k in %, base → candidate (points);
- Table 3 (when both have costs): campaign cost, cost per successful attempt, tasks passing
  k/k, cost per dependable task; changes in % (of the unrounded figures) and "N× as many";
- per tag (`tags`, when the runs were aggregated with their dataset: agg.json's task `tags`, the
  `domain:` tag aside): pass@1, pass@k and observed k/k base → candidate, as per domain, and the
  tag's verdict.

Only like with like: runs of a different k (attempts per task) or over different task sets are
refused (`CompareError`), since pass@k and observed k/k of k = 4 and k = 2 are different
quantities and a task-set difference moves every figure. Told to, `compare` compares them on
the tasks both hold (`common_tasks`) and/or at a common k (`at_k`, at most each run's k), and the
output's `notes` say so (what was left out, what was estimated):
- pass@1 is Σc/Σn over the compared tasks, every attempt of each run (unbiased at any k);
- pass@K of a run with more than K attempts per task is the unbiased estimator
  1 − C(n−c, K)/C(n, K), and its "K/K" the unbiased estimate of the share of tasks passing K
  of K drawn attempts, pass^K = C(c, K)/C(n, K) (counts are then expected counts); a run with
  exactly K attempts shows what it observed (the same estimators give exactly that);
- Table 3 (cost) is over each run's own campaign, so it is left out (and said) when the tasks or k
  compared are not the runs' own.

`compare` returns the figures as data (`tbt compare --json`) from two `AggDoc`s
(trainer/formats/aggfile.py); `render` the text.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from trainer.eval import metrics
from trainer.formats.aggfile import AggDoc, Cost, TaskRow, as_doc

MINUS = "\u2212"  # the seed writes −7 tasks, −7.6%


class CompareError(ValueError):
    """Runs that are not like with like (another k, other tasks) and no option saying how to compare."""


def _k(doc: AggDoc) -> int:
    return doc.overall.k


def check_comparable(base: AggDoc, cand: AggDoc, *, names: tuple[str, str] = ("base", "candidate"),
                     common_tasks: bool = False, at_k: int | None = None) -> tuple[list[str], int]:
    """(the uids to compare, the k to compare at); `CompareError` when the runs differ in k or in
    tasks and the options do not say how to compare them."""
    kb, kc = _k(base), _k(cand)
    only_b = [u for u in base.tasks if u not in cand.tasks]
    only_c = [u for u in cand.tasks if u not in base.tasks]
    if (only_b or only_c) and not common_tasks:
        ex = ", ".join((only_b + only_c)[:3])
        raise CompareError(f"{names[0]} and {names[1]} hold different tasks ({len(only_b)} only in {names[0]}, "
                           f"{len(only_c)} only in {names[1]}; e.g. {ex}): every figure would compare different task "
                           f"sets. --common-tasks compares them on the {len(base.tasks) - len(only_b)} tasks both hold "
                           "(and says so)")
    if at_k is None:
        if kb != kc:
            raise CompareError(f"{names[0]} has {kb} attempts per task, {names[1]} {kc}: pass@k and observed k/k "
                               f"of different k are different quantities. --at-k {min(kb, kc)} compares both at "
                               f"k = {min(kb, kc)} (the larger run's figures then estimated from its attempts; "
                               "pass@1 is the same at any k)")
        at_k = kb
    if at_k < 1 or at_k > min(kb, kc):
        raise CompareError(f"--at-k {at_k}: must be between 1 and the smaller run's k ({min(kb, kc)}; "
                           f"{names[0]} has {kb}, {names[1]} {kc})")
    return [u for u in base.tasks if u in cand.tasks], at_k


def _figures(rows: Sequence[TaskRow], k: int) -> dict[str, Any]:
    """pass@1, pass@k and k/k of these tasks' tallies at k: observed where every task has exactly
    k attempts, else the unbiased estimators over the tasks with n >= k (module docstring)."""
    tallies = [r.tally for r in rows if r.n > 0]
    c, n = sum(t.c for t in tallies), sum(t.n for t in tallies)
    observed = all(t.n == k for t in tallies)
    if observed:
        kk = metrics.observed_k_of_k(tallies) if tallies else {"tasks": 0, "over": 0, "share": None}
        solved = metrics.solved_at_least_once(tallies)
        all_k = {"count": kk["tasks"], "over": kk["over"], "share": kk["share"]}
        at_k = {"count": solved["tasks"], "over": solved["over"], "share": solved["share"]}
    else:
        hat, used = metrics.pass_hat_k(tallies, k)
        at, _ = metrics.pass_at_k(tallies, k)
        all_k = {"count": None if hat is None else hat * used, "over": used, "share": hat}
        at_k = {"count": None if at is None else at * used, "over": used, "share": at}
    return {"tasks": len(tallies), "attempts": n, "passes": c, "pass_at_1": c / n if n else None,
            "all_k": all_k, "pass_at_k": at_k, "estimated": not observed}


def _run_seed(doc: AggDoc) -> int | None:
    """The run seed of an agg.json's records (`identities.run.seed`; None: records without a run block)."""
    run = doc.identities.get("run")
    seed = run.get("seed") if isinstance(run, Mapping) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def pairing(base: AggDoc, cand: AggDoc, names: tuple[str, str] = ("base", "candidate")) -> tuple[str, str]:
    """("seed" | "task", why). "seed" when both runs drew the same episode seeds: an episode's seed
    is stable_seed("episode", run seed, uid, repetition) (trainer/rollout/runner.py), so the same
    run seed (agg.json's `identities.run.seed`: aggregation refuses records of several runs) and
    the same repetitions (k, and the first repetition) give attempt r of a task the same seed in
    both. Otherwise "task": the tasks alone pair (a seed unknown, as in records without a run block
    such as tb infer's, is never taken for shared)."""
    sb, sc = _run_seed(base), _run_seed(cand)
    unknown = [n for n, s in zip(names, (sb, sc)) if s is None]
    if unknown:
        return "task", (f"{' and '.join(unknown)}: no run seed in agg.json (records without a run block): whether "
                        "the runs drew the same episode seeds is not known, so the tasks alone pair")
    if sb != sc:
        return "task", f"the runs drew different episode seeds (run seeds {sb} and {sc}): the tasks alone pair"
    rb, rc = (base.coverage.first_repetition, _k(base)), (cand.coverage.first_repetition, _k(cand))
    if rb != rc:
        return "task", (f"the same run seed {sb} but other repetitions ({names[0]} {rb[0]}..{sum(rb) - 1}, {names[1]} "
                        f"{rc[0]}..{sum(rc) - 1}): the tasks alone pair")
    return "seed", (f"both runs drew their episode seeds from run seed {sb}, repetitions {rb[0]}..{sum(rb) - 1}: "
                    "attempt r of a task has the same seed in both")


def compare(base: AggDoc | Mapping[str, Any], cand: AggDoc | Mapping[str, Any], *, flips: int = metrics.SIGN_FLIPS,
            seed: int = 0, common_tasks: bool = False, at_k: int | None = None,
            names: tuple[str, str] | None = None) -> dict[str, Any]:
    """The figures (module docstring) as one JSON-ready dict. `base` and `cand` are `AggDoc`s, or
    the dicts of agg.json files (read as `AggDoc`s: `AggFileError` on a fault); `names` label the
    runs (default: their labels). `flips` and `seed`: the sign-flip test's random patterns beyond
    16 tasks. `CompareError` for runs of another k or other tasks unless `common_tasks` / `at_k`
    say how to compare them."""
    base, cand = as_doc(base, "base"), as_doc(cand, "candidate")
    nb, nc = names or (base.label or "base", cand.label or "candidate")
    uids, k = check_comparable(base, cand, names=(nb, nc), common_tasks=common_tasks, at_k=at_k)
    kb, kc = _k(base), _k(cand)
    only_b = sorted(set(base.tasks) - set(cand.tasks))
    only_c = sorted(set(cand.tasks) - set(base.tasks))
    notes = []
    if only_b or only_c:
        notes.append(f"compared on the {len(uids)} tasks both runs hold (--common-tasks): left out {len(only_b)} task(s) "
                     f"only in {nb} and {len(only_c)} only in {nc}")
    for name, kr in ((nb, kb), (nc, kc)):
        if kr != k:
            notes.append(f"compared at k = {k} (--at-k): {name} has {kr} attempts per task; its pass@{k} and {k}/{k} "
                         f"are unbiased estimates from them (pass@{k} = 1 − C(n−c,{k})/C(n,{k}), {k}/{k} = pass^{k} = "
                         f"C(c,{k})/C(n,{k}); counts are expected counts); pass@1 uses every attempt")
    own = not only_b and not only_c and k == kb == kc
    fb = _figures([base.tasks[u] for u in uids], k)
    fc = _figures([cand.tasks[u] for u in uids], k)
    common = [u for u in uids if base.tasks[u].n and cand.tasks[u].n]
    domains = list(dict.fromkeys([*(base.tasks[u].domain for u in uids), *(cand.tasks[u].domain for u in uids)]))
    out: dict[str, Any] = {
        "base": nb, "candidate": nc, "k": f"{k}",
        "k_runs": {"base": kb, "candidate": kc}, "notes": notes,
        "tasks": {"base": fb["tasks"], "candidate": fc["tasks"], "paired": len(common),
                  "only_in_base": only_b, "only_in_candidate": only_c},
        "table1": [
            _row(f"Observed {k}/{k}", fb["all_k"], fc["all_k"], "tasks", fb["estimated"] or fc["estimated"]),
            _row("pass@1 (successful attempts)", {"count": fb["passes"], "share": fb["pass_at_1"]},
                 {"count": fc["passes"], "share": fc["pass_at_1"]}, "pt"),
            _row(f"pass@{k} (tasks solved at least once)", fb["pass_at_k"], fc["pass_at_k"], "tasks",
                 fb["estimated"] or fc["estimated"]),
        ],
        "domains": [_domain(d, [base.tasks[u] for u in uids if base.tasks[u].domain == d],
                            [cand.tasks[u] for u in uids if cand.tasks[u].domain == d], k) for d in domains],
    }
    tagged = {t: [u for u in uids if t in _tags(base.tasks[u], cand.tasks[u])]
              for t in sorted({t for u in uids for t in _tags(base.tasks[u], cand.tasks[u])})}
    out["tags"] = [_domain(t, [base.tasks[u] for u in us], [cand.tasks[u] for u in us], k, key="tag")
                   for t, us in tagged.items()]
    doms_both = [d for d in domains if any(base.tasks[u].domain == d and base.tasks[u].n and cand.tasks[u].n
                                           for u in uids)]
    tags_both = [t for t, us in tagged.items() if any(base.tasks[u].n and cand.tasks[u].n for u in us)]
    domain_tests = len(doms_both) if len(doms_both) > 1 else 0
    pair, why = pairing(base, cand, (nb, nc))

    def verdict(members: Sequence[str], family: int = 1) -> dict[str, Any]:
        ms = [u for u in members if base.tasks[u].n and cand.tasks[u].n]
        return metrics.pass_at_1_change([base.tasks[u].tally for u in ms], [cand.tasks[u].tally for u in ms],
                                        tests=family, pairing=pair, flips=flips, seed=seed)

    out["change"] = {**verdict(common), "pairing_why": why, "domain_tests": domain_tests,
                     "domains": {d: verdict([u for u in uids if base.tasks[u].domain == d], domain_tests)
                                 for d in (doms_both if domain_tests else [])},
                     "tag_tests": len(tags_both), "tags": {t: verdict(tagged[t], len(tags_both)) for t in tags_both}}
    bo, co = base.overall, cand.overall
    if bo.cost is not None and co.cost is not None:
        if own:
            out["table3"] = _costs(bo.cost, co.cost, f"{k}")
        else:
            notes.append("Table 3 (cost) left out: the costs are over each run's own campaign (its own tasks and "
                         "attempts), not over what is compared here")
    return out


def _row(metric: str, b: Mapping[str, Any], c: Mapping[str, Any], unit: str, estimated: bool = False) -> dict[str, Any]:
    if unit == "tasks":
        change = None if b["count"] is None or c["count"] is None else c["count"] - b["count"]
    else:
        change = _diff(c["share"], b["share"], 100)
    out = {"metric": metric, "base": {"count": b["count"], "share": b["share"]},
           "candidate": {"count": c["count"], "share": c["share"]}, "change": change, "unit": unit}
    if estimated:
        out["estimated"] = True
    return out


def _diff(a: float | None, b: float | None, scale: float = 1.0) -> float | None:
    return None if a is None or b is None else (a - b) * scale


def _tags(b: TaskRow, c: TaskRow) -> list[str]:
    """A task's tags in either run's agg.json (the same dataset gives both the same)."""
    return list(dict.fromkeys([*(b.tags or []), *(c.tags or [])]))


def _domain(name: str, b: Sequence[TaskRow], c: Sequence[TaskRow], k: int, key: str = "domain") -> dict[str, Any]:
    """One group's figures (a domain, or with `key="tag"` a tag): base, candidate, change in points."""
    def figures(rows: Sequence[TaskRow]) -> dict[str, Any] | None:
        if not any(r.n for r in rows):
            return None
        f = _figures(rows, k)
        return {"tasks": f["tasks"], "pass_at_1": f["pass_at_1"], "pass_at_k": f["pass_at_k"]["share"],
                "solved_at_least_once": f["pass_at_k"]["share"], "observed_k_of_k": f["all_k"]["share"],
                "observed_tasks": f["all_k"]["count"]}

    fb, fc = figures(b), figures(c)
    change = None
    if fb and fc:
        change = {m: _diff(fc[m], fb[m], 100) for m in ("pass_at_1", "solved_at_least_once", "observed_k_of_k")}
    return {key: name, "base": fb, "candidate": fc, "change_pt": change}


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
    kr = cmp.get("k_runs") or {}
    each = (f"{k} attempts each" if kr.get("base", k) == kr.get("candidate", k) == int(k)
            else f"at k = {k}; {kr.get('base')} and {kr.get('candidate')} attempts per task")
    lines = [f"note: {n}" for n in cmp.get("notes", [])]
    lines += [f"Table 1. {b} → {c} ({t['base']} → {t['candidate']} tasks, {each})"]
    rows = [["Metric", b, "", c, "Change"]]
    for r in cmp["table1"]:
        est = " (estimated)" if r.get("estimated") else ""
        change = (f"{_signed(r['change'], _count_fmt(r['change']))} tasks" if r["unit"] == "tasks"
                  else f"{_signed(r['change'], '.2f')} pt")
        rows.append([r["metric"] + est, f"{count(r['base']['count'])} ({pct(r['base']['share'])})", "→",
                     f"{count(r['candidate']['count'])} ({pct(r['candidate']['share'])})", change])
    lines += _table(rows)
    ch = cmp.get("change")
    if ch:
        lines.append(change_line("pass@1 change", ch))
        lines.append(f"  pairing: by {ch['pairing']} ({ch['pairing_why']})")
        lines += [change_line(f"  {d}", x) for d, x in ch["domains"].items()]
    if t["only_in_base"] or t["only_in_candidate"]:
        lines.append(f"tasks in one run only (not paired): {len(t['only_in_base'])} base, "
                     f"{len(t['only_in_candidate'])} candidate")
    doms = cmp["domains"]
    lines += ["", f"Table 2. pass@1 (%) by domain; observed {k}/{k} over all tasks"]
    rows = [["Model", *(d["domain"] for d in doms), "Overall", f"Observed {k}/{k}"]]
    obs, p1 = cmp["table1"][0], cmp["table1"][1]
    for who, name in (("base", b), ("candidate", c)):
        rows.append([name, *(_num(d[who], "pass_at_1") for d in doms), pct(p1[who]["share"]).rstrip("%"),
                     f"{count(obs[who]['count'])} ({pct(obs[who]['share'])})"])
    rows.append(["change", *(_signed(d["change_pt"]["pass_at_1"], ".2f") if d["change_pt"] else "—" for d in doms),
                 _signed(p1["change"], ".2f"), _signed(obs["change"], _count_fmt(obs["change"]))])
    lines += _table(rows)
    lines += ["", "Per domain (%): base → candidate (change, points)"]
    rows = [["Domain", "Tasks", "pass@1", f"pass@{k}", f"Observed {k}/{k}"]]
    for d in doms:
        rows.append([d["domain"], _tasks(d), *(_move(d, m) for m in ("pass_at_1", "solved_at_least_once", "observed_k_of_k"))])
    lines += _table(rows)
    if cmp.get("tags"):
        tn = (ch or {}).get("tags") or {}
        judged = (f"; the pass@1 change by the sign-flip test over each tag's tasks (the {ch['tag_tests']} tags judged "
                  "together, Bonferroni)" if ch else "")
        lines += ["", f"Per tag (%): base → candidate (change, points){judged}"]
        rows = [["Tag", "Tasks", "pass@1", f"pass@{k}", f"Observed {k}/{k}", "pass@1 change"]]
        for g in cmp["tags"]:
            rows.append([g["tag"], _tasks(g), *(_move(g, m) for m in ("pass_at_1", "solved_at_least_once", "observed_k_of_k")),
                         change_mark(tn.get(g["tag"]))])
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


def _level(x: Mapping[str, Any]) -> str:
    lvl = f"{x['level'] * 100:.4g}%"
    return lvl if x["tests"] <= 1 else f"{lvl} (Bonferroni over {x['tests']})"


def change_line(what: str, x: Mapping[str, Any]) -> str:
    """The verdict on a pass@1 change (metrics.pass_at_1_change) in a line: the change, its interval,
    the test and whether it tells the change from none; when not, what would."""
    if x["delta"] is None:
        return f"{what}: no task with attempts in both runs"
    d = f"{_signed(x['delta'] * 100, '.2f')} pt"
    if x["distinguishable"] is None:
        return (f"{what} {d} over {x['tasks']} task: no interval (the tasks are the unit of the test: it takes 2 or "
                "more)")
    lo, hi = x["delta_interval"]
    test = (f"sign-flip test over {x['tasks']:,} tasks, paired by {x['pairing']}"
            + ("" if x["exact"] else f", {x['flips']:,} random sign patterns")
            + (f"; p ≤ {x['p']:.3g}" if x["p"] * x["flips"] < 1.5 else f"; p = {x['p']:.3g}"))
    head = (f"{what} {d}, {_level(x)} interval {_signed(lo * 100, '.2f')} to {_signed(hi * 100, '.2f')} pt ({test})")
    warn = f" [coverage warning: {x['coverage_warning']}]" if x.get("coverage_warning") else ""
    if x["distinguishable"]:
        return f"{head}: distinguishable from no change{warn}"
    more = ""
    least = 2 / x["flips"] if x["exact"] else 0.0
    if least >= 1 - x["level"]:
        more = (f"; over {x['tasks']} tasks no change can be told from none: the test's smallest p is "
                f"2/2^{x['tasks']} = {least:.3g}")
    nd = x.get("needed")
    if nd:
        what_would = f"about {nd['tasks']:,} tasks like these (at this spread of the per-task changes)"
        if nd["attempts_per_task"]:
            what_would += (f" or {'at least ' if nd['attempts_lower_bound'] else ''}{nd['attempts_per_task']:,} "
                           "attempts per task on these")
        more += f"; {what_would} would detect a change this size ({nd['power']:.0%} power)"
    return f"{head}: NOT distinguishable from no change{more}{warn}"


def change_mark(x: Mapping[str, Any] | None) -> str:
    """A group's verdict in a table cell: distinguishable, NOT distinguishable (with the tasks that
    would detect it), no change, or — (no tasks in both runs, or only one: no interval)."""
    if not x or x["delta"] is None:
        return "—"
    if x["distinguishable"] is None:
        return f"— ({x['tasks']} task)"
    if x["distinguishable"]:
        return "distinguishable" + (" (coverage warning)" if x.get("coverage_warning") else "")
    if abs(x["delta"]) < 1e-12:
        return "no change"
    return "NOT distinguishable" + (f" (~{x['needed']['tasks']:,} tasks)" if x.get("needed") else "")


def _count_fmt(x: float | None) -> str:
    return "d" if x is None or isinstance(x, int) else ",.1f"


def count(x: float | int | None) -> str:
    """A task count: 107, or an expected count 53.5 (an estimate at a smaller k)."""
    if x is None:
        return "—"
    return f"{x:,}" if isinstance(x, int) else f"{x:,.1f}"


def _num(fig: Mapping[str, Any] | None, key: str) -> str:
    return "—" if not fig or fig[key] is None else f"{fig[key] * 100:.2f}"


def _tasks(d: Mapping[str, Any]) -> str:
    nb, nc = (d[w]["tasks"] if d[w] else 0 for w in ("base", "candidate"))
    return str(nb) if nb == nc else f"{nb} → {nc}"


def _move(d: Mapping[str, Any], key: str) -> str:
    ch = d["change_pt"][key] if d["change_pt"] else None
    return f"{_num(d['base'], key)} → {_num(d['candidate'], key)} ({_signed(ch, '.1f')})"


__all__ = ["MINUS", "CompareError", "change_line", "change_mark", "check_comparable", "compare", "count", "dollars",
           "pairing", "pct", "render"]
