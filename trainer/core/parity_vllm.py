"""Run the locked vLLM's own reasoning and tool parsers on recorded outputs (the reference side of
`tbt parity --against vllm`).

This file runs with the Python of the vLLM environment (scripts/setup_vllm_parsers_env.sh), never
inside the project: it imports nothing from `trainer`, and nothing in `trainer` imports it.
stdin: one JSON object per line ``{"id", "family", "tools", "text", "thinking", "tool_choice"}``;
argv[1]: tokenizer folder. stdout: one line per record
``{"id", "reasoning", "tool_calls": [{"name", "arguments"}]}`` or ``{"id", "error"}``: what
`parity.compare_vllm` compares. vLLM's content is not reported: it keeps only the text before the
first call, so it differs from ours on cases that agree otherwise.
Parsers are used as vLLM's OpenAI server chains them: reasoning parser ``qwen3``, then the tool
parser (``hermes`` or ``qwen3_xml``) on the content.

``parity_vllm.py --check``: import and look up exactly what the run uses, print the vLLM version
(the smoke test of scripts/setup_vllm_parsers_env.sh).
"""

import json
import logging
import sys


def load() -> tuple:
    """Everything the run uses from vLLM and transformers: the request class, the tokenizer
    loader, the reasoning parser class and the tool parser class per family."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    from transformers import AutoTokenizer

    reasoning_cls = ReasoningParserManager.get_reasoning_parser("qwen3")
    tool_cls = {f: ToolParserManager.get_tool_parser(n) for f, n in (("hermes", "hermes"), ("xml", "qwen3_xml"))}
    return ChatCompletionRequest, AutoTokenizer, reasoning_cls, tool_cls


def main() -> None:
    logging.disable(logging.WARNING)
    ChatCompletionRequest, AutoTokenizer, reasoning_cls, tool_cls = load()
    if sys.argv[1:] == ["--check"]:
        import vllm
        print("vLLM parsers importable:", vllm.__version__)
        return
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], local_files_only=True)
    for line in sys.stdin:
        rec = json.loads(line)
        try:
            kwargs = {"enable_thinking": bool(rec.get("thinking", True))}
            tools = [t if "function" in t else {"type": "function", "function": t} for t in rec.get("tools") or []]
            request = ChatCompletionRequest(
                model="m", messages=[{"role": "user", "content": "x"}], tools=tools or None,
                tool_choice=rec.get("tool_choice", "auto") if tools else None, chat_template_kwargs=kwargs)
            reasoning, content = reasoning_cls(tokenizer, chat_template_kwargs=kwargs).extract_reasoning(
                rec["text"], request)
            calls = []
            if content is not None and rec.get("tool_choice", "auto") != "none":
                info = tool_cls[rec["family"]](tokenizer, request.tools).extract_tool_calls(content, request)
                if info.tools_called:
                    calls = [{"name": c.function.name, "arguments": json.loads(c.function.arguments)}
                             for c in info.tool_calls]
            out = {"id": rec["id"], "reasoning": reasoning, "tool_calls": calls}
        except Exception as e:  # reported per record; the gate counts it as a divergence
            out = {"id": rec.get("id"), "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
