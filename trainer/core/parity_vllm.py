"""Run the locked vLLM's own reasoning and tool parsers on recorded outputs (the reference side of
`tbt parity --against vllm`).

This file runs in a process of its own, with a Python where vLLM is installed (the project's with
the `cpu` extra, `uv sync --extra cpu`, or another environment's: TBT_VLLM_PYTHON): it imports
nothing from `trainer`, and nothing in `trainer` imports it.
stdin: one JSON object per line ``{"id", "family", "tools", "text", "thinking", "tool_choice"}``;
argv[1]: tokenizer folder. stdout: one line per record
``{"id", "reasoning", "content", "tool_calls": [{"name", "arguments"}]}`` or ``{"id", "error"}``.
``arguments`` is the JSON text vLLM would send to the client, verbatim: the comparing side decodes
it strictly, so a value that is not JSON (``NaN``) never counts as agreement.

The parser is built as vLLM's OpenAI server builds it for ``--reasoning-parser qwen3
--enable-auto-tool-choice --tool-call-parser hermes|qwen3_xml`` (`ParserManager.get_parser`, one
instance per request, ``chat_template_kwargs`` passed through) and run through the same
non-streaming entry point, ``Parser.parse``.

``parity_vllm.py --check``: import and look up exactly what the run uses, print the vLLM version
(a smoke test of an environment).
"""

import json
import logging
import sys

TOOL_PARSER = {"hermes": "hermes", "xml": "qwen3_xml"}


def load() -> tuple:
    """Everything the run uses from vLLM and transformers: the request class, the tokenizer
    loader and the composed parser class per family."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager

    from transformers import AutoTokenizer

    parsers = {f: ParserManager.get_parser(tool_parser_name=n, reasoning_parser_name="qwen3",
                                           enable_auto_tools=True)
               for f, n in TOOL_PARSER.items()}
    return ChatCompletionRequest, AutoTokenizer, parsers


def main() -> None:
    logging.disable(logging.WARNING)
    ChatCompletionRequest, AutoTokenizer, parsers = load()
    if sys.argv[1:] == ["--check"]:
        import vllm
        print("vLLM parsers importable:", vllm.__version__)
        return
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], local_files_only=True)
    # each parser engine reads the whole vocabulary when built (0.2 s a request here); the
    # vocabulary never changes, so it is read once: parsers are still built per request
    vocab = tokenizer.get_vocab()
    tokenizer.get_vocab = lambda: vocab
    for line in sys.stdin:
        rec = json.loads(line)
        try:
            kwargs = {"enable_thinking": bool(rec.get("thinking", True))}
            tools = [t if "function" in t else {"type": "function", "function": t} for t in rec.get("tools") or []]
            request = ChatCompletionRequest(
                model="m", messages=[{"role": "user", "content": "x"}], tools=tools or None,
                tool_choice=rec.get("tool_choice", "auto") if tools else None, chat_template_kwargs=kwargs)
            parser = parsers[rec["family"]](tokenizer, request.tools, chat_template_kwargs=kwargs)
            reasoning, content, calls = parser.parse(rec["text"], request, enable_auto_tools=True)
            out = {"id": rec["id"], "reasoning": reasoning, "content": content,
                   "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in calls or []]}
        except Exception as e:  # reported per record; the gate counts it as a disagreement
            out = {"id": rec.get("id"), "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
