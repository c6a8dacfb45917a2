"""`tbt show`: one episode read back from its record, with its verdict and the diff that explains a 0.

`render_episode(record)` returns rich renderables: a header (uid, repetition, policy, user,
judge, end reason, verdict), the conversation (system prompts shortened, reasoning dimmed, each
tool call with its typed arguments and the result the agent saw, rejected calls marked), the
verdict's explanation and judge answers, and the diff against the golden state as a table
(path, kind, what the episode left, what the golden actions leave).
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group, RenderableType
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trainer.formats.record import EpisodeRecord


def _short(s: Any, n: int) -> str:
    s = s if isinstance(s, str) else json.dumps(s, ensure_ascii=False, default=str)
    return s if len(s) <= n else s[: n - 1] + "…"


def _who(identity: dict[str, Any]) -> str:
    parts = [str(identity.get("kind", "?"))]
    parts += [f"{k}={v}" for k, v in identity.items() if k != "kind"]
    return " ".join(parts)


def header(r: EpisodeRecord) -> Table:
    t = Table.grid(padding=(0, 2))
    if r.system_error:
        verdict = Text(f"SYSTEM ERROR (not scored): {r.system_error}", style="bold yellow")
    else:
        verdict = Text(f"{'PASS' if r.passed else 'FAIL'}  reward {r.reward:g}", style="bold green" if r.passed else "bold red")
    rows = [("episode", f"{r.uid}  repetition {r.repetition}  attempt {r.attempt}  seed {r.seed}"),
            ("policy", _who(r.policy) + ("  [synthetic]" if r.synthetic else "")), ("user", _who(r.user)),
            ("judge", _who(r.judge)), ("ended", f"{r.end_reason}  turns {r.turns}"),
            ("usage", "  ".join(f"{k}: {v}" for k, v in r.usage.items())),
            ("seconds", "  ".join(f"{k} {v:.3f}" for k, v in r.timings.items() if v))]
    for k, v in rows:
        t.add_row(Text(k, style="bold"), v)
    t.add_row(Text("verdict", style="bold"), verdict)
    return t


def conversation(r: EpisodeRecord, width: int = 600) -> list[RenderableType]:
    out: list[RenderableType] = []
    for m in r.messages:
        role = m.get("role")
        if role == "system":
            out.append(Text(f"system: {_short(m.get('content', ''), 160)}", style="dim"))
        elif role == "user":
            out.append(Text(f"user: {m.get('content', '')}", style="cyan"))
        elif role == "assistant":
            if m.get("reasoning_content"):
                out.append(Text(f"  (reasoning) {_short(m['reasoning_content'], width)}", style="dim italic"))
            label = "assistant (shown by a tool)" if m.get("direct") else "assistant"
            if m.get("content"):
                out.append(Text(f"{label}: {m['content']}", style="green"))
            for c in m.get("tool_calls") or []:
                fn = c.get("function", {})
                mark = f"  REJECTED ({c['problem']})" if c.get("problem") else ""
                out.append(Text(f"  → {fn.get('name')}({_short(fn.get('arguments'), width)}){mark}",
                                style="red" if mark else "magenta"))
            if m.get("finish") == "length":
                out.append(Text("  (cut by the length limit)", style="yellow"))
        elif role == "tool":
            out.append(Text(f"  ← {m.get('name')}: {_short(m.get('content', ''), width)}", style="blue"))
    return out


def diff_table(r: EpisodeRecord, limit: int = 50) -> Table | None:
    rows = [(server, d) for server, ds in (r.verdict.get("diff") or {}).items() for d in ds]
    if not rows:
        return None
    t = Table(title="diff against the golden state", show_lines=False)
    for col in ("server", "path", "kind", "episode left", "golden leaves"):
        t.add_column(col, overflow="fold")
    for server, d in rows[:limit]:
        t.add_row(server, str(d.get("path")), str(d.get("type")), _short(d.get("result"), 120), _short(d.get("golden"), 120))
    if len(rows) > limit:
        t.caption = f"{len(rows) - limit} more rows"
    return t


def render_episode(r: EpisodeRecord) -> Group:
    parts: list[RenderableType] = [Panel(header(r), title="episode"), *conversation(r)]
    v = r.verdict
    if v.get("explanation"):
        style = "yellow" if r.system_error else ("red" if not r.passed else "")
        line = f" (test line {v['lineno']})" if v.get("lineno") else ""
        parts.append(Panel(Text(v["explanation"], style=style), title=f"explanation{line}"))
    for q in v.get("judge_calls") or []:
        parts.append(Text(f"judge: {_short(q.get('question'), 200)} → {q.get('answer')}", style="dim"))
    table = diff_table(r)
    if table is not None:
        parts.append(table)
    elif not r.passed and not r.system_error:
        parts.append(Text("no row differs from the golden state (the check failed on something else: see the "
                          "explanation)", style="dim"))
    return Group(*parts)


def summary_table(records: list[EpisodeRecord], errors: list[EpisodeRecord] = ()) -> Table:
    """One row per episode, then one per system-error attempt (`errors`, from the errors file:
    never scored, re-run by the run). A uid is never cut or folded: the column is as wide as the
    longest (print with `table_width` when the output is not a terminal)."""
    rows = [*records, *errors]
    title = f"{len(records)} episode(s)" + (f", {len(errors)} system-error attempt(s) from the errors file" if errors else "")
    t = Table(title=title)
    t.add_column("uid", no_wrap=True, min_width=max((len(r.uid) for r in rows), default=3))
    for col in ("rep", "attempt", "verdict", "reward", "ended", "turns", "seconds"):
        t.add_column(col, no_wrap=col != "ended", min_width=8 if col == "ended" else None)
    for r in records:
        verdict = "sys-err" if r.system_error else ("pass" if r.passed else "fail")
        t.add_row(Text(r.uid), str(r.repetition), str(r.attempt), verdict, f"{r.reward:g}", Text(r.end_reason),
                  str(r.turns.get("agent", "")), f"{r.timings.get('total', 0):.3f}")
    for r in errors:
        t.add_row(Text(r.uid), str(r.repetition), str(r.attempt), Text("sys-err", style="yellow"), "-",
                  Text(_short(r.system_error or r.end_reason, 80)), str(r.turns.get("agent", "")),
                  f"{r.timings.get('total', 0):.3f}")
    return t


def table_width(table: Table) -> int:
    """The width `table` needs to print without cutting a cell (for output that is not a terminal,
    where rich would otherwise fit it to 80 columns)."""
    from rich.console import Console

    console = Console(width=10_000)
    return Measurement.get(console, console.options, table).maximum


__all__ = ["diff_table", "render_episode", "summary_table", "table_width"]
