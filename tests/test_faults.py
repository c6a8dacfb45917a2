"""Whatever a model or an endpoint sends, a run keeps going (issue 25): model text is scored, never
a crash or a system error; keys never leak; endpoints fail fast.

Real components throughout: the sample dataset's toy tasks on the in-process domains, `runner.run`
(what `tbt run` calls), real records files, `tbt` itself in a subprocess where the output streams
matter, and OpenAI-compatible endpoints as real HTTP servers on 127.0.0.1 (tests/fakes.py: it
answers from a function of the request and records what it was sent).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer.core import redact
from trainer.core import tb_interpret as ti
from trainer.core.adversarial_gen import generate
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.episode import EpisodeConfig
from trainer.core.retry_after import retry_after
from trainer.rollout.http import Endpoint, EndpointError, post_json
from trainer.rollout.preflight import PreflightError, judged_tasks
from trainer.formats.record import EpisodeRecord, encode_line, read_records
from trainer.rollout.runner import RunPlan, default_errors_path, local_execute, run, run_episodes
from trainer.rollout.setup import RunSpec, build_setup, load_run_dataset

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"
FINE = "toy_loans.py:test_fine_correction"
SUSPENDED = "toy_traps.py:test_checkout_suspended"  # its test asks the judge
KEY = "sk-live-never-print-me-0042"


@pytest.fixture
def fakes(endpoints):
    """Real local endpoints (tests/fakes.py) answering `answer(path, body, headers)`."""
    return endpoints


def completion(content, **extra):
    return 200, {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content,
                                                                               **extra}}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5}}, {}


def spec(url, **kw):
    return RunSpec(dataset=str(SAMPLES), test_list=str(TOY), policy=f"openai:{url}#m,retries=0,backoff=0.01",
                   **{"judge": "synthetic", **kw})


def tbt(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "trainer.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=timeout)


# ---------------------------------------------------------------------------- 1. records take any string

def test_a_lone_surrogate_in_a_reply_is_recorded_scored_and_shown(fakes, tmp_path):
    fake = fakes(lambda p, b, h: completion(
        "I found \ud800 nothing.\n<tool_call>\n" + json.dumps({"name": "find_member", "arguments": {"email": "\ud800"}})
        + "\n</tool_call>" if sum(m["role"] == "assistant" for m in b["messages"]) == 0 else "Done \udfff. <DONE>",
        reasoning_content="thinking \ud83d"))
    out = tmp_path / "r.jsonl"
    res = run(spec(fake.url), RunPlan(output=out, only=frozenset({FINE}), repeat=2))
    assert (res.written, res.unresolved, res.attempts_failed) == (2, [], 0)
    raw = out.read_bytes()
    raw.decode("utf-8")  # valid UTF-8 throughout
    [rec, _] = read_records(out)
    assert rec.system_error is None and rec.end_reason == "done"
    said = [m for m in rec.messages if m["role"] == "assistant"]
    assert said[0]["content"] == "I found \ufffd nothing." and said[0]["reasoning_content"] == "thinking \ufffd"
    assert said[0]["tool_calls"][0]["problem"] == "invalid_arguments"  # the escaped surrogate: not run
    assert rec.tool_calls[0]["result"].startswith("Error: the call to tool 'find_member' holds text that is not valid")
    # the next request carried only valid text (it would not have been sent otherwise)
    assert len(fake.turns()) == 4
    shown = tbt("show", str(out))
    assert shown.returncode == 0, shown.stderr


def test_encode_line_keeps_a_lone_surrogate_as_its_escape():
    rec = EpisodeRecord(uid="a\ud800b", repetition=0, seed=0, messages=[{"role": "user", "content": "x\udfffy"}])
    line = encode_line(rec.to_json())
    assert b"\\ud800" in line and b"\\udfff" in line
    back = EpisodeRecord.from_dict(json.loads(line))
    assert back.uid == "a\ud800b" and back.messages[0]["content"] == "x\udfffy"


def test_a_record_json_cannot_hold_is_that_episodes_system_error_and_the_run_goes_on(tmp_path):
    s = RunSpec(dataset=str(SAMPLES), test_list=str(TOY), policy="synthetic")
    ds = load_run_dataset(s)
    inner = local_execute(build_setup(s, ds))

    async def execute(task, rep, seed, attempt):
        rec = await inner(task, rep, seed, attempt)
        if task.uid == FINE:
            loop = {}
            loop["self"] = loop
            rec.messages.append(loop)  # a circular value: no JSON for it
        return rec

    out = tmp_path / "r.jsonl"
    res = asyncio.run(run_episodes(list(ds.tasks.values()), 1, execute, output=out, retries=0))
    assert [u for u, _, _ in res.unresolved] == [FINE] and "record cannot be written" in res.unresolved[0][2]
    assert {r.uid for r in read_records(out)} == set(ds.tasks) - {FINE}
    [err] = read_records(default_errors_path(out))
    assert err.uid == FINE and err.system_error.startswith("record cannot be written: ")


# ---------------------------------------------------------------------------- 2. the interpreter never raises

@pytest.mark.parametrize("family", ["hermes", "xml"])
def test_deep_nesting_is_rejected_with_a_message_not_raised(family):
    tools = ti.Toolset([{"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "object"}}}}])
    for depth in (ti.MAX_DEPTH, ti.MAX_DEPTH + 1, 500, 1000, 10000):
        value = '{"a":' * depth + "1" + "}" * depth
        text = (f'<tool_call>\n{{"name": "f", "arguments": {{"x": {value}}}}}\n</tool_call>' if family == "hermes" else
                f"<tool_call>\n<function=f>\n<parameter=x>\n{value}\n</parameter>\n</function>\n</tool_call>")
        [call] = ti.parse(text, family=family, tools=tools, thinking=False).calls
        if depth < ti.MAX_DEPTH:  # {"x": value} is one level more than value
            assert call.executable
        else:
            assert not call.executable and "nested deeper than 64 levels" in call.message, (depth, call)
        cut = ti.parse(text[: len(text) // 2], family=family, tools=tools, thinking=False)
        assert [c.problem for c in cut.calls] == ["truncated"]


def test_a_turn_with_too_many_calls_runs_none_and_parsing_stays_fast():
    tools = ti.Toolset([{"name": "f", "parameters": {"type": "object", "properties": {}}}])
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n'
    c = ti.parse(call * ti.MAX_CALLS, family="hermes", tools=tools, thinking=False)
    assert len(c.tool_calls) == ti.MAX_CALLS
    t = time.perf_counter()
    c = ti.parse(call * 30000, family="hermes", tools=tools, thinking=False)  # ~1.4 MB
    assert time.perf_counter() - t < 0.5
    assert len(c.calls) == ti.MAX_CALLS + 1 and not c.tool_calls
    assert c.calls[0].message.startswith(f"Error: this turn has more than {ti.MAX_CALLS} tool calls")
    t = time.perf_counter()  # '<' and a long run of spaces inside a value: the markup check is linear
    ti.parse(f'<tool_call>\n{{"name": "f", "arguments": {{"x": "<{" " * 200000}/parameter"}}}}\n</tool_call>',
             family="hermes", tools=tools, thinking=False)
    assert time.perf_counter() - t < 0.5


@pytest.mark.parametrize("family", ["hermes", "xml"])
def test_generated_adversarial_outputs_parse_or_are_rejected(family):
    tools = ti.Toolset([{"name": "find_member", "parameters": {"type": "object", "properties": {
        "email": {"type": "string"}, "filter": {"type": "object"}}, "additionalProperties": False}}])
    for kind, text in generate(600, seed=3, family=family, big_every=150):
        for thinking in (True, False):
            c = ti.parse(text, family=family, tools=tools, thinking=thinking)
            assert all(x.executable == (x.message is None) for x in c.calls), kind
            json.dumps(c.to_message(), ensure_ascii=False).encode("utf-8")  # encodable: no lone surrogate left


def _bench():
    spec_ = importlib.util.spec_from_file_location("bench_adversarial", ROOT / "bench" / "adversarial.py")
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("family", ["hermes", "xml"])
def test_adversarial_outputs_through_real_episodes_are_all_scored(family, tmp_path):
    """The acceptance's check, small: bench/adversarial.py with 200 outputs per family (two of them ~1 MB)."""
    r = _bench().play(200, seed=11, family=family, big_every=100, concurrency=4, workdir=tmp_path, show=False)
    assert r["served"] == 200 and r["crashes"] == [] and r["unreadable_files"] == 0
    assert r["system_errors"] == 0, r["system_error_causes"]
    assert r["scored"] == r["episodes"] > 0


# ---------------------------------------------------------------------------- 3. empty replies

@pytest.mark.parametrize("content", [None, "", "<think>\nstill thinking"])
def test_an_endpoint_that_answers_nothing_ends_each_episode_in_at_most_5_requests(fakes, tmp_path, content):
    fake = fakes(lambda p, b, h: completion(content))
    out = tmp_path / "r.jsonl"
    res = run(spec(fake.url), RunPlan(output=out, only=frozenset({FINE}), repeat=3, concurrency=1))
    assert res.written == 3 and res.unresolved == []
    recs = read_records(out)
    assert {r.end_reason for r in recs} == {"empty_turns"} and all(r.system_error is None for r in recs)
    assert all(r.usage["agent"]["calls"] <= 5 for r in recs) and len(fake.turns()) == 3 * 4


# ---------------------------------------------------------------------------- 4. redaction

def test_redact_removes_keys_headers_and_user_info():
    redact.register(KEY)
    text = (f'{{"echo": {{"Authorization": "Bearer {KEY}", "x-api-key": "abcd12345"}}}} '
            f"url https://bob:hunter22@host/v1 key {json.dumps(KEY)} Authorization: Bearer zz-98765432")
    out = redact.redact(text)
    assert KEY not in out and "abcd12345" not in out and "hunter22" not in out and "zz-98765432" not in out
    assert out.count("[redacted]") == 5
    json.loads(redact.redact(json.dumps({"a": f"Bearer {KEY}", "b": "a basic understanding"}))) == {
        "a": "Bearer [redacted]", "b": "a basic understanding"}


def test_redact_one_call_takes_values_an_env_and_urls_without_registering_them():
    """What the launch and an endpoint add for one call (trainer/core/redact.py): their own values
    (any length), an environment's secret-named variables (names read loosely, values of 4
    characters or more) and, for plain text, every URL's query and user info with a quote."""
    env = {"MY_APIKEYS": "k3y-one-call", "TOKENIZERS_PARALLELISM": "false", "HOST": "plainhost", "A_TOKEN": "abc"}
    text = "k3y-one-call plainhost abc shh https://h.example/v1?sig=s3cret#top http://us\"er@h/x"
    out = redact.redact(text, env, values=["shh"], urls=True)
    assert out == "[redacted] plainhost abc [redacted] https://h.example/v1?[redacted]#top http://[redacted]@h/x"
    assert redact.redact(text) == text  # nothing of it registered
    assert redact.redact("k3y-one-call-and-more", {"X_KEY": "k3y-one-call", "Y_KEY": "k3y-one-call-and-more"}) == "[redacted]"
    assert redact.secret_name("MY_APIKEYS", loose=True) and not redact.secret_name("MY_APIKEYS")


def test_without_secrets_leaves_a_child_no_credential():
    env = {"PATH": "/bin", "TBT_JUDGE_API_KEY": "k", "HF_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
           "DB_PASSWORD": "p", "GOOGLE_APPLICATION_CREDENTIALS": "/c.json", "hf_token": "t", "PYTHONPATH": "/x"}
    assert redact.without_secrets(env) == {"PATH": "/bin", "PYTHONPATH": "/x"}


def test_an_endpoint_that_echoes_the_authorization_header_leaks_the_key_nowhere(fakes, tmp_path):
    """Policy and user endpoints quoting the request's headers in their failures: no file and no
    output of `tbt run` holds the key."""
    def echo(p, b, h):
        if b.get("messages") == [{"role": "user", "content": "ping"}]:
            return completion("pong")
        return 200, f"<html>not json; you sent Authorization: {h.get('Authorization')}</html>", {}

    def user_echo(p, b, h):
        if b.get("messages") == [{"role": "user", "content": "ping"}]:
            return completion("pong")
        return 200, {"error": {"message": f"no choices for {h.get('Authorization')}", "key": KEY}}, {}

    pol, usr = fakes(echo), fakes(user_echo)
    asks = fakes(lambda p, b, h: completion("<think>\nask\n</think>\n\nCould you tell me your email?")
                 if b.get("messages") != [{"role": "user", "content": "ping"}] else completion("pong"))
    env = {"TBT_POLICY_API_KEY": KEY, "TBT_USER_API_KEY": KEY}
    out = tmp_path / "r0.jsonl"
    p = tbt("run", str(SAMPLES), "--test-list", str(TOY), "--policy", f"openai:{pol.url}#m,retries=0", "--judge",
            "synthetic", "--output", str(out), "--retries", "0", env=env)
    assert p.returncode == 1, p.stderr  # every episode a system error (unresolved), the run finished
    assert len(pol.turns()) == 5
    os.environ["TBT_USER_API_KEY"] = KEY
    try:  # the user simulator's no-choices message quotes the body: through runner.run, into the errors file
        res = run(spec(asks.url, user=f"openai:{usr.url}#u,retries=0"), RunPlan(output=tmp_path / "r1.jsonl",
                                                                               only=frozenset({FINE}), retries=0))
    finally:
        del os.environ["TBT_USER_API_KEY"]
    assert len(res.unresolved) == 1 and len(usr.turns()) == 1
    files = [f for f in tmp_path.iterdir() if f.is_file()]
    errors = "".join(f.read_text() for f in files)
    assert "not json; you sent Authorization: Bearer [redacted]" in errors  # the cause is still told
    assert "no choices for Bearer [redacted]" in errors
    for text in [errors, p.stdout, p.stderr]:
        assert KEY not in text


# ---------------------------------------------------------------------------- 5. endpoints

def test_retry_after_is_honoured_and_capped(fakes):
    calls = []

    def limited(p, b, h):
        calls.append(time.monotonic())
        return (429, {"error": "slow down"}, {"Retry-After": "2"}) if len(calls) == 1 else completion("ok")

    fake = fakes(limited)
    ep = Endpoint(fake.url, retries=2, backoff_s=0.01)

    async def go():
        import httpx

        async with httpx.AsyncClient(base_url=fake.url) as client:
            return await post_json(ep, client, "/chat/completions", {"model": "m"})

    assert asyncio.run(go())["choices"][0]["message"]["content"] == "ok"
    assert calls[1] - calls[0] >= 2.0

    import httpx

    assert retry_after(httpx.Response(429, headers={"Retry-After": "7200"}), 60.0) == 60.0
    assert retry_after(httpx.Response(429, headers={"Retry-After": "soon"}), 60.0) is None
    assert retry_after(httpx.Response(503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), 60.0) == 0.0


def test_a_dead_policy_endpoint_is_exit_2_in_seconds_with_no_error_records(tmp_path):
    out = tmp_path / "r.jsonl"
    t = time.perf_counter()
    p = tbt("run", str(SAMPLES), "--policy", "openai:http://127.0.0.1:9/v1#m", "--judge", "synthetic", "--output",
            str(out))
    assert p.returncode == 2 and time.perf_counter() - t < 10, (p.returncode, p.stderr)
    assert "policy endpoint: http://127.0.0.1:9/v1/chat/completions is unreachable (ConnectError" in p.stderr
    assert not out.exists() or not out.read_text()
    assert not default_errors_path(out).exists() or not default_errors_path(out).read_text()


def test_misconfigured_endpoints_are_each_named_before_any_episode(fakes, tmp_path):
    wrong = fakes(lambda p, b, h: (404, {"error": "The model `m` does not exist."}, {}))
    refused = fakes(lambda p, b, h: (401, {"error": "bad key"}, {}))
    out = tmp_path / "r.jsonl"
    with pytest.raises(PreflightError) as e:
        run(spec(wrong.url, user=f"openai:{refused.url}#u"), RunPlan(output=out))
    assert e.value.problems[0].startswith(f"policy endpoint: {wrong.url}/chat/completions answered HTTP 404 "
                                          "(no such path or model)")
    assert e.value.problems[1].startswith(f"user endpoint: {refused.url}/chat/completions answered HTTP 401 "
                                          "(the key was refused)")
    assert not read_records(out) and len(wrong.requests) == len(refused.requests) == 1


def test_tasks_that_ask_a_judge_are_refused_without_one_or_left_out(fakes, tmp_path):
    ds = load_dataset(SAMPLES, test_list=TOY)
    judged = judged_tasks(list(ds.tasks.values()))
    assert SUSPENDED in judged and FINE not in judged
    fake = fakes(lambda p, b, h: completion("Nothing to do. <DONE>"))
    out = tmp_path / "r.jsonl"
    with pytest.raises(PreflightError, match=rf"{len(judged)} task\(s\) ask a judge and this run has none "
                                             rf"\(--judge none\): .*{SUSPENDED}"):
        run(spec(fake.url, judge="none"), RunPlan(output=out))
    assert fake.turns() == []
    lines = []
    res = run(spec(fake.url, judge="none"), RunPlan(output=out, skip_judged=True), notify=lines.append)
    assert res.written == len(ds.tasks) - len(judged) and SUSPENDED not in {r.uid for r in read_records(out)}
    assert lines == [f"{len(judged)} task(s) that ask a judge left out (no judge): {', '.join(sorted(judged))}"]


def test_the_endpoint_error_message_is_redacted():
    redact.register(KEY)
    ep = Endpoint("http://127.0.0.1:9/v1", api_key=KEY)
    assert ep.scrub(f"echo {KEY} and Authorization: Bearer {KEY}") == "echo [redacted] and Authorization: Bearer [redacted]"
    assert isinstance(EndpointError("x"), RuntimeError)


def test_episode_config_default_bound():
    assert EpisodeConfig().max_empty_turns == 3
