"""Print the commands of the README's start, one a line: the first ```bash block under its
'## Start' heading, without blank and comment lines. They are what a new user types, and what
.ci/run runs, in order, as written (tests/test_readme_start.py holds the two together).

    python scripts/readme_start.py [README.md]
"""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


class NoStart(ValueError):
    """The README has no start block (the message names the file and what is missing)."""


def start_commands(readme: Path = README) -> list[str]:
    lines = readme.read_text(encoding="utf-8").splitlines()
    heading = next((i for i, s in enumerate(lines) if s.startswith("## Start")), None)
    if heading is None:
        raise NoStart(f"{readme}: no '## Start' heading")
    fence = next((i for i in range(heading + 1, len(lines)) if lines[i].strip() == "```bash"
                  or lines[i].startswith("## ")), None)
    if fence is None or lines[fence].startswith("## "):
        raise NoStart(f"{readme}:{heading + 1}: the start section has no ```bash block")
    end = next((i for i in range(fence + 1, len(lines)) if lines[i].strip() == "```"), None)
    if end is None:
        raise NoStart(f"{readme}:{fence + 1}: the ```bash block is not closed")
    cmds = [s.strip() for s in lines[fence + 1:end] if s.strip() and not s.strip().startswith("#")]
    if not cmds:
        raise NoStart(f"{readme}:{fence + 1}: the start block holds no command")
    return cmds


def main(argv: list[str]) -> int:
    try:
        cmds = start_commands(Path(argv[0]) if argv else README)
    except (NoStart, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(cmds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
