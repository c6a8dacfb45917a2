"""Dataset loading speed: `load_dataset` + `Dataset.compile_all` (what `tbt tasks validate` does)
on a generated ThinkingBox-Bench-sized dataset, with a baseline from the same run.

    uv run python bench/load.py [--json]

Workload: 507 tasks over 5 scenarios (retail, booking, auto insurance, neobank, consulting) in
60 Python test files with ~4 MB of `\"\"\"!` YAML, generated (seeded) into a temp dir that is
removed afterwards: module-level blocks (scenario, tags; a second tags block mid-file), helper
functions, and tests whose YAML carries a query, a multi-line user_context, data_patch rows lists
(flow and block style; dates, timestamps, booleans, nulls; in one test in ten an anchor and a
`<<` merge), golden_test_case.tool_interactions and rubrics_yesno. Scenarios carry the tool list
and a knowledge base (`sources`).
Baseline: the same load with every YAML block parsed the old way, twice by PyYAML's pure-Python
SafeLoader (`yaml.compose` for line marks, then `yaml.safe_load` for the value).
Also shown: `tbt tasks validate` as a fresh process (interpreter start and imports included).
Target: load + compile <= 3 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainer.env.taskformat import yamlio  # noqa: E402
from trainer.env.taskformat.tasks import load_dataset  # noqa: E402

TARGET_S = 3.0
SCENARIOS = {  # name -> (server, tables, tools)
    "retail": ("shop", ["customers", "orders", "products", "returns"],
               ["find_customer", "get_order", "list_orders", "cancel_order", "return_items", "exchange_items",
                "update_address", "get_product", "refund_order", "transfer_to_human"]),
    "booking": ("travel", ["travellers", "bookings", "flights", "hotels"],
                ["find_traveller", "get_booking", "search_flights", "change_flight", "cancel_booking",
                 "book_hotel", "add_baggage", "issue_voucher", "transfer_to_human"]),
    "auto_insurance": ("insurer", ["policyholders", "policies", "vehicles", "claims"],
                       ["find_policyholder", "get_policy", "list_claims", "open_claim", "update_claim",
                        "add_driver", "change_coverage", "quote_premium", "transfer_to_human"]),
    "neobank": ("bank", ["clients", "accounts", "cards", "transactions"],
                ["verify_client", "get_account", "list_transactions", "freeze_card", "replace_card",
                 "dispute_transaction", "transfer_funds", "set_limit", "transfer_to_human"]),
    "consulting": ("firm", ["clients", "engagements", "consultants", "invoices"],
                   ["find_client", "get_engagement", "staff_consultant", "log_hours", "issue_invoice",
                    "credit_invoice", "schedule_meeting", "transfer_to_human"]),
}
TASKS_PER_FILE = 8.45  # 507 tasks in 60 files, as in the benchmark
WORDS = ("account order refund policy customer request delivery card payment claim premium booking "
         "flight hotel invoice hours address limit balance statement vehicle driver coverage late "
         "damaged missing duplicate approval manager weekend urgent partial full original").split()


def _sentence(rng: random.Random, n: int, end: str = ".") -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + end


def _row(rng: random.Random, table: str, i: int) -> dict[str, Any]:
    return {"id": f"{table[:3].upper()}-{i:05d}", "name": f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()}",
            "email": f"user{i}@example.org", "status": rng.choice(["active", "pending", "closed"]),
            "amount": round(rng.uniform(5, 5000), 2), "count": rng.randint(0, 40), "flag": rng.random() < 0.5,
            "note": None if rng.random() < 0.5 else _sentence(rng, rng.randint(3, 12)),
            "items": [{"sku": f"SKU-{rng.randint(1, 999):03d}", "qty": rng.randint(1, 4)}
                      for _ in range(rng.randint(0, 3))]}


def _flow(v: Any) -> str:
    return yaml.safe_dump(v, default_flow_style=True, width=10**6, sort_keys=False).strip()


def _test_yaml(rng: random.Random, scenario: str, n: int) -> str:
    server, tables, tools = SCENARIOS[scenario]
    out = [f"query: {_sentence(rng, rng.randint(8, 25), rng.choice('.?'))}",
           "user_context: >-", *textwrap.wrap(" ".join(_sentence(rng, 14) for _ in range(rng.randint(4, 9))),
                                              90, initial_indent="  ", subsequent_indent="  "),
           f"tags: [{rng.choice(['lookup', 'write', 'policy'])}, \"difficulty:{rng.choice(['easy', 'hard'])}\"]",
           "init:", f"  {server}:", "    data_patch:"]
    base = n * 100
    for t in tables:
        rows = [_row(rng, t, base + j) for j in range(rng.randint(2, 7))]
        if rng.random() < 0.5:  # flow style, a row a line
            out.append(f"      {t}:")
            out += [f"      - {_flow(r)}" for r in rows]
        else:  # block style, with unquoted dates and timestamps
            out.append(f"      {t}:")
            for r in rows:
                r |= {"opened": datetime.date(2025, rng.randint(1, 12), rng.randint(1, 28)),
                      "updated_at": datetime.datetime(2025, 6, rng.randint(1, 28), 9, rng.randint(0, 59))}
                out += ["      " + line for line in yaml.safe_dump([r], sort_keys=False, width=100).splitlines()]
    if n % 10 == 3:  # an anchor and a merge key
        out += ["      defaults:", "      - &d {region: eu, tier: gold, active: yes}",
                "      - <<: *d", "        tier: silver"]
    out += ["    golden_test_case:", "      tool_interactions:"]
    for _ in range(rng.randint(3, 9)):
        params = {"id": f"{rng.choice(tables)[:3].upper()}-{base + rng.randint(0, 7):05d}",
                  "reason": _sentence(rng, rng.randint(2, 6), rng.choice(".?")), "amount": round(rng.uniform(1, 900), 2)}
        out.append(f"      - {{tool: {rng.choice(tools[:-1])}, parameters: {_flow(params)}}}")
    out += ["    rubrics_yesno:"] + [f"    - Did the assistant {_sentence(rng, 8, '?').lower()}"
                                    for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.1:
        out += ["max_agent_sim_turns: 30", "format_query: false"]
    return "\n".join(out)


def _test_file(rng: random.Random, scenario: str, k: int, first: int, n_tests: int) -> tuple[str, int]:
    """A test file of `n_tests` tests, and the size of its YAML blocks (characters)."""
    server = SCENARIOS[scenario][0]
    parts = [f'"""{scenario} tasks, part {k}."""\n\nfrom thinkingbox.common import Judge, TestContext\n\n',
             f'"""!\nscenario: {scenario}\ntags: ["domain:{scenario}", part-{k}]\nmax_user_sim_turns: 12\n"""\n',
             f"\ndef fx_of(x: TestContext) -> dict:\n    return x.effects[{server!r}]\n",
             "\ndef same_db(fx: dict) -> None:\n    assert fx[\"result_db_hash\"] == fx[\"golden_db_hash\"], fx[\"diff\"]\n"]
    yaml_chars = len(parts[1])
    for j in range(n_tests):
        if j == n_tests // 2:
            parts.append(f'\n"""!\ntags: ["domain:{scenario}", part-{k}, second-half]\n"""\n')
            yaml_chars += len(parts[-1])
        body = textwrap.indent(_test_yaml(rng, scenario, first + j), "    ")
        yaml_chars += len(body)
        parts.append(f'\n\ndef test_{scenario}_{k}_{j}(x: TestContext, judge: Judge):\n    """!\n{body}\n    """\n'
                     f"    fx = fx_of(x)\n    same_db(fx)\n"
                     f"    assert judge.text_yesno(x.response, 'Did the assistant confirm?'), 'no confirmation'\n")
    return "".join(parts), yaml_chars


def generate(root: Path, n_tasks: int = 507, seed: int = 0) -> dict[str, Any]:
    """Write the dataset under `root`; return its size."""
    rng = random.Random(seed)
    (root / "agent").mkdir(parents=True)
    (root / "agent" / "think.yaml").write_text(yaml.safe_dump({
        "system_instructions": "You are a helpful agent. End your final message with <DONE>.\n" * 5,
        "builtin_tools": [{"name": "think", "description": "Think.", "is_end_turn": False,
                           "input_schema": {"type": "object", "properties": {"thought": {"type": "string"}}}}]}))
    (root / "scenario").mkdir()
    per_scenario = max(1, round(n_tasks / len(SCENARIOS) / TASKS_PER_FILE))
    n_files = len(SCENARIOS) * per_scenario
    tasks = yaml_chars = 0
    for si, (s, (server, _, tools)) in enumerate(SCENARIOS.items()):
        (root / "scenario" / f"{s}.yaml").write_text(yaml.safe_dump({
            "world_state": {server: {"data_patch": None, "golden_test_case": None, "rubrics": None,
                                     "rubrics_yesno": None,
                                     "sources": [{"name": f"{s}-policy", "snippets": [
                                         " ".join(_sentence(rng, 15) for _ in range(4)) for _ in range(40)]}]}},
            "tools": [{"name": t, **({"override_description": _sentence(rng, 10)} if i % 3 == 0 else {})}
                      for i, t in enumerate(tools)] + [{"name": "done", "is_end_turn": True}],
            "bot_instructions": _sentence(rng, 40), "tags": [f"domain:{s}"]}, sort_keys=False))
        folder = root / "test_case" / s
        folder.mkdir(parents=True)
        for k in range(per_scenario):
            i = si * per_scenario + k
            n = n_tasks // n_files + (i < n_tasks % n_files)
            text, chars = _test_file(rng, s, k, tasks, n)
            (folder / f"{s}_part{k}.py").write_text(text)
            tasks += n
            yaml_chars += chars
    return {"tasks": tasks, "files": n_files, "yaml_MB": round(yaml_chars / 1e6, 2)}


def _old_load(text: str, marks: Callable[[Any], Any] = lambda node: None) -> tuple[Any, Any]:
    """The loader before `yamlio`: two pure-Python parses (nodes for line marks, then the value)."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    obj = yaml.safe_load(text)
    return obj, marks(node)


def time_load(root: Path, repeat: int) -> float:
    """Best wall time of `load_dataset` + `compile_all`, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        ds = load_dataset(root)
        errors = ds.errors + ds.compile_all()
        best = min(best, time.perf_counter() - t0)
        assert not errors, errors[:3]
    return best


def time_cli(root: Path) -> float:
    """Wall time of `tbt tasks validate` in a fresh process (interpreter start and imports included)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trainer.cli", "tasks", "validate", str(root), "--json"],
                   check=True, capture_output=True, cwd=Path(__file__).resolve().parents[1])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--tasks", type=int, default=507, help="dataset size (the benchmark's: 507)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many loads (the baseline: 1)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tbt-bench-load-") as tmp:
        root = Path(tmp)
        res: dict[str, Any] = generate(root, args.tasks)
        res["libyaml"] = yamlio.LOADER is not yaml.SafeLoader
        load_dataset(root)  # warm-up: imports, the thinkingbox shim
        res["load_validate_s"] = round(time_load(root, args.repeat), 3)
        res["tbt_tasks_validate_process_s"] = round(time_cli(root), 3)
        new_load, yamlio.load = yamlio.load, _old_load
        try:
            res["baseline_pure_python_double_parse_s"] = round(time_load(root, 1), 3)
        finally:
            yamlio.load = new_load
    res["ratio_baseline_vs_ours"] = round(res["baseline_pure_python_double_parse_s"] / res["load_validate_s"], 2)
    res["target_s"] = TARGET_S
    res["meets_target"] = res["load_validate_s"] <= TARGET_S
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:40s} {v}")


if __name__ == "__main__":
    main()
