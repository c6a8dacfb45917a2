"""The judge API (the ThinkingBox framework's methods) against a real local OpenAI-compatible HTTP
server with scripted answers: each method, failing closed, the key never shown, and the grader
recording every method's questions (golden replay included) on the tbjudge fixture dataset."""

from __future__ import annotations

import json
import logging
import socket

from pathlib import Path

import pytest

from trainer.rollout.policy import SpecError
from typer.testing import CliRunner

from trainer.cli import app
from trainer.core import redact
from trainer.env.grading.chat_types import Text
from trainer.env.grading.context import Judge, JudgeUnavailable, TestContext
from trainer.env.golden import ReplayJudge
from trainer.env.grading.grader import answer_for_child, grade
from trainer.env.grading.judge import (
    STRICTER, ChatJudge, JudgeAmbiguous, JudgeConfig, parse_motivation, parse_yesno, read_verdict
)
from trainer.env.taskformat.tasks import load_dataset

KEY = "sk-test-do-not-leak-1234"


class Script:
    """Each request pops the next reply: (status, body) with body a str or a JSON-able object."""

    def __init__(self):
        self.replies: list[tuple[int, object]] = []
        self.requests: list[dict] = []


@pytest.fixture
def endpoint(endpoints):
    script = Script()
    ep = endpoints(lambda path, body: script.replies.pop(0) if script.replies else (500, "no script left"))
    script.requests = ep.requests
    yield ep.url, script


def chat(content):
    return 200, {"choices": [{"message": {"role": "assistant", "content": content}}]}


def judge_at(url, **kw):
    return ChatJudge(JudgeConfig(url=url, model="judge-m", api_key=KEY, backoff_s=0.01, **kw))


@pytest.mark.parametrize("answer,expected", [
    ("yes", True), ("Yes.", True), ("YES", True), ("**Yes**", True), (" 'Yes!' ", True), ("no", False),
    ("No.", False), ("**No**", False), ("I think the answer is yes", None), ("", None), ("   ", None),
    ("maybe", None), ("yesterday", None), ("Yes, no", None), ("no, yes", None), ("the answer: no", None),
    ("No — it never said yes", None), ("Yes, but no", None), ('{"answer": "No, definitely not yes"}', None),
    (None, None), ("nothing", None),
])
def test_only_one_verdict_word_is_a_verdict(answer, expected):
    assert read_verdict(answer) is expected
    assert parse_yesno(answer) is (expected is True) and parse_yesno(answer, expect=False) is (expected is False)


@pytest.mark.parametrize("reply,expected", [
    ('{"motivation": "It names it.", "answer": "Yes"}', {"answer": True, "motivation": "It names it."}),
    ('```json\n{"answer": "No", "motivation": "It does not."}\n```', {"answer": False, "motivation": "It does not."}),
    ("{'answer': 'Yes', 'motivation': 'x'}", None),  # single-quoted values are not JSON: unreadable
    ("{'answer': \"Yes\", 'motivation': \"ok\"}", {"answer": True, "motivation": "ok"}),
    ('{answer: "yes.", motivation: "ok"}', {"answer": True, "motivation": "ok"}),
    ('{"motivation": "says, answer: yes", "answer": "no"}', {"answer": False, "motivation": "says, answer: yes"}),
    ('{"motivation": "no answer key"}', None), ('{"answer": true}', None), ('{"answer": "Yes"', None),
    ("Yes", None), ("", None), (None, None), ("[]", None),
    ('{"answer": "Yes, but no", "motivation": "hedge"}', {"answer": None, "motivation": "hedge"}),
])
def test_parse_motivation_fails_closed(reply, expected):
    got = parse_motivation(reply)
    if expected is None:
        assert got["answer"] is None and got["motivation"].startswith("unreadable judge reply")
    else:
        assert got == expected


def test_asks_the_endpoint_and_parses(endpoint):
    url, script = endpoint
    script.replies = [chat("Yes."), chat("no"), chat("maybe"), chat("No"), chat("The text is a greeting."),
                      chat("Yes, but no")]
    j = judge_at(url)
    assert j.text_yesno("hello there", "Is it a greeting?") is True
    assert j.text_yesno("t", "q") is False
    assert j.text_yesno("t", "q") is False  # ambiguous, asked again more strictly: a clear no
    with pytest.raises(JudgeAmbiguous, match="asked twice.*'The text is a greeting.'.*'Yes, but no'"):
        j.text_yesno("t", "q")  # ambiguous twice
    assert STRICTER.strip() in script.requests[3]["body"]["messages"][0]["content"]
    assert STRICTER.strip() not in script.requests[2]["body"]["messages"][0]["content"]
    req = script.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == f"Bearer {KEY}"
    assert req["body"]["model"] == "judge-m" and req["body"]["temperature"] == 0
    assert "hello there" in req["body"]["messages"][1]["content"]
    assert "Is it a greeting?" in req["body"]["messages"][1]["content"]


EMPTY, NOT_CHAT = "returned empty replies", "returned replies that are not chat completions"
NO_ANSWER = {"empty": (chat(""), EMPTY), "null": (chat(None), EMPTY), "blank": (chat("  \n"), EMPTY),
             "no-content": ((200, {"choices": [{"message": {"role": "assistant"}}]}), EMPTY),
             "not-json": ((200, "not json"), NOT_CHAT), "no-choices": ((200, {"choices": []}), NOT_CHAT),
             "error-body": ((200, {"error": "overloaded"}), NOT_CHAT)}


@pytest.mark.parametrize("reply,what", NO_ANSWER.values(), ids=NO_ANSWER.keys())
def test_no_answer_is_retried_like_a_5xx_then_unavailable(endpoint, reply, what):
    url, script = endpoint
    script.replies = [reply, chat("yes")]  # no answer once, then one: retried, not read as No
    assert judge_at(url, retries=1).text_yesno("t", "q") is True
    assert len(script.requests) == 2
    script.replies = [reply] * 3
    with pytest.raises(JudgeUnavailable, match=f"judge {what} after 3 attempts"):
        judge_at(url, retries=2).text_yesno("t", "q")
    assert len(script.requests) == 5


def test_empty_replies_are_a_system_error_of_the_grading(endpoint):
    url, script = endpoint
    task = load_dataset(Path(__file__).parent / "fixtures/datasets/grading").tasks["grading_cases.py:test_asks_judge"]
    script.replies = [chat("")] * 2
    v = grade(task, TestContext(response="thanks!"), judge_at(url, retries=1))
    assert (v.passed, v.reward) == (False, 0.0) and "JudgeUnavailable: judge returned empty replies" in v.system_error
    script.replies = [chat(None), chat("Yes")]
    v = grade(task, TestContext(response="thanks!"), judge_at(url, retries=1), isolate=True)
    assert (v.passed, v.system_error) == (True, None)


def test_retries_with_backoff_then_answers(endpoint):
    url, script = endpoint
    script.replies = [(503, "busy"), (429, "slow down"), chat("yes")]
    assert judge_at(url, retries=3).text_yesno("t", "q") is True
    assert len(script.requests) == 3


def test_unreachable_after_retries_is_unavailable(endpoint, caplog):
    url, script = endpoint
    script.replies = [(500, "down")] * 3
    with caplog.at_level(logging.DEBUG), pytest.raises(JudgeUnavailable, match="after 3 attempts"):
        judge_at(url, retries=2).text_yesno("t", "q")
    assert len(script.requests) == 3
    assert KEY not in caplog.text


def test_retry_after_is_honoured_and_capped(endpoint):
    url, script = endpoint
    script.replies = [(429, {"error": "slow down"}, {"Retry-After": "1"}), (503, "busy", {"Retry-After": "3600"}),
                      chat("yes")]
    assert judge_at(url, retries=2, max_retry_after_s=0.3).yesno("q") is True
    first, second, third = (r["at"] for r in script.requests)
    assert second - first >= 0.3 and third - second >= 0.3  # the cap (0.3 s) under both asks
    script.replies = [(429, {"error": "slow down"}, {"Retry-After": "1"}), chat("yes")]
    n = len(script.requests)
    assert judge_at(url, retries=1).yesno("q") is True  # backoff 0.01 s, but the reply asked for 1 s
    assert script.requests[n + 1]["at"] - script.requests[n]["at"] >= 1.0


def test_an_echoed_authorization_header_is_redacted_at_the_source(endpoint, caplog, monkeypatch):
    """Whatever the judge endpoint echoes (its own key, another endpoint's registered key, any
    Bearer credential), the judge's errors and logs hold none of it."""
    other = "sk-policy-key-never-shown-77"
    monkeypatch.setenv("TBT_POLICY_API_KEY", other)
    redact.register_environment()
    url, script = endpoint
    echo = f"you sent Authorization: Bearer {KEY}; also {other} and Bearer zz-98765432abc"
    script.replies = [(200, f"<html>{echo}</html>"), (503, echo), (401, {"error": echo})]
    with caplog.at_level(logging.DEBUG), pytest.raises(JudgeUnavailable, match="HTTP 401") as e:
        judge_at(url, retries=2).yesno("q")
    for secret in (KEY, other, "zz-98765432abc"):
        assert secret not in str(e.value) and secret not in caplog.text
    assert "[redacted]" in str(e.value)


def test_client_error_is_unavailable_without_retry(endpoint):
    url, script = endpoint
    script.replies = [(401, {"error": "bad key"})]
    with pytest.raises(JudgeUnavailable, match="HTTP 401"):
        judge_at(url).text_yesno("t", "q")
    assert len(script.requests) == 1


def test_connection_refused_is_unavailable_and_key_never_shown(caplog):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    j = judge_at(f"http://127.0.0.1:{port}/v1", retries=1)
    with caplog.at_level(logging.DEBUG), pytest.raises(JudgeUnavailable) as e:
        j.text_yesno("t", "q")
    assert KEY not in str(e.value) and KEY not in repr(j) and KEY not in repr(j.config) and KEY not in caplog.text


def test_the_judge_request_is_configurable_from_its_spec(endpoint):
    from trainer.rollout.setup import make_judge

    url, script = endpoint
    judge, ident = make_judge(f"openai:{url}#judge-m,temperature=0.3,max_tokens=64,seed=7,retries=0",
                              synthetic_policy=False, env={})
    script.replies = [chat("No")]
    assert judge.yesno("Is it?") is False
    body = script.requests[-1]["body"]
    assert (body["model"], body["temperature"], body["seed"], body["max_completion_tokens"]) == ("judge-m", 0.3, 7, 64)
    assert ident == {"kind": "openai", "url": url, "model": "judge-m", "temperature": 0.3, "max_tokens": 64, "seed": 7}
    judge, ident = make_judge(f"openai:{url}#judge-m,seed=none", synthetic_policy=False, env={})
    script.replies = [chat("Yes")]
    assert judge.yesno("Is it?") is True and "seed" not in script.requests[-1]["body"] and ident["seed"] is None
    with pytest.raises(SpecError, match="option seed='x'"):
        make_judge(f"openai:{url}#m,seed=x", synthetic_policy=False, env={})


def test_from_env():
    assert JudgeConfig.from_env({}) is None
    cfg = JudgeConfig.from_env({"TBT_JUDGE_URL": "http://h/v1", "TBT_JUDGE_MODEL": "m", "TBT_JUDGE_API_KEY": KEY})
    assert (cfg.url, cfg.model, cfg.api_key) == ("http://h/v1", "m", KEY) and KEY not in repr(cfg)


def test_grader_with_a_down_judge_is_a_system_error(endpoint):
    from pathlib import Path

    from trainer.env.taskformat.tasks import load_dataset
    url, script = endpoint
    script.replies = [(502, "bad gateway")] * 2
    task = load_dataset(Path(__file__).parent / "fixtures/datasets/grading").tasks["grading_cases.py:test_asks_judge"]
    v = grade(task, TestContext(response="hi"), judge_at(url, retries=1))
    assert not v.passed and v.reward == 0.0 and v.system_error.startswith("JudgeUnavailable")
    script.replies = [chat("Yes")]
    v = grade(task, TestContext(response="thanks!"), judge_at(url, retries=0), isolate=True)
    assert v.passed and v.judge_calls == [{"question": "Is the reply polite?", "answer": True}]


# ---------------------------------------------------------------------------- every method of the API

def sent(script, i=-1):
    """The messages of request `i` as (role, content) pairs."""
    return [(m["role"], m["content"]) for m in script.requests[i]["body"]["messages"]]


def test_every_method_asks_the_endpoint(endpoint):
    url, script = endpoint
    j = judge_at(url)

    script.replies = [chat("Yes.")]
    assert j.text_yesno("a <b> c", "Is b bold?") is True
    (_, system), (_, user) = sent(script)
    # as the framework's judge: the text between <message> tags (tag-encoded), then the question
    assert "<message>" in system and user == "<message>\na &lt;b&gt; c\n</message>\nIs b bold?"
    # and its request: temperature 0, seed 42, 128 completion tokens
    body = script.requests[-1]["body"]
    assert {k: body[k] for k in ("temperature", "seed", "max_completion_tokens")} == \
        {"temperature": 0.0, "seed": 42, "max_completion_tokens": 128}
    assert "max_tokens" not in body

    script.replies = [chat("yes")]
    assert j.evaluate_bool("MY SYSTEM <x>", "MY USER <y>") is True  # the test's prompts, sent as they are
    assert sent(script) == [("system", "MY SYSTEM <x>"), ("user", "MY USER <y>")]

    script.replies = [chat("Yes")]
    assert j.yesno("Is <2> even?") is True
    assert sent(script)[1] == ("user", "Is <2> even?")  # a bare question: nothing around it, not encoded

    script.replies = [chat("yes")]
    assert j.compare_yesno("one <1>", "two", "Same meaning?") is True
    user = sent(script)[1][1]
    assert "<first>\none &lt;1&gt;\n</first>" in user and "<second>\ntwo\n</second>" in user
    assert user.endswith("Same meaning?")

    script.replies = [chat("No."), chat("no")]
    n = len(script.requests)
    assert j.no_repeat("fresh", ["old a", "old b"]) is True  # one comparison per earlier text
    assert len(script.requests) == n + 2 and "<second>\nold b\n</second>" in sent(script)[1][1]
    assert j.no_repeat("fresh", []) is True and len(script.requests) == n + 2  # nothing to repeat: no question
    script.replies = [chat("Yes")]
    assert j.no_repeat("old a", ["old a", "never asked"]) is False and len(script.requests) == n + 3

    script.replies = [chat('{"motivation": "It names the note.", "answer": "Yes"}')]
    assert j.text_yesno_with_motivation("buy milk", "Named?") == {"answer": True, "motivation": "It names the note."}
    assert "JSON" in sent(script)[0][1] and sent(script)[1][1] == "<message>\nbuy milk\n</message>\nNamed?"
    assert j.drain_decisions() == [{"question": "Named?", "answer": True, "motivation": "It names the note."}]
    assert j.drain_decisions() == []

    script.replies = [chat(" 7\n"), chat("ok")]
    out = j._get_text_completion(messages=[Text(role="system", content="S"), Text(role="user", content="U")])
    assert isinstance(out, Text) and (out.role, out.content) == ("assistant", " 7\n")
    assert sent(script) == [("system", "S"), ("user", "U")]
    assert j._get_text_completion([{"role": "user", "content": "plain dict"}]).content == "ok"


@pytest.mark.parametrize("reply", [chat("maybe"), chat("It is hard to say from this text alone"), chat("[]"),
                                   chat("No — it never said yes"), chat("Yes, but no")])
def test_every_method_is_ambiguous_on_an_unreadable_answer_twice(endpoint, reply):
    """Asked again with the stricter instruction, still unreadable: `JudgeAmbiguous`, whichever
    way the test would read the bool (the grader makes it a failed check)."""
    url, script = endpoint
    j = judge_at(url)
    script.replies = [reply] * 13
    for method in ("text_yesno", "evaluate_bool", "yesno", "compare_yesno", "no_repeat", "text_yesno_with_motivation"):
        n = len(script.requests)
        with pytest.raises(JudgeAmbiguous, match="asked twice"):
            CALLS[method](j)
        assert len(script.requests) == n + 2
    assert j._get_text_completion([Text("user", "u")]).content == reply[1]["choices"][0]["message"]["content"]


def test_an_ambiguous_answer_fails_the_check_never_a_system_error(endpoint):
    """A judge answering "No — it never said yes" twice: the judged task fails (scored 0, the raw
    replies recorded); "Yes" passes; the same in an isolated child."""
    url, script = endpoint
    task = load_dataset(Path(__file__).parent / "fixtures/datasets/grading").tasks["grading_cases.py:test_asks_judge"]
    for isolate in (False, True):
        script.replies = [chat("No — it never said yes")] * 2
        v = grade(task, TestContext(response="thanks!"), judge_at(url, retries=0), isolate=isolate)
        assert (v.passed, v.reward, v.system_error) == (False, 0.0, None), v
        assert v.explanation.startswith("judge answer ambiguous")
        assert v.judge_calls == [{"question": "Is the reply polite?", "answer": None,
                                  "ambiguous": ["No — it never said yes"] * 2}]
        script.replies = [chat("Yes, polite."), chat("Yes")]
        v = grade(task, TestContext(response="thanks!"), judge_at(url, retries=0), isolate=isolate)
        assert v.passed and v.judge_calls == [{"question": "Is the reply polite?", "answer": True}]


def test_a_test_that_swallows_the_ambiguity_still_fails():
    class Hedging(Judge):
        def _get_text_completion(self, messages):
            return Text(role="assistant", content="Yes, but no")

    def check(ctx, judge):
        try:
            judge.yesno("Did it?")
        except Exception:
            pass  # a test that catches everything must not turn a confused judge into a pass

    from types import SimpleNamespace

    task = SimpleNamespace(scenario=SimpleNamespace(fixtures={}), file="swallow.py", test_function=lambda: check)
    v = grade(task, TestContext(response="x"), Hedging())
    assert not v.passed and v.system_error is None and v.explanation.startswith("judge answer ambiguous")


@pytest.mark.parametrize("method", ["text_yesno", "evaluate_bool", "yesno", "compare_yesno", "no_repeat",
                                    "text_yesno_with_motivation", "_get_text_completion"])
def test_every_method_is_unavailable_on_empty_replies(endpoint, method):
    url, script = endpoint
    script.replies = [chat("")] * 2
    with pytest.raises(JudgeUnavailable, match="judge returned empty replies after 2 attempts"):
        CALLS[method](judge_at(url, retries=1))
    assert len(script.requests) == 2


CALLS = {
    "text_yesno": lambda j: j.text_yesno("t", "q"),
    "evaluate_bool": lambda j: j.evaluate_bool("s", "u"),
    "yesno": lambda j: j.yesno("q"),
    "compare_yesno": lambda j: j.compare_yesno("a", "b", "q"),
    "no_repeat": lambda j: j.no_repeat("a", ["b"]),
    "text_yesno_with_motivation": lambda j: j.text_yesno_with_motivation("t", "q"),
    "_get_text_completion": lambda j: j._get_text_completion([Text("user", "u")]),
}


@pytest.mark.parametrize("method", CALLS)
def test_every_method_is_unavailable_when_the_endpoint_is_down_and_never_shows_the_key(endpoint, caplog, method):
    url, script = endpoint
    script.replies = [(503, f"busy, key {KEY}")] * 2
    with caplog.at_level(logging.DEBUG), pytest.raises(JudgeUnavailable, match="after 2 attempts") as e:
        CALLS[method](judge_at(url, retries=1))
    assert KEY not in str(e.value) and KEY not in caplog.text
    with pytest.raises(JudgeUnavailable, match="no judge is configured"):
        CALLS[method](Judge())  # the base class has no model: a system error, never a pass


def test_an_error_body_echoing_the_key_is_redacted(endpoint):
    url, script = endpoint
    script.replies = [(401, {"error": f"invalid key {KEY}"})]
    with pytest.raises(JudgeUnavailable, match="HTTP 401") as e:
        judge_at(url).yesno("q")
    assert KEY not in str(e.value) and "[redacted]" in str(e.value)
    j = ChatJudge(JudgeConfig(url="http://user:hunter2@127.0.0.1:9/v1?key=hunter2", model="m", retries=0))
    with pytest.raises(JudgeUnavailable) as e:
        j.yesno("q")
    assert "hunter2" not in str(e.value) and "hunter2" not in repr(j)


# ---------------------------------------------------------------------------- the grader, on a fixture dataset

TBJUDGE = Path(__file__).parent / "fixtures" / "datasets" / "tbjudge"
CONFIRMED = "Saved your note \"buy milk\" with the label shopping."
QUESTIONS = ["Does this reply confirm that a note was saved? Reply: " + CONFIRMED,
             "Does the first message answer the request in the second?",
             "Is this reply polite?\n" + CONFIRMED,
             "no_repeat: does the first text repeat none of 1 others?"]


@pytest.fixture(scope="module")
def tbjudge():
    return load_dataset(TBJUDGE).tasks


def episode(reply: str = CONFIRMED) -> TestContext:
    seed = [{"id": 1, "text": "call mom"}]
    fx = {"notes": {"initial_db_state": {"notes": seed},
                    "result_db_state": {"notes": seed + [{"id": 2, "text": "buy milk"}]}}}
    return TestContext(response=reply, effects=fx, messages=[
        {"role": "user", "content": "Add a note \"buy milk\"."}, {"role": "assistant", "content": "Which label?"},
        {"role": "user", "content": "shopping"}, {"role": "assistant", "content": reply}])


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_a_dataset_file_calling_every_method_grades_against_the_judge(endpoint, tbjudge, isolate):
    url, script = endpoint
    j = judge_at(url, retries=0)
    script.replies = [chat("Yes"), chat("yes."), chat("Yes"), chat("No")]
    v = grade(tbjudge["tbjudge_calls.py:test_judged_confirmation"], episode(), j, isolate=isolate)
    assert (v.passed, v.system_error) == (True, None), v
    assert v.judge_calls == [{"question": q, "answer": a} for q, a in zip(QUESTIONS, [True, True, True, True])]
    assert sent(script, -4)[1] == ("user", QUESTIONS[0]) and "Which label?" in sent(script)[1][1]

    script.replies = [chat("Yes"), chat("Yes"), chat("Yes"), chat("Yes, it repeats"), chat("Yes")]
    v = grade(tbjudge["tbjudge_calls.py:test_judged_confirmation"], episode(), j, isolate=isolate)
    assert (v.passed, v.system_error, v.explanation) == (False, None, "repeats an earlier reply")

    motivated = chat('{"motivation": "It names buy milk.", "answer": "Yes"}')
    script.replies = [motivated, chat("4")]
    v = grade(tbjudge["tbjudge_calls.py:test_scored_reply"], episode(), j, isolate=isolate)
    assert (v.passed, v.reward, v.system_error) == (True, 1.0, None), v
    assert v.judge_calls[0] == {"question": "Did the assistant name the note it added?", "answer": True,
                                "motivation": "It names buy milk."}
    assert v.judge_calls[1]["answer"] == "4" and "names the note's label" in v.judge_calls[1]["question"]
    script.replies = [motivated, chat("two")]  # an unreadable score is the file's 0
    v = grade(tbjudge["tbjudge_calls.py:test_scored_reply"], episode(), j, isolate=isolate)
    assert (v.passed, v.reward, v.system_error) == (False, 0.0, None)
    script.replies = [chat("not json")] * 2  # unreadable, and again when asked more strictly: a failed check
    v = grade(tbjudge["tbjudge_calls.py:test_scored_reply"], episode(), j, isolate=isolate)
    assert (v.passed, v.system_error) == (False, None) and v.explanation.startswith("judge answer ambiguous")
    assert j.drain_decisions() == []  # the decisions were the grading's, not the shared judge's

    script.replies = [chat("Yes"), (500, "down")]
    v = grade(tbjudge["tbjudge_calls.py:test_judged_confirmation"], episode(), j, isolate=isolate)
    assert v.system_error.startswith("JudgeUnavailable")
    assert v.judge_calls == [{"question": QUESTIONS[0], "answer": True}]  # asked before the judge went down


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_replay_records_every_method_as_not_evaluated(tbjudge, isolate):
    v = grade(tbjudge["tbjudge_calls.py:test_judged_confirmation"], episode(""), ReplayJudge(), isolate=isolate)
    assert (v.passed, v.system_error) == (True, None), v
    assert [c["answer"] for c in v.judge_calls] == [None] * 4
    assert [c["question"] for c in v.judge_calls] == [QUESTIONS[0].removesuffix(CONFIRMED), QUESTIONS[1],
                                                      "Is this reply polite?\n", QUESTIONS[3].replace("1", "0")]
    # a free-form completion has no yes to stand in for it: recorded, then a system error
    v = grade(tbjudge["tbjudge_calls.py:test_scored_reply"], episode(""), ReplayJudge(), isolate=isolate)
    assert v.system_error.startswith("JudgeUnavailable: golden replay asks no judge"), v
    assert [c["answer"] for c in v.judge_calls] == [None, None]


def test_validate_golden_counts_every_method_as_not_evaluated(tmp_path):
    listed = tmp_path / "list.yaml"
    listed.write_text("- tbjudge_calls.py:test_judged_confirmation\n- tbjudge_calls.py:test_scored_reply\n")
    r = CliRunner().invoke(app, ["validate-golden", str(TBJUDGE), "--test-list", str(listed), "--json"])
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["tasks"], s["passed"], s["system_errors"], s["judge_not_evaluated"]) == (2, 1, 1, 6), s
    [failure] = s["failures"]
    assert failure["uid"] == "tbjudge_calls.py:test_scored_reply" and "free-form" in failure["explanation"]


def test_the_pipe_answers_judge_questions_only():
    class Scripted(Judge):
        def yesno(self, question):
            return question == "ok?"

    def ask(method, *args):
        return json.loads(answer_for_child(Scripted(), {"method": method, "args": list(args)}))

    assert ask("yesno", "ok?") == {"answer": True}
    assert ask("__init__")["error"].startswith("ValueError: not a judge question")  # the child is untrusted
    assert ask("drain_decisions")["error"].startswith("ValueError")
    assert ask("text_yesno", "t", "q")["error"].startswith("JudgeUnavailable")
    assert ask("yesno")["error"].startswith("TypeError")
