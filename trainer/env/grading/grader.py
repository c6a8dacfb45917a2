"""Run a task's test function on an episode's end state and turn the outcome into a `Verdict`.

Rules (docs/sandbox.md, "Verdicts"): no exception → pass, reward 1.0; a returned number → that reward
(clamped to [0, 1]; passed when it is 1.0); `AssertionError` → fail, reward 0.0, its message is
the explanation; a judge answer that stays ambiguous (`JudgeAmbiguous`, see judge.py) → fail,
reward 0.0, explained as "judge answer ambiguous" with the raw replies in `judge_calls`, even when
the test catches it; any other exception (a `JudgeUnavailable` included) → a **system error**: the
infrastructure failed, the agent was not judged, nothing is scored.

By default the test runs in this process (its file was compiled once by the loader:
`Task.test_function()`). `grade(..., isolate=True)` runs it in a fresh Python subprocess instead,
for datasets you do not trust; judge questions (every asking method of `Judge`) travel back to
this process over the pipe, so the same `Judge` answers them and no key reaches the child.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.core.redact import without_secrets
from trainer.env.grading.chat_types import Text, as_messages
from trainer.env.grading.context import Judge, TestContext, ToolCall, ToolCallRecord
from trainer.env.grading.judge import ASKING_METHODS, JudgeAmbiguous, JudgeUnavailable
from trainer.env.grading.testcode import failure_line

SUBPROCESS_TIMEOUT_S = 120.0


@dataclass
class Verdict:
    """The outcome of one test run; written to episode records as JSON (`to_dict`).

    passed:       the test accepted the end state (reward == 1.0 and no system error)
    reward:       in [0, 1]; 0.0 on a failure or a system error (a system error is never scored)
    system_error: None, or the infrastructure fault as text (`ExceptionType: message`)
    explanation:  the assertion message (or the failure's repr when it has none), the system
                  error's traceback summary, or "" on a pass
    lineno:       line in the test file where the failure was raised (None on a pass)
    judge_calls:  every judge question asked, in order, `[{"question", "answer"}]` (an ambiguous
                  one: answer None and `"ambiguous"`: the raw replies): answer True or
                  False for a yes/no question (plus "motivation" when asked for one), the reply
                  text for a free-form completion, None when not evaluated (golden replay); the
                  question of `evaluate_bool` is its user prompt, of a completion its last message
    """

    passed: bool
    reward: float
    system_error: str | None = None
    explanation: str = ""
    lineno: int | None = None
    judge_calls: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

    @classmethod
    def system_failure(cls, cause: str, explanation: str = "") -> Verdict:
        """A verdict for an episode that could not be graded (sandbox fault, judge down ...)."""
        return cls(passed=False, reward=0.0, system_error=cause, explanation=explanation)


class _RecordingJudge(Judge):
    """The judge a test holds during one grading: it asks `inner` and keeps each question and
    answer for the verdict (`calls`) and the motivated decisions for `drain_decisions`.

    Every asking method goes to `inner` (its own override when it has one), whose asking methods
    keep no state, so one shared judge serves every grading. A judge with `evaluates = False`
    (golden replay) is asked nothing: each yes/no question is answered yes, so the database part
    of the check decides, and recorded with answer None. A free-form completion has no yes to
    stand in for it: in a replay it is recorded and then a system error.
    """

    def __init__(self, inner: Judge):
        self.inner = inner
        self.evaluates = getattr(inner, "evaluates", True)
        self.calls: list[dict[str, Any]] = []
        self.ambiguous: JudgeAmbiguous | None = None  # the first ambiguous answer (the check fails)

    def text_yesno(self, text: str, question: str) -> bool:
        return self._ask("text_yesno", question, text, question)

    def evaluate_bool(self, system: str, user: str) -> bool:
        return self._ask("evaluate_bool", user, system, user)

    def yesno(self, question: str) -> bool:
        return self._ask("yesno", question, question)

    def compare_yesno(self, first: str, second: str, question: str) -> bool:
        return self._ask("compare_yesno", question, first, second, question)

    def no_repeat(self, first: str, second_list: list[str]) -> bool:
        others = list(second_list)
        return self._ask("no_repeat", f"no_repeat: does the first text repeat none of {len(others)} others?",
                         first, others)

    def _motivated(self, text: str, question: str) -> dict[str, Any]:
        return self._ask("_motivated", question, text, question)

    def _get_text_completion(self, messages: list[Any]) -> Text:
        messages = as_messages(list(messages))
        asked = messages[-1].content if messages and isinstance(messages[-1], Text) else ""
        return self._ask("_get_text_completion", asked, messages)

    def _ask(self, method: str, question: str, *args: Any) -> Any:
        if not self.evaluates:
            self.calls.append({"question": question, "answer": None})
            if method == "_get_text_completion":
                raise JudgeUnavailable("golden replay asks no judge, and a free-form judge completion "
                                       "(custom scoring) cannot be answered without one")
            return dict(_NOT_EVALUATED) if method == "_motivated" else True
        try:
            answer = getattr(self.inner, method)(*args)
        except JudgeAmbiguous as e:
            self.calls.append({"question": question, "answer": None, "ambiguous": list(e.replies)})
            self.ambiguous = self.ambiguous or e
            raise
        # a motivated decision is kept whole; a completion by its text
        text = answer.content if isinstance(answer, Text) else answer
        shown = answer if isinstance(answer, dict) else {"answer": text}
        self.calls.append({"question": question, **shown})
        return answer


_NOT_EVALUATED = {"answer": True, "motivation": "not evaluated: golden replay asks no judge"}


def _outcome(fn: Any, ctx: TestContext, judge: Judge, fixtures: dict[str, Any], filename: str) -> Verdict:
    rec = _RecordingJudge(judge)
    try:
        value = fn(**_arguments(fn, ctx, rec, fixtures))
    except Exception as e:
        line = failure_line(e.__traceback__, filename)
        if rec.ambiguous is not None:  # fail closed, whatever the test did with it
            return Verdict(False, 0.0, None, str(rec.ambiguous), line, rec.calls)
        if isinstance(e, AssertionError):
            return Verdict(False, 0.0, None, str(e) or repr(e), line, rec.calls)
        # anything else is infrastructure, not the agent
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-3)).strip()
        return Verdict(False, 0.0, f"{type(e).__name__}: {e}", tb, line, rec.calls)
    if rec.ambiguous is not None:  # the test caught it and went on: still a failed check
        return Verdict(False, 0.0, None, str(rec.ambiguous), None, rec.calls)
    if value is None or isinstance(value, bool) and value:
        return Verdict(True, 1.0, judge_calls=rec.calls)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        reward = min(1.0, max(0.0, float(value)))
        return Verdict(reward == 1.0, reward, None, "" if reward == 1.0 else f"test returned {value}",
                       None, rec.calls)
    if value is False:
        return Verdict(False, 0.0, None, "test returned False", None, rec.calls)
    return Verdict(False, 0.0, f"TypeError: test returned {type(value).__name__} {value!r:.80}, "
                   "expected None or a number", "", None, rec.calls)


def _arguments(fn: Any, ctx: TestContext, judge: Judge, fixtures: dict[str, Any]) -> dict[str, Any]:
    """First parameter: the context; `judge` (or the second): the judge; others: scenario
    fixtures by name (docs/tasks.md, "What a test function receives")."""
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount]
    optional = set(names[len(names) - len(fn.__defaults__ or ()):])
    out: dict[str, Any] = {}
    for i, name in enumerate(names):
        if name in fixtures:
            out[name] = fixtures[name]
        elif i == 0:
            out[name] = ctx
        elif name == "judge" or i == 1:
            out[name] = judge
        elif name not in optional:
            raise TypeError(f"test parameter {name!r} is neither the context, the judge nor a fixture")
    return out


def asks_judge(fn: Any, fixtures: dict[str, Any] | None = None) -> bool:
    """Whether a test function uses the judge it is given (its `judge` parameter, or the second,
    read by its code or by a function nested in it): what a run without a judge refuses up front.
    Read from the bytecode, so a test that takes a judge and never asks it is not counted."""
    import dis

    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    names = code.co_varnames[:code.co_argcount]
    fixtures = fixtures or {}
    param = next((n for i, n in enumerate(names) if n not in fixtures and i > 0 and (n == "judge" or i == 1)), None)
    if param is None:
        return False
    if param in code.co_cellvars:  # captured by a nested function: taken as used
        return True
    return any(ins.opname.startswith("LOAD_FAST") and param in (ins.argval if isinstance(ins.argval, tuple)
                                                                else (ins.argval,))
               for ins in dis.get_instructions(code))


def grade(task: Any, ctx: TestContext, judge: Judge | None = None, *, isolate: bool = False,
          fixtures: dict[str, Any] | None = None) -> Verdict:
    """Run `task`'s test on `ctx` and return the verdict (never raises for a test's fault)."""
    judge = judge or Judge()
    fixtures = dict(task.scenario.fixtures if fixtures is None else fixtures)
    if isolate:
        return grade_in_subprocess(task, ctx, judge, fixtures)
    try:
        fn = task.test_function()
    except Exception as e:  # a file that no longer compiles: not the agent's fault
        return Verdict.system_failure(f"{type(e).__name__}: {e}")
    return _outcome(fn, ctx, judge, fixtures, str(task.file))


async def grade_async(task: Any, ctx: TestContext, judge: Judge | None = None, *,
                      ran: dict[str, float] | None = None, **kw: Any) -> Verdict:
    """`grade` in a worker thread, so a judge's HTTP wait does not block the event loop. With
    `ran`, `ran["seconds"]` is how long the grading ran in its thread (the rest of the wait for it
    went to the thread pool's queue and to the event loop, busy with other episodes, resuming it)."""
    if ran is None:
        return await asyncio.to_thread(grade, task, ctx, judge, **kw)

    def timed() -> Verdict:
        t = time.perf_counter()
        try:
            return grade(task, ctx, judge, **kw)
        finally:
            ran["seconds"] = time.perf_counter() - t
    return await asyncio.to_thread(timed)


# ---------------------------------------------------------------------------- subprocess isolation

def context_to_json(ctx: TestContext) -> dict[str, Any]:
    return dataclasses.asdict(ctx)


def context_from_json(d: dict[str, Any]) -> TestContext:
    calls = [ToolCallRecord(ToolCall(**c["tool_call"]), c["tool_response"]) for c in d.get("tool_calls", [])]
    return TestContext(**{**d, "tool_calls": calls})


def grade_in_subprocess(task: Any, ctx: TestContext, judge: Judge, fixtures: dict[str, Any],
                         timeout: float = SUBPROCESS_TIMEOUT_S) -> Verdict:
    job = {"file": str(task.file), "name": task.name, "test_code": task._test_code, "lineno": task.lineno,
           "context": context_to_json(ctx), "fixtures": fixtures,
           "judge_evaluates": getattr(judge, "evaluates", True)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).parents[3]),
                                                                    os.environ.get("PYTHONPATH")) if p)}
    env = without_secrets(env)  # the child never needs credentials: judge questions come back here
    # the test's prints go to a file: a pipe nobody reads while waiting would fill and hang the child
    errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
    proc = subprocess.Popen([sys.executable, "-m", "trainer.env.grading.grader"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=errlog, text=True, env=env)
    assert proc.stdin and proc.stdout
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        proc.stdin.write(json.dumps(job, default=str) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            msg = json.loads(line)
            if "judge" in msg:
                proc.stdin.write(answer_for_child(judge, msg["judge"]) + "\n")
                proc.stdin.flush()
            elif "verdict" in msg:
                return Verdict.from_dict(msg["verdict"])
        errlog.seek(0)
        err = errlog.read()[-1500:]
        if not timer.is_alive():
            return Verdict.system_failure(f"test subprocess killed after {timeout:g}s without a verdict", err)
        return Verdict.system_failure(f"test subprocess exited with {proc.wait(5)} before a verdict", err)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout, errlog):
            f and f.close()


def answer_for_child(judge: Judge, ask: Any) -> str:
    """The parent's judge answering one `{"method", "args"}` from the child, as the JSON line
    `{"answer"}` or `{"error"}`: asking methods only (the child runs untrusted code)."""
    try:
        method, args = ask["method"], list(ask["args"])
        if method not in ASKING_METHODS:
            raise ValueError(f"not a judge question: {method!r}")
        if method == "_get_text_completion":
            args = [as_messages(args[0])]
        return json.dumps({"answer": getattr(judge, method)(*args)}, default=_encode)
    except JudgeAmbiguous as e:
        return json.dumps({"ambiguous": {"question": e.question, "replies": e.replies}})
    except Exception as e:
        return json.dumps({"error": f"{type(e).__name__}: {e}"})


def _encode(value: Any) -> Any:
    """Chat messages (dataclasses) as their dicts; `as_messages` reads them back."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} cannot travel over the judge pipe")


class _PipeJudge(Judge):
    """The child's judge: each asking method goes to the parent, whose judge answers it (so its
    overrides and its key stay there)."""

    def __init__(self, out: Any, evaluates: bool = True):
        self.out = out
        self.evaluates = evaluates  # the parent's judge's: a replay judge only counts questions

    def _forward(self, method: str, *args: Any) -> Any:
        self.out.write(json.dumps({"judge": {"method": method, "args": args}}, default=_encode) + "\n")
        self.out.flush()
        reply = json.loads(sys.stdin.readline() or "{}")
        if "ambiguous" in reply:
            raise JudgeAmbiguous(reply["ambiguous"]["question"], reply["ambiguous"]["replies"])
        if "answer" not in reply:
            raise JudgeUnavailable(reply.get("error", "no answer from the parent process"))
        return as_messages([reply["answer"]])[0] if method == "_get_text_completion" else reply["answer"]


for _method in ASKING_METHODS:
    setattr(_PipeJudge, _method, functools.partialmethod(_PipeJudge._forward, _method))
del _method


def _child() -> None:
    from trainer.env.grading.tb_shim import install_thinkingbox_shim
    from trainer.env.grading.testcode import CompiledFile, exec_source, resolve_test_code

    proto = os.fdopen(os.dup(1), "w")
    sys.stdout = sys.stderr  # the test's prints must not corrupt the protocol
    job = json.loads(sys.stdin.readline())
    install_thinkingbox_shim()
    path = Path(job["file"])
    try:
        if job["test_code"] is not None:
            ns = exec_source(job["test_code"], path, "tb_tests.isolated")
            fn = resolve_test_code(ns, path, job["name"], job["lineno"])
        else:
            fn = CompiledFile(path).namespace()[job["name"]]
        judge = _PipeJudge(proto, job.get("judge_evaluates", True))
        verdict = _outcome(fn, context_from_json(job["context"]), judge, job["fixtures"], str(path))
    except Exception as e:
        verdict = Verdict.system_failure(f"{type(e).__name__}: {e}")
    proto.write(json.dumps({"verdict": verdict.to_dict()}, default=str) + "\n")
    proto.flush()


if __name__ == "__main__":
    _child()
