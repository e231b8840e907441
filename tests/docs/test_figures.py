"""Every figure of README.md and docs/**/*.md comes from a committed bench result (the convention:
tests/docs/figures.py and docs/benchmarks.md), and the generated tables are what the results give.

tests/docs/unsourced_figures.txt lists the figures written before the convention whose source is not yet
committed or does not hold them (page and figure, one a line): a figure added without a source fails here,
and so does a line of that list once its figure is gone or sourced (remove the line: the list only shrinks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import figures

KNOWN = Path(__file__).with_name("unsourced_figures.txt")


def known() -> set[tuple[str, str]]:
    lines = [line for line in KNOWN.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return {tuple(line.split(": ", 1)) for line in lines}


def test_every_figure_has_a_source_that_holds_it():
    found = figures.unsourced()
    new = [f"{unit.page}:{unit.line}: {figure}: {why}" for unit, figure, why in found
           if (unit.page, figure) not in known()]
    assert not new, "figures without a committed source (name the bench/results file in the paragraph, or " \
                    "<!-- figures: FILE -->):\n" + "\n".join(new)
    stale = known() - {(unit.page, figure) for unit, figure, _ in found}
    assert not stale, f"sourced or removed since: delete from {KNOWN.name}: {sorted(stale)}"


def test_the_convention_catches_what_it_should(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("Fast: 2.5x the floor.\n\nFrom `bench/results/text.txt`: 1.07x HashingVectorizer.\n\n"
                    "From `bench/results/text.txt`: 9.99x HashingVectorizer.\n\n| a | 1.64x | `text.txt` |\n")
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    (results / "text.txt").write_text("featurehash  0.675  74022  0.93  1.07\ngcws  0.121  1.64  1.905\n")
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    monkeypatch.setattr(figures, "RESULTS", results)
    units = [unit for unit in figures.units(page) if unit.figures]
    assert [unit.sources for unit in units] == [[], ["text.txt"], ["text.txt"], ["text.txt"]]
    values = figures.file_numbers("text.txt")
    assert figures._matches("1.07", values) and figures._matches("1.64", values)
    assert figures._matches("1.9", values) and figures._matches("1.91", values) and not figures._matches("1.92", values)
    assert not figures._matches("9.99", values)
    assert figures._matches("74,000", values)   # 74022 docs/s, to the figure's precision
    assert [(unit.line, figure) for unit, figure, _ in figures.unsourced_in([page])] == [(1, "2.5x"), (5, "9.99x")]


def test_the_generated_tables_are_what_the_results_give():
    proc = subprocess.run([sys.executable, str(figures.ROOT / "bench" / "figures.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("page", ["README.md", "docs/methods/index.md"])
def test_the_which_map_table_is_generated_on_both_pages(page):
    text = (figures.ROOT / page).read_text(encoding="utf-8")
    assert text.count("<!-- figures-table: which-map -->") == 1 and text.count("<!-- /figures-table -->") == 1
