"""Parse throughput of tb_interpret, in MB/s of completion text, with a baseline from the same run.

    uv run python bench/interpret.py [--json]

Workload: a fixed, seeded mix of completions of both families (reasoning, content, 0-3 calls with
typed arguments, some truncated or malformed), parsed with the tools' schemas (typing and
validation included). Baseline: the naive reading many projects start with (regex for
<tool_call>…</tool_call> + json.loads; no reasoning split, typing or validation), on the hermes
half of the same texts.
"""

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainer.core import tb_interpret as ti  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "update_order", "parameters": {"type": "object", "properties": {
    "order_id": {"type": "integer"}, "note": {"type": "string"}, "urgent": {"type": "boolean"},
    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["order_id"]}}}]


def workload(n: int = 2000, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        family = "hermes" if i % 2 == 0 else "xml"
        calls = []
        for _ in range(rng.randint(0, 3)):
            args = {"order_id": rng.randint(1, 10**6), "note": " ".join(rng.choice(["ship", "refund", "late", "box"])
                    for _ in range(rng.randint(1, 30))), "urgent": rng.random() < 0.5,
                    "limit": None if rng.random() < 0.3 else rng.randint(0, 9), "tags": ["a", "b"][:rng.randint(0, 2)]}
            calls.append({"function": {"name": "update_order", "arguments": args}})
        msg = {"role": "assistant", "content": "Let me check that. " * rng.randint(0, 5),
               "reasoning_content": "The user asks about an order; I should look it up. " * rng.randint(1, 20),
               "tool_calls": calls}
        text = ti.render([{"role": "user", "content": "q"}, msg], family=family)
        text = text.split("<|im_start|>assistant\n", 1)[1].removesuffix("<|im_end|>\n")
        if rng.random() < 0.1:
            text = text[: rng.randint(0, len(text))]  # cut by the length limit
        out.append((family, text))
    return out


_NAIVE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def naive(text: str) -> list:
    calls = []
    for body in _NAIVE.findall(text):
        try:
            calls.append(json.loads(body))
        except ValueError:
            pass
    return calls


def mbps(fn, texts, repeat: int = 3) -> float:
    size = sum(len(t.encode()) for t in texts)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for t in texts:
            fn(t)
        best = min(best, time.perf_counter() - t0)
    return size / best / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    work = workload()
    tools = ti.Toolset(TOOLS)
    res = {}
    for fam in ti.FAMILIES:
        texts = [t for f, t in work if f == fam]
        res[f"tb_interpret_{fam}_MBps"] = round(mbps(lambda t, f=fam: ti.parse(t, family=f, tools=tools), texts), 2)
    hermes = [t for f, t in work if f == "hermes"]
    res["baseline_naive_regex_json_hermes_MBps"] = round(mbps(naive, hermes), 2)
    res["ratio_hermes_vs_baseline"] = round(res["tb_interpret_hermes_MBps"] / res["baseline_naive_regex_json_hermes_MBps"], 3)
    res["completions"] = len(work)
    res["MB"] = round(sum(len(t.encode()) for _, t in work) / 1e6, 3)
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:45s} {v}")


if __name__ == "__main__":
    main()
