"""Knowledge bases without a search server (trainer/env/sandbox/kb_search.py): scenarios whose world state
carries `sources` get `search_policy` from an embedded FTS5 index, through the real sandbox and a
real episode. Fixture: tests/fixtures/datasets/kb (policies/*.md inlined as the scenarios' sources;
the notes server, which offers no search tool; the insurer server, shaped like a reference
benchmark server that needs Typesense)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from trainer.env.sandbox import kb_search
from trainer.env.errors import TaskFormatError
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerRegistry, strip_sources
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup, run_episode
from trainer.rollout.policy import Generation, Policy, PolicySession
from trainer.rollout.synthetic import SyntheticJudge
from trainer.rollout.setup import make_user

KB = Path(__file__).parent / "fixtures" / "datasets" / "kb"
DATA = load_dataset(KB, strict=True)
SHOP = DATA.tasks["kb_tasks.py:test_return_note"]
INSURER = DATA.tasks["kb_tasks.py:test_warranty_ticket"]
POLICIES = {p.name: p.read_text(encoding="utf-8") for p in sorted((KB / "policies").glob("*.md"))}


def registry(name: str = "servers.yaml") -> ServerRegistry:
    return ServerRegistry.from_yaml(KB / name)


def session(task, reg: ServerRegistry | None = None, calls: list[tuple[str, dict]] = (), **kw) -> tuple[Any, list[str]]:
    """Open a sandbox on `task`, run `calls`, return (its tool view, the reply texts)."""
    async def go():
        async with Sandbox(task, reg or registry(), DATA.agent(), **kw) as sb:
            return sb.tools, [await sb.call_tool(n, a) for n, a in calls]
    return asyncio.run(go())


def snippets(text: str) -> list[dict[str, Any]]:
    return json.loads(text)["snippets"]


def test_the_scenarios_carry_the_policy_files_verbatim():
    for task, server in ((SHOP, "notes"), (INSURER, "insurer")):
        sources = task.scenario.world_state[server]["sources"]
        assert {s["name"]: s["snippets"] for s in sources} == {n: [t] for n, t in POLICIES.items()}


# ---------------------------------------------------------------------------- through the real sandbox

def test_search_policy_is_served_from_the_embedded_index_when_no_server_offers_it():
    tools, (reply,) = session(SHOP, calls=[("search_policy", {"query": "return opened electronics"})])
    view = {t["name"]: t for t in tools}
    # the agent's view lists the servers' tools in their listing order; the embedded index's search
    # (no server offers it) comes after them
    assert [t["name"] for t in tools] == ["list_notes", "add_note", "search_policy"]
    assert view["search_policy"]["input_schema"] == kb_search.INPUT_SCHEMA
    assert view["search_policy"]["description"] == kb_search.DESCRIPTION and not view["search_policy"]["builtin"]
    found = snippets(reply)
    assert found[0]["source"] == "returns.md" and found[0]["text"] == POLICIES["returns.md"]
    assert all(list(s) == ["source", "score", "vector_distance", "text"] for s in found)
    assert all(isinstance(s["score"], int) and s["vector_distance"] == 2.0 for s in found)
    assert [s["score"] for s in found] == sorted((s["score"] for s in found), reverse=True)
    assert reply == json.dumps({"snippets": found})  # the reference's text: json.dumps of the output


@pytest.mark.parametrize("query, first", [
    ("how much does express shipping cost", "shipping.md"),
    ("my kettle has a defect, can I file a claim?", "warranty.md"),
    ("refunds to the original payment method", "returns.md"),
    ("shipped", "shipping.md"),  # stemmed: shipped ~ shipping
])
def test_ranking(query, first):
    _, (reply,) = session(SHOP, calls=[("search_policy", {"query": query})])
    assert snippets(reply)[0]["source"] == first


@pytest.mark.parametrize("args, n", [({}, 3), ({"max_results": 1}, 1), ({"max_results": 0}, 3),
                                     ({"max_results": -4}, 3), ({"max_results": None}, 3), ({"max_results": "2"}, 2)])
def test_max_results(args, n):
    _, (reply,) = session(SHOP, calls=[("search_policy", {"query": "returned order shipping warranty", **args})])
    assert len(snippets(reply)) == n


@pytest.mark.parametrize("args, error", [
    ({}, "Input validation failed: query: Field required"),
    ({"query": "refund", "limit": 2}, "Input validation failed: limit: Extra inputs are not permitted"),
    ({"query": 7}, "Input validation failed: query: Input should be a valid string"),
    ({"query": "refund", "max_results": "many"},
     "Input validation failed: max_results: Input should be a valid integer, unable to parse string as an integer"),
])
def test_bad_arguments_read_as_the_reference_writes_them(args, error):
    _, (reply,) = session(SHOP, calls=[("search_policy", args)])
    assert json.loads(reply) == {"error": f"Tool execution failed: {error}", "tool": "search_policy"}


def test_a_query_without_a_shared_word_finds_nothing():
    _, replies = session(SHOP, calls=[("search_policy", {"query": "zebra"}), ("search_policy", {"query": "?!"})])
    assert [snippets(r) for r in replies] == [[], []]


def test_strip_sources_makes_the_search_report_itself_unavailable():
    tools, (reply,) = session(SHOP, calls=[("search_policy", {"query": "refund"})],
                              world_state=strip_sources(SHOP.world_state()))
    assert "search_policy" in [t["name"] for t in tools]
    assert json.loads(reply) == {"error": "Tool execution failed: Search service is not available",
                                 "tool": "search_policy"}


def test_kb_search_server_keeps_the_reference_behaviour():
    reg = registry()
    reg.kb_search = "server"
    with pytest.raises(TaskFormatError, match="'search_policy' is listed but no server offers it"):
        session(SHOP, reg)


def test_embedded_mode_hides_the_servers_own_tool_and_keeps_the_sources_from_it():
    """The insurer server needs Typesense: under `auto` (its tool is its own) its init refuses the
    sources; under `kb_search: embedded` the sandbox keeps them from it and serves the tool."""
    with pytest.raises(SandboxError, match="insurer.*init.*Typesense is not reachable"):
        session(INSURER, registry("servers.yaml"))
    tools, (reply, ticket) = session(INSURER, registry("servers_embedded.yaml"), calls=[
        ("knowledge_base_search_policy", {"query": "appliance stopped working: warranty claim", "max_results": 1}),
        ("open_ticket", {"subject": "toaster", "label": "warranty"})])
    view = {t["name"]: t for t in tools}
    assert view["knowledge_base_search_policy"]["input_schema"] == kb_search.INPUT_SCHEMA
    assert [s["source"] for s in snippets(reply)] == ["warranty.md"]
    assert json.loads(ticket)["label"] == "warranty"


def test_one_index_per_distinct_set_of_sources_is_built_and_shared():
    reg = registry()
    session(SHOP, reg)
    session(SHOP, reg)
    assert (len(reg.kb_indexes), reg.kb_indexes.misses, reg.kb_indexes.hits) == (1, 1, 1)


@pytest.mark.parametrize("sources, key", [
    ("all of it", "world_state.notes.sources"),
    ([{"snippets": ["x"]}], "world_state.notes.sources[0]"),
    ([{"name": "a.md", "snippets": "x"}], "world_state.notes.sources[0].snippets"),
])
def test_malformed_sources_name_the_file_and_the_field(sources, key):
    ws = SHOP.world_state()
    ws["notes"]["sources"] = sources
    with pytest.raises(TaskFormatError) as e:
        session(SHOP, world_state=ws)
    assert e.value.key == key and Path(e.value.file) == SHOP.scenario.path


def test_servers_yaml_kb_search_must_be_a_mode(tmp_path):
    bad = tmp_path / "servers.yaml"
    bad.write_text("servers: {}\nkb_search: typesense\n")
    with pytest.raises(TaskFormatError) as e:
        ServerRegistry.from_yaml(bad)
    assert (e.value.key, e.value.line) == ("kb_search", 2) and "auto, embedded, server" in e.value.message
    assert registry("servers_embedded.yaml").kb_search == "embedded" and registry().kb_search == "auto"


# ---------------------------------------------------------------------------- the index alone

def test_at_most_three_snippets_of_one_source_and_ten_sources():
    kb = kb_search.KnowledgeBase([{"name": "big.md", "snippets": [f"refund rule {i}" for i in range(5)]},
                                  *({"name": f"s{i}.md", "snippets": [f"refund note {i}"]} for i in range(12))])
    hits = kb.search("refund", 10)
    assert len(hits) == 10 and sum(h["source"] == "big.md" for h in hits) <= 3
    assert len({h["source"] for h in kb.search("refund", 100)}) == 10


# ---------------------------------------------------------------------------- a real episode

class Scripted(Policy):
    """Chat-level: plays `turns` (raw Qwen text) in order."""

    kind = "scripted"

    def __init__(self, turns: list[str]):
        super().__init__()
        self.turns = turns
        self.seen: list[list[dict[str, Any]]] = []

    def session(self, info):
        policy = self

        class S(PolicySession):
            async def chat(self, messages, tools, *, max_tokens):
                policy.seen.append(messages)
                return Generation(text=policy.turns.pop(0), input_tokens=10, output_tokens=5)
        return S()


def turn(name: str, **args: Any) -> str:
    return f"<think>\nlook it up\n</think>\n\n<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def test_an_episode_reads_its_policy_from_the_embedded_index_and_passes():
    note = "Opened electronics: return within 14 days, 15% restocking fee"
    policy = Scripted([turn("search_policy", query="return opened headphones"),
                       turn("add_note", text=note, label="policy"),
                       "<think>\ndone\n</think>\n\nYes: within 14 days, with a 15% restocking fee. <DONE>"])
    setup = EpisodeSetup(registry(), DATA.agent(), policy, make_user("scripted"), SyntheticJudge(),
                         {"kind": "synthetic"}, EpisodeConfig())
    rec = asyncio.run(run_episode(SHOP, setup, seed=0))
    assert rec.system_error is None and rec.end_reason == "done"
    assert rec.passed, rec.verdict
    search = rec.tool_calls[0]
    assert search["name"] == "search_policy" and snippets(search["result"])[0]["source"] == "returns.md"
    tool_msg = next(m for m in rec.messages if m["role"] == "tool")
    assert tool_msg["name"] == "search_policy" and "14 days" in tool_msg["content"]
