"""Griffe extension: featurehash's docstrings are plain text with formulas, so `<x, y>` is an inner product,
not an HTML tag. Escape `<` outside code spans and indented blocks before Markdown sees it."""

from __future__ import annotations

import re

import griffe

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _escape_line(line: str) -> str:
    out, last = [], 0
    for match in _CODE_SPAN.finditer(line):
        out.append(line[last:match.start()].replace("<", "&lt;"))
        out.append(match.group(0))
        last = match.end()
    out.append(line[last:].replace("<", "&lt;"))
    return "".join(out)


def escape(text: str) -> str:
    lines, in_block, previous_blank = [], False, True
    for line in text.splitlines():
        blank = not line.strip()
        indented = line.startswith("    ")
        in_block = (in_block and (indented or blank)) or (previous_blank and indented)
        lines.append(line if in_block or "<" not in line else _escape_line(line))
        previous_blank = blank
    return "\n".join(lines)


class PlainDocstrings(griffe.Extension):
    def on_instance(self, *, node, obj, agent, **kwargs) -> None:
        if obj.docstring is not None and "<" in obj.docstring.value:
            obj.docstring.value = escape(obj.docstring.value)
