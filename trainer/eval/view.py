"""The trajectory viewer (`tbt view`): records -> one self-contained HTML page to click through
(docs/evaluation.md, "Looking at episodes").

`page_data(runs)` is what the page shows, as plain JSON-ready data:

    runs      [{name, path, label, scored, passed, system_errors, duplicated, repetitions}]: one per
              records file, in the order given (the first is the base of "changed between runs")
    tasks     [{uid, domain}] sorted by domain, then uid: the grid's rows. The domain is the task's
              `domain:` tag when a dataset is given, else the record's scenario
    episodes  [{id, run, uid, repetition, kind, ...}]: every scored record (kind "pass" or "fail";
              a second record of a key is left out and counted in `duplicated`) and every
              system-error attempt of the errors file beside it (kind "error": `NAME.errors.jsonl`,
              as `tbt run` writes it), each with what its record holds: messages (reasoning,
              tool calls with their arguments, tool results, simulated-user turns), the tool calls
              with their seconds, the verdict (explanation, test line, judge answers, the row diff
              against the golden state), the end reason, timings, turns, usage, identities
    end_reasons, domains   the values the filters offer

Strings longer than `MAX_CHARS` are cut (saying how much; `tbt show` prints everything) and token
ids are left out, so a page of thousands of episodes stays loadable. `render(data)` is the page:
the data as a JSON script block (`<` escaped, so no text in a record can end it), the stylesheet
and the script of `view_page.css` / `view_page.js` inline, a Content-Security-Policy that lets it
load nothing (no external asset, no request). `serve(html, port)` answers it on 127.0.0.1.

The page: a tasks × repetitions grid per run (green passed, red failed, a hatched grey cell a key
with only system-error attempts, blank: no record), the filters (domain, end reason, failed only,
changed between two runs: any / better / worse by pass share), the system errors listed apart, and
a click opens the episode. The URL fragment opens one too: `#e=ID`, or `#uid=UID[&run=I][&rep=R]`
(what a link from another page, e.g. `tbt report`'s, uses).
"""

from __future__ import annotations

import html
import http.server
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.env.taskformat.tasks import Dataset
from trainer.eval.aggregate import task_domain
from trainer.formats.attempts import Attempt, read_attempts
from trainer.rollout.runner import default_errors_path

MAX_CHARS = 20_000
HERE = Path(__file__).parent
EPISODE_FIELDS = ("scenario", "attempt", "seed", "end_reason", "system_error", "messages", "tool_calls", "timings",
                  "turns", "usage", "policy", "user", "judge", "started_at", "synthetic", "family")


class ViewError(ValueError):
    """A records file that cannot be shown (names the file and line)."""


@dataclass
class Run:
    """One records file and the system-error attempts beside it."""

    path: Path
    scored: list[Attempt]
    errors: list[Attempt] = field(default_factory=list)
    errors_path: Path | None = None
    name: str | None = None  # what the page calls it (default: the file's name)


def read_run(path: str | Path, errors: str | Path | None = None) -> Run:
    """A run's records and, from `errors` (default: the `.errors.jsonl` beside it, when there is
    one), its system-error attempts; an unreadable line is a `ViewError` naming file and line."""
    from trainer.formats.attempts import AttemptError

    path = Path(path)
    errors_path = Path(errors) if errors else default_errors_path(path)
    try:
        scored = read_attempts([path], keep_records=True).attempts
        failed = read_attempts([errors_path], keep_records=True).attempts if errors_path.is_file() else []
    except AttemptError as e:
        raise ViewError(str(e)) from None
    return Run(path, scored, failed, errors_path if errors_path.is_file() else None)


def cut(x: Any, limit: int = MAX_CHARS) -> Any:
    """`x` with every string longer than `limit` cut, saying how much was left out."""
    if isinstance(x, str):
        return x if len(x) <= limit else x[:limit] + f"… [{len(x) - limit:,} more characters: tbt show has them all]"
    if isinstance(x, list):
        return [cut(v, limit) for v in x]
    if isinstance(x, dict):
        return {k: cut(v, limit) for k, v in x.items()}
    return x


def _episode(i: int, run: int, a: Attempt, kind: str) -> dict[str, Any]:
    rec = a.record or {}
    ep: dict[str, Any] = {"id": i, "run": run, "uid": a.uid, "repetition": a.repetition, "kind": kind, "where": a.where,
                          "format": a.format}
    if a.format == "ours":
        ep.update({k: rec.get(k) for k in EPISODE_FIELDS})
        v = rec.get("verdict") or {}
        ep["reward"] = v.get("reward")
        ep["verdict"] = {k: v.get(k) for k in ("passed", "reward", "system_error", "explanation", "lineno",
                                               "judge_calls", "diff")}
    else:  # a tb infer record: its fields as they are, what the page knows how to show picked out
        meta = rec.get("metadata") or {}
        ep.update({"scenario": a.scenario, "system_error": a.system_error, "end_reason": meta.get("end_reason"),
                   "messages": rec.get("messages") or [], "raw": {k: v for k, v in rec.items() if k != "messages"}})
        ep["verdict"] = {"passed": a.passed, "explanation": str((rec.get("test_result") or {}).get("message") or "")}
    ep["end_reason"] = ep.get("end_reason") or ("system_error" if kind == "error" else None)
    return cut(ep)


def page_data(runs: Sequence[Run], dataset: Dataset | None = None, title: str | None = None,
              domains_of: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the page shows (module docstring); `domains_of` (uid -> domain, e.g. an agg.json's
    tasks) groups tasks where no dataset is given."""
    episodes: list[dict[str, Any]] = []
    domains: dict[str, str] = {}
    out_runs = []
    for r_i, run in enumerate(runs):
        seen: set[tuple[str, int | None]] = set()
        dup = 0
        for a in run.scored:
            if a.system_error is not None:  # a system error in the records file: shown apart, as the errors file's
                episodes.append(_episode(len(episodes), r_i, a, "error"))
                continue
            if a.key in seen:
                dup += 1
                continue
            seen.add(a.key)
            episodes.append(_episode(len(episodes), r_i, a, "pass" if a.passed else "fail"))
        for a in run.errors:
            episodes.append(_episode(len(episodes), r_i, a, "error"))
        for a in [*run.scored, *run.errors]:
            domains.setdefault(a.uid, a.scenario or "unknown")
        mine = [e for e in episodes if e["run"] == r_i]
        label = next((((a.record or {}).get("run") or {}).get("policy") for a in run.scored if a.record), None)
        reps = [e["repetition"] for e in mine if e["repetition"] is not None]
        out_runs.append({"name": run.name or run.path.name, "path": str(run.path), "label": label or "",
                         "errors_file": run.errors_path.name if run.errors_path else None,
                         "scored": sum(e["kind"] != "error" for e in mine), "passed": sum(e["kind"] == "pass" for e in mine),
                         "system_errors": sum(e["kind"] == "error" for e in mine), "duplicated": dup,
                         "repetitions": max(reps) + 1 if reps else 0})
    if dataset is not None:
        for uid in domains:
            if uid in dataset.tasks:
                domains[uid] = task_domain(dataset.tasks[uid])
    elif domains_of:
        for uid in domains:
            domains[uid] = domains_of.get(uid) or domains[uid]
    tasks = [{"uid": u, "domain": d} for u, d in sorted(domains.items(), key=lambda kv: (kv[1], kv[0]))]
    return {"title": title or "Episodes: " + ", ".join(r["name"] for r in out_runs), "runs": out_runs, "tasks": tasks,
            "episodes": episodes, "domains": sorted(set(domains.values())),
            "end_reasons": sorted({e["end_reason"] for e in episodes if e["end_reason"]})}


def data_json(data: dict[str, Any]) -> str:
    """The page data as the text of a `<script type="application/json">` block: `<`, `>` and `&`
    escaped as JSON escapes, so no string in a record can close the block."""
    text = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


def render(data: dict[str, Any]) -> str:
    """The whole page, self-contained (module docstring)."""
    css = (HERE / "view_page.css").read_text(encoding="utf-8")
    js = (HERE / "view_page.js").read_text(encoding="utf-8")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(data['title'])}</title>\n<style>\n{css}</style></head>\n<body>\n"
            '<header><h1 id="title"></h1><p id="runs"></p>\n<form id="filters" onsubmit="return false">\n'
            '<label>domain <select id="f-domain"></select></label>\n'
            '<label>end reason <select id="f-end"></select></label>\n'
            '<label><input type="checkbox" id="f-failed"> failed only</label>\n'
            '<span id="f-changes">changed between <select id="f-a"></select> and <select id="f-b"></select>\n'
            '<select id="f-changed"><option value="">(off)</option><option value="any">any change</option>'
            '<option value="better">better</option><option value="worse">worse</option></select></span>\n'
            '<span id="count"></span></form></header>\n'
            '<main><div id="left"><table id="grid"><thead></thead><tbody></tbody></table>\n'
            '<section id="errors"></section></div>\n'
            '<div id="episode"><p class="hint">Click a cell to open its episode.</p></div></main>\n'
            f'<script id="data" type="application/json">{data_json(data)}</script>\n'
            f"<script>\n{js}</script>\n</body></html>\n")


def write_page(page: str, output: str | Path) -> None:
    """Write a rendered page to `output` (whole, then renamed into place)."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(output)


def serve(page: str, port: int = 8765, host: str = "127.0.0.1") -> http.server.ThreadingHTTPServer:
    """A server answering `/` (and `/index.html`) with the page, started in a daemon thread; the
    caller stops it with `shutdown()`. Port 0 picks a free one (`server.server_address`)."""
    body = page.encode("utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            if self.path.split("?")[0] not in ("/", "/index.html"):
                self.send_error(404, "only / is served")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # quiet: the CLI says where it serves
            pass

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


__all__ = ["CSP", "MAX_CHARS", "Run", "ViewError", "cut", "data_json", "page_data", "read_run", "render", "serve",
           "write_page"]
