"""`--help` text wrapped between tokens, never inside one: the CLI's click help formatter.

click's plain formatter (typer's vendored click: what typer prints with `rich_markup_mode=None`) wraps with
`break_long_words=True` and `break_on_hyphens=True`, so a spec like
`synthetic[:p=0.7,dist=uniform|bimodal|...]` was cut as "bi / modal", `openai:URL#MODEL` as
"opena / i:URL" and `--errors-output` as "--errors- / output". Here a line breaks only at
whitespace or after a `,` or `|` inside a long token (the separators of a spec's options and
choices); a piece longer than the line stays whole and runs past it. Paragraphs and click's `\\b`
(no rewrap) blocks are kept as click keeps them.

`install()` makes every typer command and group of the process format its help with
`HelpFormatter` (their `context_class`); `trainer/cli.py` calls it once (this module is CLI-layer code: typer and click).
"""

from __future__ import annotations

import re
import textwrap
from typing import Iterable

import typer
import typer.core


class _Wrapper(textwrap.TextWrapper):
    # chunks: runs of whitespace, or a token cut after each `,` / `|` it holds (never elsewhere)
    wordsep_re = re.compile(r"(\s+)|(?<=[,|])(?=[^\s,|])")

    def __init__(self, width: int, **kw) -> None:
        super().__init__(width, break_long_words=False, break_on_hyphens=True, replace_whitespace=False, **kw)


def wrap_text(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """click's `wrap_text(..., preserve_paragraphs=True)` with breaks between tokens only."""
    text = text.expandtabs()
    paragraphs: list[tuple[int, bool, str]] = []
    buf: list[str] = []
    indent: int | None = None

    def flush() -> None:
        if buf:
            if buf[0].strip() == "\b":
                paragraphs.append((indent or 0, True, "\n".join(buf[1:])))
            else:
                paragraphs.append((indent or 0, False, " ".join(buf)))
            buf.clear()

    for line in text.splitlines():
        if not line:
            flush()
            indent = None
            continue
        if indent is None:
            stripped = line.lstrip()
            indent, line = len(line) - len(stripped), stripped
        buf.append(line)
    flush()
    out = []
    for extra, raw, body in paragraphs:
        first, rest = initial_indent + " " * extra, subsequent_indent + " " * extra
        if raw:
            out.append("\n".join((first if i == 0 else rest) + x for i, x in enumerate(body.splitlines())))
        else:
            out.append(_Wrapper(width, initial_indent=first, subsequent_indent=rest).fill(body))
    return "\n\n".join(out)


class HelpFormatter(typer.Context.formatter_class):  # typer's own (vendored) click formatter
    """click's formatter, its text and definition lists wrapped by `wrap_text`."""

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(wrap_text(text, self.width, initial_indent=indent, subsequent_indent=indent))
        self.write("\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        if any(len(r) != 2 for r in rows):
            raise TypeError("Expected two columns for definition list")
        first_col = min(max((len(a) for a, _ in rows), default=0), col_max) + col_spacing
        pad = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + pad)
            lines = wrap_text(second, max(self.width - first_col - 2, 10)).splitlines() or [""]
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write((pad + line if line else "") + "\n")


class HelpContext(typer.Context):
    formatter_class = HelpFormatter


def install() -> None:
    """Every typer command and group formats its help with `HelpFormatter`."""
    typer.core.TyperCommand.context_class = HelpContext
    typer.core.TyperGroup.context_class = HelpContext


__all__ = ["HelpFormatter", "install", "wrap_text"]
