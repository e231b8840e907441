"""The code blocks of README.md and docs/**/*.md, as a reader copies them.

A block is a fenced block with a language: python, bash (curl and the command line) or json (a file's
content, e.g. a keys file). `blocks()` lists them with their page and line; `needs_service(block)` says
whether it talks to the service at localhost:8000. Run by tests/docs/test_doc_blocks.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.M | re.S)
RUNNABLE = ("python", "bash", "json")
SERVICE = re.compile(r"(?:localhost|127\.0\.0\.1):8000")


@dataclass(frozen=True)
class Block:
    page: str   # relative to the repository root
    line: int   # of the opening fence
    lang: str
    code: str

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.code.splitlines() if line.strip()), "")

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> list[Block]:
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            indent = match.group("indent")
            body = "".join(line[len(indent):] if line.startswith(indent) else line
                           for line in match.group("body").splitlines(keepends=True))
            found.append(Block(str(page.relative_to(ROOT)), text.count("\n", 0, match.start()) + 1,
                               match.group("lang").lower(), body))
    return found


def needs_service(block: Block) -> bool:
    return bool(SERVICE.search(block.code))
