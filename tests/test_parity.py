"""The parity gate: `tbt parity` on records produced here exits 0; a planted typing bug fails it;
with the vLLM parsers environment built, the corpus diverges from vLLM only on the allowlist."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from trainer.core import parity as P
from trainer.core import tb_interpret as ti

ROOT = Path(__file__).resolve().parents[1]
CORPUS = json.loads((Path(__file__).parent / "conformance" / "corpus.json").read_text())
app = typer.Typer()
app.command()(P.parity_command)
runner = CliRunner()
TOKDIR = P.default_tokenizer()
TOK = P.load_tokenizer(TOKDIR)
VLLM_PY = Path(os.environ.get("TBT_VLLM_PYTHON", ROOT / ".deps/vllm-parsers/bin/python"))


def corpus_records() -> list[dict]:
    keep = set(P.Record.__dataclass_fields__)
    return [{**{k: v for k, v in c.items() if k in keep}, "tools": CORPUS["tools"]} for c in CORPUS["cases"]]


def generated_records() -> list[dict]:
    """Outputs as a model writes them: the template's own assistant turns, with real token ids."""
    recs = []
    for fam in ("hermes", "xml"):
        for i, args in enumerate([{"order_id": 3}, {"order_id": 4, "note": "x\ny", "limit": None, "urgent": False}]):
            msg = {"role": "assistant", "content": "On it.", "reasoning_content": f"Step {i}.",
                   "tool_calls": [{"function": {"name": "get_order" if i == 0 else "update_order", "arguments": args}}]}
            user = [{"role": "user", "content": "q"}]
            text = ti.render(user + [msg], family=fam, tools=CORPUS["tools"])
            text = text[len(ti.render(user, family=fam, tools=CORPUS["tools"], add_generation_prompt=True, enable_thinking=False)) - len("<think>\n\n</think>\n\n"):]
            text = text.removesuffix("<|im_end|>\n")
            ids = TOK.encode(text, add_special_tokens=False) + [TOK.convert_tokens_to_ids("<|im_end|>")]
            recs.append({"id": f"gen-{fam}-{i}", "family": fam, "tools": CORPUS["tools"], "text": text,
                         "token_ids": ids, "thinking": True})
    return recs


RECORDS = Path(__file__).parent / "conformance" / "records.jsonl"


def records_text() -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in corpus_records() + generated_records())


@pytest.fixture
def records_file(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(records_text())
    return path


def test_committed_records_are_those_the_tests_produce():
    """tests/conformance/records.jsonl is what `tbt parity` examples and docs run on."""
    assert RECORDS.read_text() == records_text(), "stale: regenerate with `uv run python tests/test_parity.py`"
    assert runner.invoke(app, [str(RECORDS)]).exit_code == 0


def test_parity_on_records_produced_here_exits_0(records_file):
    res = runner.invoke(app, [str(records_file)])
    assert res.exit_code == 0, res.output
    assert "0 difference(s)" in res.output
    recs = P.load_records(records_file)
    assert any(r.token_ids for r in recs) and len(recs) == len(CORPUS["cases"]) + 4
    gen = P.training_path(recs[-1], TOK)
    assert gen.tool_calls[0].arguments == {"order_id": 4, "note": "x\ny", "limit": None, "urgent": False}


def _buggy_interpreter(old: str = "return int(value)", new: str = "return float(value)"):
    """A copy of tb_interpret with one planted bug (by default integer typing: int -> float)."""
    src = Path(ti.__file__).read_text()
    assert old in src
    spec = importlib.util.spec_from_loader("tb_interpret_buggy", loader=None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tb_interpret_buggy"] = mod
    exec(compile(src.replace(old, new), "tb_interpret_buggy", "exec"), mod.__dict__)
    return mod


def test_planted_typing_bug_fails_the_gate(records_file):
    recs = P.load_records(records_file)
    report = P.run_parity(recs, TOK, eval_interpret=_buggy_interpreter())
    assert not report.ok
    bad = {f.id for f in report.failures}
    assert {"x-single", "x-typing"} <= bad and "h-single" not in bad  # hermes JSON is not coerced
    assert all(f.kind == "paths" for f in report.failures)


@pytest.mark.parametrize("old,new,diff", [
    ('content = "\\n".join(', 'content = " ".join(', "content: "),  # text between calls joined differently
    ("Available tools: {known}.", "Available: {known}.", "messages: "),  # what the agent is told
], ids=["content", "message"])
def test_planted_content_or_message_bug_fails_the_gate(records_file, old, new, diff):
    recs = P.load_records(records_file)
    report = P.run_parity(recs, TOK, eval_interpret=_buggy_interpreter(old, new))
    assert not report.ok
    assert all(f.kind == "paths" and [d[:len(diff)] for d in f.diffs] == [diff] for f in report.failures)


def test_record_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "family": "hermes", "text": "x", "tools": []}\n{"id": "b", "family": "json", "text": "x"}\n')
    res = runner.invoke(app, [str(path)])
    assert res.exit_code == 2 and f"{path}:2: field 'family'" in res.output


GOOD = '{"id": "a", "family": "hermes", "text": "x", "tools": []}'


@pytest.mark.parametrize("line,field", [
    ('{"id": "b", "family": "hermes", "text": "x"}', "field 'tools'"),  # was a TypeError traceback
    ("[1]", "a record must be a JSON object"),  # was an AttributeError traceback
    ('{"id": "b", "family": "hermes", "text": "x", "tools": [], "tool_choice": "required"}', "field 'tool_choice'"),
    ('{"id": "b", "family": "hermes", "text": "x", "tools": [], "thinking": "yes"}', "field 'thinking'"),
    ('{"id": "b", "family": "hermes", "text": "x", "tools": [], "token_ids": ["1"]}', "field 'token_ids'"),
    ('{"id": "b", "family": "hermes", "text": "x", "tools": [1]}', "field 'tools'"),
    ('{"id": "b", "family": "hermes", "text": "x", "tools": [], "finish": null}', "field 'finish'"),
    ('{"id": "a", "family": "hermes", "text": "y", "tools": []}', "field 'id'"),  # ids are unique
])
def test_every_bad_record_is_exit_2_naming_file_line_and_field(tmp_path, line, field):
    path = tmp_path / "r.jsonl"
    path.write_text(f"{GOOD}\n{line}\n")
    res = runner.invoke(app, [str(path)])
    assert res.exit_code == 2 and f"{path}:2: {field}" in res.output, (res.exit_code, res.output, res.exception)


def test_empty_vllm_cache_is_used_not_recomputed(records_file, tmp_path):
    """`vllm_refs={}` is an answer (vLLM said nothing), not a missing cache: vLLM is not run again."""
    recs = P.load_records(records_file)[:2]
    report = P.run_parity(recs, TOK, against="vllm", vllm_refs={}, vllm_python=tmp_path / "none/python")
    assert [(f.kind, f.diffs) for f in report.findings] == [("vllm", ["vLLM failed: no answer"])] * 2


def test_against_vllm_without_its_environment_is_a_clear_error(records_file, tmp_path):
    res = runner.invoke(app, [str(records_file), "--against", "vllm", "--vllm-python", str(tmp_path / "none/python")])
    assert res.exit_code == 2 and "scripts/setup_vllm_parsers_env.sh" in res.output


@pytest.mark.slow
@pytest.mark.skipif(not VLLM_PY.exists() and not os.environ.get("TBT_REQUIRE_VLLM"),
                    reason="vLLM parsers env not built: bash scripts/setup_vllm_parsers_env.sh")
def test_against_vllm_diverges_only_on_the_allowlist(records_file):
    """CI builds the env and sets TBT_REQUIRE_VLLM=1, so there this test cannot be skipped."""
    assert VLLM_PY.exists(), f"{VLLM_PY} missing: run bash scripts/setup_vllm_parsers_env.sh"
    recs = P.load_records(records_file)
    refs = P.run_vllm(recs, TOKDIR, VLLM_PY)
    # only what compare_vllm reads comes back (vLLM's content is not comparable: see compare_vllm)
    assert all(set(r) == {"id", "reasoning", "tool_calls"} for r in refs.values())
    report = P.run_parity(recs, TOK, against="vllm", vllm_refs=refs)
    assert report.ok, [f for f in report.failures]
    allowed = {f.id: set(f.allowed_by) for f in report.findings if f.kind == "vllm-allowed"}
    for case in CORPUS["cases"]:  # the corpus's vllm column is exactly what vLLM 0.27.1 does
        assert (case["vllm"] == "same") == (case["id"] not in allowed), case["id"]
        if case["vllm"] != "same":
            assert set(case["vllm"]) <= allowed[case["id"]]
    buggy = P.run_parity(recs, TOK, against="vllm", vllm_refs=refs, interpret=_buggy_interpreter())
    assert {"x-single", "x-typing"} <= {f.id for f in buggy.failures if f.kind == "vllm"}


if __name__ == "__main__":  # regenerate tests/conformance/records.jsonl
    RECORDS.write_text(records_text())
    print(f"wrote {RECORDS}")
