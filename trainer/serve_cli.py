"""`tbt serve-proxy`: the OpenAI-compatible proxy in front of vLLM (trainer/serve/proxy.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def serve_proxy_command(
    upstream: Annotated[str, typer.Option("--upstream", help="The upstream API base URL (vLLM serving the checkpoint).")] = "http://127.0.0.1:8001/v1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8014,
    host: Annotated[str, typer.Option("--host", help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    family: Annotated[str, typer.Option("--family", help="Model family: hermes (Qwen3) or xml (Qwen3-Coder, Qwen3.5+).")] = "hermes",
    model: Annotated[Optional[str], typer.Option("--model", help="Upstream model name (default: the request's).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds an upstream completion may take.")] = 600.0,
    record: Annotated[Optional[Path], typer.Option("--record", help="Also append every completion to this JSONL as a parity record (for tbt parity).")] = None,
) -> None:
    """Serve /v1/chat/completions that renders and reads the model with tb_interpret (as training does).

    Leading system messages are merged ("sysmerge"), the prompt is rendered for the family and sent
    to the upstream's /v1/completions; the text is parsed by tb_interpret into reasoning_content,
    content and typed tool_calls. GET /readyz answers 200 only while the upstream does.

    With --record FILE every completion is appended to FILE as a parity record (the raw text,
    the upstream's token ids, the tools): `tbt parity FILE --against vllm` then checks that
    training, evaluation and vLLM's own parsers read what the model really wrote identically.

    \b
    Examples:
      tbt serve-proxy --upstream http://127.0.0.1:8001/v1 --port 8014
      tbt serve-proxy --upstream http://127.0.0.1:8001/v1 --port 8015 --record proxy-parity.jsonl
    """
    import uvicorn

    from trainer.core.tb_interpret import FAMILIES
    from trainer.serve.proxy import ProxyConfig, build_app

    if family not in FAMILIES:
        typer.echo(f"error: --family {family!r}: expected {' or '.join(FAMILIES)}", err=True)
        raise typer.Exit(2)
    if record is not None and record.is_dir():
        typer.echo(f"error: --record {record}: is a directory", err=True)
        raise typer.Exit(2)
    app = build_app(ProxyConfig(upstream=upstream, family=family, model=model, timeout_s=timeout,  # type: ignore[arg-type]
                                record=str(record) if record is not None else None))
    uvicorn.run(app, host=host, port=port, log_level="warning")
