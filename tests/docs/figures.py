"""Figures in README.md and docs/**/*.md and the committed bench results they come from.

The convention (docs/benchmarks.md, "Where a figure comes from"):
- a *figure* is a measured ratio written with an x: `0.90x`, `1.4-5.1x`, `15-27x`;
- its *unit* is the table row it is in, else the paragraph or list item (lines up to a blank line);
- the unit names its source: a result file under bench/results/ (written `bench/results/text.txt`, linked as
  `../benchmarks/results/text.txt`, or named `text.txt` in a table's source column), or a marker comment
  `<!-- figures: text.txt, dense_maps.txt -->` when the text names none;
- every number of the figure appears in one of its unit's sources, to the figure's precision (a file's 1.905
  gives 1.9x or 1.91x; 19517 gives 19,500).
Ratios that are arithmetic rather than measurement (2x the memory, D = 4d) are written without the x
(`twice`, `4d`), or carry `<!-- figures: none (why) -->`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
FIGURE = re.compile(r"(?<![\w.^/=-])(\d[\d,]*(?:\.\d+)?)(?:\s*[-–]\s*(\d[\d,]*(?:\.\d+)?))?x(?![\w])")
SOURCE = re.compile(r"(?:bench/results/|results/|`)([\w.-]+\.txt)")
MARKER = re.compile(r"<!--\s*figures:\s*(.*?)\s*-->")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
FENCE = re.compile(r"^\s*```")


@dataclass(frozen=True)
class Unit:
    page: str
    line: int
    text: str

    @property
    def figures(self) -> list[str]:
        return [m.group(0) for m in FIGURE.finditer(_without_code(self.text))]

    @property
    def sources(self) -> list[str]:
        found = [name for name in SOURCE.findall(self.text) if (RESULTS / name).exists()]
        for marker in MARKER.findall(self.text):
            found += [name.strip() for name in marker.split(",") if (RESULTS / name.strip()).exists()]
        return found

    @property
    def exempt(self) -> bool:
        return any(marker.startswith("none") for marker in MARKER.findall(self.text))


def _without_code(text: str) -> str:
    """Inline code (`D = 4x`, shapes, options) holds no figures."""
    return re.sub(r"`[^`]*`", "", re.sub(r"<!--.*?-->", "", text))


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def units(page: Path) -> list[Unit]:
    """Table rows, and paragraphs / list items, outside fenced code."""
    found: list[Unit] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    relative = str(page.relative_to(ROOT))
    in_fence, paragraph, start = False, [], 0

    def flush() -> None:
        if paragraph:
            found.append(Unit(relative, start + 1, "\n".join(paragraph)))
            paragraph.clear()

    for number, line in enumerate(lines):
        if FENCE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        stripped = line.strip()
        if stripped.startswith("|"):
            flush()
            found.append(Unit(relative, number + 1, line))
        elif not stripped or re.match(r"^([-*] |\d+\. |#)", stripped):
            flush()
            if stripped:
                paragraph.append(line)
                start = number
        else:
            if not paragraph:
                start = number
            paragraph.append(line)
    flush()
    return found


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _matches(figure: str, values: list[float]) -> bool:
    """Whether a file's numbers hold `figure` at its precision (trailing zeros of an integer are rounding)."""
    plain = figure.replace(",", "")
    target = float(plain)
    if "." in plain:
        half = 0.5 * 10 ** -_decimals(plain)
    else:
        zeros = len(plain) - len(plain.rstrip("0")) if plain != "0" else 0
        half = 0.5 * 10 ** zeros if zeros else 0.5
    return any(abs(value - target) <= half + 1e-12 for value in values)


def file_numbers(name: str) -> list[float]:
    return [float(token) for token in NUMBER.findall((RESULTS / name).read_text(encoding="utf-8", errors="replace"))]


def problems() -> list[str]:
    """Every figure without a source, or whose numbers its sources do not hold (`page:line: ...`)."""
    return [f"{unit.page}:{unit.line}: {figure}: {why}" for unit, figure, why in unsourced()]


def unsourced() -> list[tuple[Unit, str, str]]:
    """(unit, figure, why) of every figure without a source, or whose numbers its sources do not hold."""
    return unsourced_in(pages())


def unsourced_in(where: list[Path]) -> list[tuple[Unit, str, str]]:
    found = []
    cache: dict[str, list[float]] = {}
    for page in where:
        for unit in units(page):
            if not unit.figures or unit.exempt:
                continue
            sources = unit.sources
            if not sources:
                found += [(unit, figure, "its paragraph names no bench/results file") for figure in unit.figures]
                continue
            values = [value for name in sources for value in cache.setdefault(name, file_numbers(name))]
            for match in FIGURE.finditer(_without_code(unit.text)):
                for number in filter(None, match.groups()):
                    if not _matches(number, values):
                        found.append((unit, match.group(0), f"{number} is not in {', '.join(sources)}"))
                        break
    return found


if __name__ == "__main__":
    # The lines of unsourced_figures.txt for what is unsourced now (to shrink the list after sourcing figures).
    for unit, figure, why in unsourced():
        print(f"{unit.page}: {figure}")
