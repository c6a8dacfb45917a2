"""What the models are sent, as the ThinkingBox framework's own loop sends it (issue 26;
docs/episodes.md, "What the models are sent"): real episodes on a fixture dataset shaped like the
benchmark's (tests/fixtures/datasets/benchlike: two in-process MCP servers whose listing order
differs from the scenario's, schemas with titles and a `$ref`, a golden call with a parameter its
schema does not declare), a real local HTTP endpoint for the agent, the user and the judge."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from fakes import completion, model
from trainer.env.grading.judge import Judge
from trainer.env.sandbox.mcp_host import ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup, opening_prompt, run_episode
from trainer.rollout.policy import SpecError
from trainer.rollout.sampling import load_sampling
from trainer.rollout.setup import make_policy, make_user
from trainer.rollout.user import DONT_KNOW, USER_SYSTEM, clean_reply, load_prompts, PromptError

ROOT = Path(__file__).resolve().parent / "fixtures" / "datasets" / "benchlike"
DS = load_dataset(ROOT, strict=True)
TASK = DS.tasks["desk.py:test_solve_open_refund"]


def tool_call(name: str, args: dict[str, Any]) -> str:
    return f"<think>\nlook\n</think>\n\n<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


GOLDEN = [tool_call("tickets_get_items", {"filter": "status:open"}),
          tool_call("tickets_update_item", {"item_id": 2, "status": "solved"}),
          "<think>\ndone\n</think>\n\nYour refund ticket is solved. <DONE>"]


def registry() -> ServerRegistry:
    return ServerRegistry.from_yaml(ROOT / "servers.yaml", python=sys.executable, domains={})


def play(url: str, *, view: str = "thinkingbox", user=None):
    policy = make_policy(f"openai:{url}#agent-m,retries=0,max_tokens=300", env={}, request_style=view,
                         sampling=load_sampling())  # what tbt run / tbt eval give it
    setup = EpisodeSetup(registry(), DS.agent(), policy, user, Judge(), {"kind": "none"},
                         EpisodeConfig(agent_view=view))

    async def main():
        try:
            return await run_episode(TASK, setup, seed=5)
        finally:
            await policy.aclose()
            if user is not None:
                await user.aclose()
            setup.registry.close()

    return asyncio.run(main())


def walk(node: Any, key: str) -> list[Any]:
    """Every value of `key` anywhere in `node`."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key] + [x for v in node.values() for x in walk(v, key)]
    if isinstance(node, list):
        return [x for v in node for x in walk(v, key)]
    return []


# ---------------------------------------------------------------------------- the agent's request

def test_the_agent_is_sent_the_frameworks_tools_and_request(endpoints):
    ep = endpoints(model(GOLDEN))
    rec = play(ep.url)
    assert rec.system_error is None and rec.passed, rec.verdict
    body = ep.requests[0]["body"]
    # builtin first, then the servers' listing order (tickets before people, each its list_tools
    # order), only the tools the scenario lists; the scenario lists people_find first
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == ["escalate_to_human", "tickets_get_items", "tickets_update_item", "people_find"]
    assert [t.name for t in TASK.scenario.tools] == ["people_find", "tickets_update_item", "tickets_get_items"]
    params = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    for name, p in params.items():  # the framework's view of every server's schema
        assert p["additionalProperties"] is False
        if name != "escalate_to_human":
            assert "title" not in p and all("title" not in prop for prop in p["properties"].values())
    # a builtin tool (the agent's own, no server's) keeps its schema as written, closed
    assert params["escalate_to_human"] == {**DS.agent().builtin_tools[0].input_schema, "additionalProperties": False}
    assert walk(params, "$ref") == [] and walk(params, "$defs") == []
    # the $ref resolved first, then the property's title dropped (titles deeper down stay, as theirs do)
    assert params["tickets_update_item"]["properties"]["status"] == {"type": "string",
                                                                      "enum": ["open", "pending", "solved"]}
    assert params["tickets_get_items"]["properties"]["ids"]["description"] == "Item ids; all when empty."
    tools = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert tools["tickets_update_item"]["description"] == "Change the status of one ticket item."  # override kept
    # the request parameters: parallel_tool_calls off, the turn's room as max_completion_tokens
    assert body["parallel_tool_calls"] is False and body["max_completion_tokens"] == 300 and "max_tokens" not in body
    assert (body["temperature"], body["top_p"], body["top_k"]) == (1.0, 0.95, 20)  # configs/sampling.yaml
    assert [m["role"] for m in body["messages"]] == ["system", "user"]  # system messages merged
    # the token path renders the same tools in the same order
    messages, schemas = asyncio.run(opening_prompt(TASK, registry(), DS.agent()))
    assert schemas == body["tools"]


def test_an_undeclared_parameter_reaches_the_server_which_decides(endpoints):
    ep = endpoints(model(GOLDEN))
    rec = play(ep.url)
    assert rec.passed and rec.end_reason == "done"
    get = rec.tool_calls[0]
    assert (get["name"], get["arguments"], "problem" in get) == ("tickets_get_items", {"filter": "status:open"}, False)
    assert [i["id"] for i in json.loads(get["result"])] == [1, 2]  # the server applied its filter
    # the model was shown additionalProperties: false, but the call was checked against what the server declares


def test_the_plain_view_is_the_scenarios_order_and_the_servers_schemas(endpoints):
    ep = endpoints(model(GOLDEN))
    rec = play(ep.url, view="plain")
    assert rec.passed
    body = ep.requests[0]["body"]
    assert [t["function"]["name"] for t in body["tools"]] == ["escalate_to_human", "people_find",
                                                             "tickets_update_item", "tickets_get_items"]
    update = body["tools"][2]["function"]["parameters"]
    assert update["title"] == "update_itemArguments" and update["properties"]["status"] == {"$ref": "#/$defs/Status"}
    assert "additionalProperties" not in update
    assert body["max_tokens"] == 300 and "max_completion_tokens" not in body and "parallel_tool_calls" not in body
    with pytest.raises(ValueError, match="agent view 'fancy'"):
        EpisodeConfig(agent_view="fancy")


# ---------------------------------------------------------------------------- the simulated user

ASK = "<think>\nask\n</think>\n\nSay <DONE> when ready. USER_CONTEXT: you are Bob.\nWhich ticket is it?"


def test_the_user_sees_labelled_escaped_visible_text_and_its_reply_is_cleaned(endpoints):
    agent = endpoints(model([ASK, ASK, *GOLDEN]))
    replies = iter([completion('  User: "It is item 2."  '), completion("   ")])
    user_ep = endpoints(lambda path, body: next(replies))
    user = make_user(f"openai:{user_ep.url}#user-m,retries=0", env={})
    rec = play(agent.url, user=user)
    assert rec.passed and rec.turns == {"agent": 5, "user": 2}
    said = [m["content"] for m in rec.messages if m["role"] == "user"]
    assert said == [TASK.query, "It is item 2.", DONT_KNOW]  # cleaned; an empty reply is "I don't know."
    first, second = (r["body"] for r in user_ep.requests)
    assert first["messages"][0] == {"role": "system", "content": USER_SYSTEM}
    assert (first["model"], first["temperature"], first["max_completion_tokens"]) == ("user-m", 0.0, 4096)
    asked = "Say <DONE (escaped)> when ready. USER_CONTEXT (escaped): you are Bob.\nWhich ticket is it?"
    assert first["messages"][1]["content"] == (
        f"CONVERSATION_SO_FAR:\nUser: {TASK.query}\n\nAssistant: {asked}\n[END OF CONVERSATION]\n\n"
        f"USER_CONTEXT:\n{TASK.user_context.strip() if TASK.user_context.endswith(chr(10)) else TASK.user_context}"
        f"\n\nASSISTANT_LAST_MESSAGE:\n{asked}\n\nWrite the customer's next message.")
    # tool traffic and reasoning never reach it; its own cleaned reply is in the next transcript
    assert f"User: It is item 2.\n\nAssistant: {asked}\n[END OF CONVERSATION]" in second["messages"][1]["content"]
    assert "ask" not in second["messages"][1]["content"].replace("asked", "")


@pytest.mark.parametrize("raw,clean", [
    ("Assistant: item 2", "item 2"), ("USER: 'yes'", "yes"), ('"quoted"', "quoted"), ("'", "'"),
    ("User: User: twice", "User: twice"), ('""', DONT_KNOW), (None, DONT_KNOW), ("customer: hi", "customer: hi"),
])
def test_clean_reply(raw, clean):
    assert clean_reply(raw) == clean


def test_user_prompts_from_a_file_and_from_the_thinkingbox_package(endpoints, tmp_path, monkeypatch):
    f = tmp_path / "prompts.yaml"
    f.write_text("system: Be the user.\nuser: |-\n  HISTORY>\n  {transcript}\n  <HISTORY\n  KNOWN> {user_context}\n"
                 "  LAST> {last_assistant_message}\n")
    agent = endpoints(model([ASK.replace("USER_CONTEXT:", "KNOWN>"), *GOLDEN]))
    user_ep = endpoints(lambda path, body: completion("item 2"))
    user = make_user(f"openai:{user_ep.url}#u,retries=0,prompts={f},max_tokens=99,seed=3", env={})
    assert user.identity()["prompts"] == str(f)
    rec = play(agent.url, user=user)
    assert rec.passed
    body = user_ep.requests[0]["body"]
    assert body["messages"][0]["content"] == "Be the user." and (body["max_completion_tokens"], body["seed"]) == (99, 3)
    # the file's markers are escaped in what is put into its template
    assert "Assistant: Say <DONE (escaped)> when ready. KNOWN (escaped)> you are Bob." in body["messages"][1]["content"]
    assert body["messages"][1]["content"].startswith("HISTORY>\nUser: ")

    for text, problem in [("system: x\n", "user: required"), ("system: x\nuser: '{history}'\n", "unknown placeholder"),
                          ("system: x\nuser: y\ncolour: red\n", r"unknown key\(s\) colour"), ("- a\n", "expected a mapping")]:
        f.write_text(text)
        with pytest.raises(SpecError, match=problem) as e:
            make_user(f"openai:http://127.0.0.1:9/v1#u,prompts={f}", env={})
        assert str(f) in str(e.value)

    # the installed framework's prompts, read at run time (here a stand-in module of that name)
    monkeypatch.delitem(sys.modules, "thinkingbox.common.user_simulated_answer", raising=False)
    with pytest.raises(PromptError, match="thinkingbox"):
        load_prompts("thinkingbox")
    mod = types.ModuleType("thinkingbox.common.user_simulated_answer")
    mod.SYSTEM_PROMPT = "Play the user."
    mod.USER_PROMPT = "H:\n{transcript}\nC:\n{user_context}\nL:\n{last_assistant_message}\n"
    mod._sanitize_content = lambda s: s.replace("<DONE>", "[done]")
    monkeypatch.setitem(sys.modules, "thinkingbox.common.user_simulated_answer", mod)
    p = load_prompts("thinkingbox")
    assert (p.system, p.source, p.escape("a <DONE> b")) == ("Play the user.", "thinkingbox", "a [done] b")


# ---------------------------------------------------------------------------- the framework's config file

CONFIG = """\
mcp_proxy:
  endpoint_url: "http://127.0.0.1:7111"
orchestrator:
  type: thinkingbox
  agent_model:
    type: aoai
    deployment: agent-m
    endpoint_url: "{agent}/chat/completions"
    is_reasoning: true
    temperature: 1.0
    top_k: 20
    top_p: 0.95
    max_completion_tokens: 8192
    timeout: 30.0
    max_retries_server_error: 0
    credential: {{type: api-key, api_key: "${{TBT_TEST_AGENT_KEY}}"}}
judge_model:
  type: aoai
  deployment: judge-m
  endpoint_url: "{judge}/chat/completions"
  is_reasoning: false
  temperature: 0.0
  seed: 42
  max_completion_tokens: 128
  credential: {{type: api-key, api_key: literal-judge-key-123}}
judge_type: legacy
user_model:
  type: aoai
  deployment: user-m
  endpoint_url: "{user}/chat/completions"
  temperature: 0.0
  max_completion_tokens: 4096
  api_version: "2024-10-21"
"""


def test_the_framework_config_file_gives_policy_user_and_judge(tmp_path, monkeypatch):
    from trainer.formats.tbconfig import TBConfigError, read_tb_config

    f = tmp_path / "thinkingbox.yaml"
    f.write_text(CONFIG.format(agent="http://127.0.0.1:1/v1", judge="http://127.0.0.1:2/v1", user="http://127.0.0.1:3/v1"))
    env = {"TBT_TEST_AGENT_KEY": "agent-key-456"}
    c = read_tb_config(f, env)
    assert c.policy == ("openai:http://127.0.0.1:1/v1#agent-m,temperature=1.0,top_p=0.95,top_k=20,max_tokens=8192,"
                        "timeout=30.0,retries=0,key_env=TBT_TEST_AGENT_KEY")
    assert c.judge == ("openai:http://127.0.0.1:2/v1#judge-m,temperature=0.0,max_tokens=128,seed=42,"
                       "key_env=TBT_CONFIG_JUDGE_KEY")
    assert c.user == "openai:http://127.0.0.1:3/v1#user-m,temperature=0.0,max_tokens=4096"
    assert env["TBT_CONFIG_JUDGE_KEY"] == "literal-judge-key-123"  # the literal key travels by the environment
    assert "literal-judge-key-123" not in c.policy + c.judge + c.user and c.thinking is True
    assert c.notes == ["mcp_proxy: not used (the sandbox runs the task's servers itself)",
                       "user_model: not used: api_version"]
    # a block without sampling gets the framework's defaults, not ours
    f.write_text("orchestrator:\n  agent_model: {type: aoai, deployment: m, endpoint_url: 'http://h/v1/chat/completions'}\n"
                 "judge_model: {type: aoai, deployment: j, endpoint_url: 'http://h/v1/chat/completions'}\n")
    c = read_tb_config(f, {})
    assert c.policy == "openai:http://h/v1#m,temperature=1.0,top_p=1.0,top_k=0,max_tokens=4096" and c.user is None
    assert c.judge == "openai:http://h/v1#j,temperature=1.0,max_tokens=4096,seed=none"

    for text, where in [
        ("orchestrator:\n  agent_model: {type: aoai, deployment: m, endpoint_url: 'http://h/v1/chat/completions',\n"
         "    temprature: 1}\n", r":3: orchestrator.agent_model.temprature: unknown key"),
        ("orchestrator:\n  agent_model:\n    type: anthropic\n", r":3: orchestrator.agent_model.type: 'anthropic' is not supported"),
        ("judge_type: motivation\n", r":1: judge_type: 'motivation' is not supported"),
        ("agent_modle: {}\n", r":1: agent_modle: unknown key"),
        ("orchestrator:\n  agent_model: {type: aoai, deployment: m, endpoint_url: 'http://h/v1'}\n",
         r":2: orchestrator.agent_model.endpoint_url: expected a URL ending in /chat/completions"),
        ("orchestrator:\n  agent_model:\n    type: aoai\n    deployment: m\n    endpoint_url: http://h/v1/chat/completions\n"
         "    temperature: hot\n", r":6: orchestrator.agent_model.temperature: expected a number"),
        ("orchestrator:\n  agent_model:\n    type: aoai\n    deployment: m\n    endpoint_url: http://h/v1/chat/completions\n"
         "    credential: {type: api-key, api_key: $NOPE_KEY}\n", r":6: orchestrator.agent_model.credential.api_key: "
                                                                 r"\$NOPE_KEY is not set"),
    ]:
        f.write_text(text)
        with pytest.raises(TBConfigError, match=where) as e:
            read_tb_config(f, {})
        assert str(e.value).startswith(str(f))


def test_tbt_eval_runs_the_protocol_from_the_framework_config_file(endpoints, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from trainer.cli import app

    agent = endpoints(model(["<think>\nhmm\n</think>\n\nCould you tell me your email?",
                             "<think>\nok\n</think>\n\nI cannot help with that. <DONE>"]))
    user = endpoints(lambda path, body: completion("I don't know."))
    judge = endpoints(lambda path, body: completion("Yes"))
    f = tmp_path / "thinkingbox.yaml"
    f.write_text(CONFIG.format(agent=agent.url, judge=judge.url, user=user.url))
    monkeypatch.setenv("TBT_TEST_AGENT_KEY", "agent-key-456")
    samples = Path(__file__).resolve().parents[1] / "data" / "samples"
    out, agg = tmp_path / "run.jsonl", tmp_path / "agg.json"
    r = CliRunner().invoke(app, ["eval", str(samples), "--config", str(f), "--test-list",
                                 str(samples / "lists" / "toy.yaml"), "-n", "1", "-o", str(out),
                                 "--aggregate-output", str(agg), "--no-progress", "--bootstrap", "100"])
    assert r.exit_code == 0, r.output
    assert "note  --config" in r.output and "agent-key-456" not in r.output and "literal-judge-key" not in r.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 5 and all(rec["system_error"] is None for rec in records)
    body = next(q["body"] for q in agent.requests if "tools" in q["body"])  # (a preflight probe may come first)
    assert (body["model"], body["temperature"], body["top_p"], body["top_k"], body["max_completion_tokens"]) == \
        ("agent-m", 1.0, 0.95, 20, 8192)
    assert {q["auth"] for q in agent.requests} == {"Bearer agent-key-456"}
    assert user.requests and {q["body"]["model"] for q in user.requests} == {"user-m"}
    assert any(q["body"].get("max_completion_tokens") == 4096 for q in user.requests)
    assert records[0]["user"]["model"] == "user-m" and records[0]["judge"]["model"] == "judge-m"
    assert "agent-key-456" not in out.read_text() and "literal-judge-key" not in out.read_text()
    assert json.loads(agg.read_text())


def test_the_framework_schema_is_a_new_tree_and_leaves_the_servers_as_declared():
    """Resolving builds every container anew: a `$defs` entry used twice becomes two separate
    copies, the server's declared schema is untouched, and an unresolvable `$ref` stays."""
    from trainer.rollout.agentview import framework_schema

    declared = {"title": "A", "type": "object", "$defs": {"S": {"title": "S", "type": "string", "enum": ["x"]}},
                "properties": {"a": {"$ref": "#/$defs/S", "title": "a"}, "b": {"$ref": "#/$defs/S"},
                               "c": {"$ref": "other.json#/S", "description": "kept"}}}
    before = json.dumps(declared, sort_keys=True)
    out = framework_schema(declared)
    assert json.dumps(declared, sort_keys=True) == before
    assert out["properties"]["a"] == out["properties"]["b"] == {"type": "string", "enum": ["x"]}  # titles dropped
    assert out["properties"]["a"] is not out["properties"]["b"]
    assert out["properties"]["a"]["enum"] is not declared["$defs"]["S"]["enum"]
    assert out["properties"]["c"] == {"$ref": "other.json#/S", "description": "kept"}
    assert "$defs" in out and "title" not in out and out["additionalProperties"] is False  # incomplete: $defs kept
