"""A few lines on an agg.json (`AggDoc`): overall, per domain, cost, coverage (what `tbt eval` and
`tbt aggregate` print after writing it)."""

from __future__ import annotations

from pathlib import Path

from trainer.formats.aggfile import AggDoc
from trainer.eval.compare import dollars, pct


def summary_text(doc: AggDoc, path: str | Path) -> str:
    """The summary of `doc`, written to `path` (named in the first line and the coverage line)."""
    o = doc.overall
    p1, kk = o.pass_at_1, o.observed_k_of_k
    k = kk.k
    lines = [f"{path}: {doc.label}: {o.tasks} task(s), {o.attempts:,} attempt(s), {o.passes:,} passed"]
    if p1.value is not None and p1.jeffreys is not None and p1.bootstrap is not None:
        j, b = p1.jeffreys, p1.bootstrap
        lines.append(f"  pass@1 {pct(p1.value)} (Jeffreys {pct(j[0])}–{pct(j[1])}, bootstrap {pct(b[0])}–{pct(b[1])})"
                     f"   pass@{k} {pct(o.pass_at_k.get(k))}   pass^{k} {pct(o.pass_hat_k.get(k))}"
                     f"   observed {k}/{k} {kk.tasks} ({pct(kk.share)})")
    if o.noise is not None and o.flip_rate is not None:
        nz = o.noise
        mdd = o.min_detectable_difference
        lines.append(f"  noise: {o.flip_rate:.0%} of tasks flip (mixed outcomes), ICC "
                     + ("—" if nz.get("icc") is None else f"{nz['icc']:.2f}")
                     + ", effective samples " + ("—" if nz.get("effective_samples") is None
                                                 else f"{nz['effective_samples']:,.0f}")
                     + f" of {o.attempts:,}, minimum detectable pass@1 difference "
                     + ("—" if mdd is None else f"{mdd * 100:.1f} pt") + " (paired, 95%, 80% power)")
    if o.note:
        lines.append(f"  note: {o.note}")
    lines += domain_lines(doc)
    cost = o.cost
    if cost:
        lines.append(f"  cost: campaign {dollars(cost.campaign)}, per successful attempt "
                     f"{dollars(cost.per_successful_attempt)}, per dependable task {dollars(cost.per_dependable_task)}")
        lines += [f"  unpriced (not counted: the cost is a lower bound): {u}" for u in cost.unpriced]
    cov = doc.coverage
    if not cov.complete:
        gaps = ", ".join(f"{len(getattr(cov, kind))} {kind}" for kind in cov.KINDS if getattr(cov, kind))
        left = (f"; {len(cov.left_out)} task(s) left out by the run: " + "; ".join(sorted(set(cov.left_out.values())))
                if cov.left_out else "")
        lines.append(f"  coverage ({cov.profile}): {cov.scored} of {cov.expected} keys scored; {gaps}{left} "
                     f"(listed in {path} under coverage)")
    return "\n".join(lines)


def domain_lines(doc: AggDoc) -> list[str]:
    """The per-domain table of the summary, a line per domain: tasks, pass@1, observed k/k (what
    `tbt eval` and `tbt aggregate` print, and `tbt run` at its end)."""
    width = max((len(d) for d in doc.by_domain), default=6)
    lines = []
    for d, b in doc.by_domain.items():
        bk = b.observed_k_of_k
        lines.append(f"  {d:<{width}}  {b.tasks:>4} task(s)  pass@1 {pct(b.pass_at_1.value):>7}  "
                     f"observed {bk.k}/{bk.k} {bk.tasks}")
    return lines


__all__ = ["domain_lines", "summary_text"]
