"""Adversarial model outputs played as policy turns through real episodes: none may crash the run,
none may become a system error, every record must be readable by `tbt show`.

    uv run python bench/adversarial.py [--n 10000] [--seed 0] [--family hermes|xml|both]
                                       [--big-every 100] [--concurrency 8] [--json]

What runs (all real but the model): `trainer.core.adversarial_gen.generate` writes the outputs
(lone surrogates, JSON/XML nested to 10,000 levels, ~1 MB outputs, markup soup, control
characters, empty and reasoning-only turns, bad names, well-formed calls in between); a local
OpenAI-compatible HTTP endpoint answers each chat request with the next one (as JSON: a lone
surrogate travels as its `\\ud800` escape, as a real server's reply would carry it); `runner.run`
plays the toy library's tasks of data/samples with that endpoint as the `openai:` policy, the
scripted user and the synthetic judge, in-process domains, records to a temporary folder, until
every output was served. Printed: outputs served (by kind), episodes, end reasons, system errors,
unresolved episodes, records unreadable, `tbt show` exit status, the slowest request-to-record
episode and the wall time. Exit 1 when any count that must be 0 is not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from trainer.core.adversarial_gen import generate  # noqa: E402
from trainer.rollout.episode import EpisodeConfig  # noqa: E402
from trainer.formats.record import read_records  # noqa: E402
from trainer.rollout.runner import RunPlan, default_errors_path, run  # noqa: E402
from trainer.rollout.setup import RunSpec  # noqa: E402

SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"
TOOL_NAMES = ("find_member", "list_loans", "adjust_fines", "checkout_book", "return_book")
PING = [{"role": "user", "content": "ping"}]


class Endpoint:
    """A chat endpoint serving `outputs` in order, one per request (then 'Done. <DONE>')."""

    def __init__(self, outputs: list[tuple[str, str]]):
        self.outputs, self.next, self.lock = outputs, 0, threading.Lock()
        self.served: Counter[str] = Counter()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = "pong"
                if body.get("messages") != PING:  # the preflight's ping takes no output
                    with outer.lock:
                        i = outer.next
                        outer.next += 1
                    if i < len(outer.outputs):
                        kind, text = outer.outputs[i]
                        outer.served[kind] += 1
                    else:
                        text = "Done. <DONE>"
                data = json.dumps({"id": "x", "object": "chat.completion", "model": "adv",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": max(1, len(text) // 4)}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def left(self) -> int:
        return max(0, len(self.outputs) - self.next)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def play(n: int, *, seed: int = 0, family: str = "hermes", big_every: int = 100, concurrency: int = 8,
         workdir: Path | None = None, show: bool = True) -> dict:
    """Serve `n` generated outputs through episodes until all were served; return the counts."""
    tmp = tempfile.TemporaryDirectory() if workdir is None else None
    work = Path(tmp.name) if tmp is not None else workdir
    outputs = generate(n, seed=seed, family=family, names=TOOL_NAMES, big_every=big_every)  # type: ignore[arg-type]
    ep = Endpoint(outputs)
    out = work / f"adversarial-{family}.jsonl"
    spec = RunSpec(dataset=str(SAMPLES), test_list=str(TOY), policy=f"openai:{ep.url}#adv,retries=0,timeout=120",
                   user="scripted", judge="synthetic", family=family,  # type: ignore[arg-type]
                   config=EpisodeConfig(max_agent_turns=8))
    t0 = time.perf_counter()
    repeat, crashes = 1, []
    try:
        while ep.left:
            try:
                run(spec, RunPlan(output=out, repeat=repeat, concurrency=concurrency, retries=0))
            except Exception as e:  # a crash of the run: what must never happen
                crashes.append(f"{type(e).__name__}: {e}"[:300])
                break
            repeat = repeat * 2 if ep.next < n // 4 else repeat + max(1, repeat // 2)
    finally:
        ep.stop()
    seconds = time.perf_counter() - t0
    unreadable, recs = 0, []
    try:
        recs = read_records(out)
    except Exception:
        unreadable += 1
    errors = read_records(default_errors_path(out)) if default_errors_path(out).exists() else []
    show_rc = None
    if show:
        show_rc = max(subprocess.run([sys.executable, "-m", "trainer.cli", "show", str(out), *flags],
                                     capture_output=True, cwd=ROOT).returncode for flags in ([], ["--failed"]))
    result = {"family": family, "outputs": n, "served": sum(ep.served.values()), "by_kind": dict(sorted(ep.served.items())),
              "episodes": len(recs) + len(errors), "scored": len(recs),
              "end_reasons": dict(Counter(r.end_reason for r in recs)), "system_errors": len(errors),
              "system_error_causes": sorted({(e.system_error or "")[:160] for e in errors})[:5],
              "crashes": crashes, "unreadable_files": unreadable, "tbt_show_rc": show_rc,
              "seconds": round(seconds, 1)}
    if tmp is not None:
        tmp.cleanup()
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10000, help="adversarial outputs in all (split between families)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--family", choices=["hermes", "xml", "both"], default="both")
    ap.add_argument("--big-every", type=int, default=100, help="one output in this many is ~1 MB (0: none)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    families = ["hermes", "xml"] if a.family == "both" else [a.family]
    results = [play(a.n // len(families), seed=a.seed + i, family=f, big_every=a.big_every, concurrency=a.concurrency)
               for i, f in enumerate(families)]
    bad = sum(r["system_errors"] + len(r["crashes"]) + r["unreadable_files"] + (r["tbt_show_rc"] or 0)
              + (r["served"] < r["outputs"]) for r in results)
    if a.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print(f"{r['family']}: {r['served']}/{r['outputs']} outputs served in {r['episodes']} episodes "
                  f"({r['seconds']} s): crashes {len(r['crashes'])}, system errors {r['system_errors']}, "
                  f"unreadable record files {r['unreadable_files']}, tbt show exit {r['tbt_show_rc']}")
            print(f"  end reasons: {r['end_reasons']}")
            print(f"  by kind: {r['by_kind']}")
            for c in r["crashes"] + r["system_error_causes"]:
                print(f"  ! {c}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
