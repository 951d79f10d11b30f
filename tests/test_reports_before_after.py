"""The reports of a real comparison, frozen before the r3.2 refactor, must render the same after it.

tests/fixtures/before_r3_2/ holds what the code of commit 7445941 wrote for a real ``compress compare`` on a tiny
teacher (4 layers of 312, the tiny CSV with copies=4, test_compare.py's FAST flags): comparison.json and
comparison.md, and each run's metrics.json, config.json and report.md (no weights, no plots). Reports are rendered
from these records alone, so rendering the frozen records with today's code must give the frozen reports back
byte for byte. Comparing section by section makes a failure name the section that changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import run_cli

from compress.reports.records import read_run_record
from compress.reports.run_record import write_report

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "before_r3_2"
RUN_FILES = ("metrics.json", "config.json", "report.md")
RUNS = sorted(p.name for p in (FIXTURE / "runs").iterdir() if p.is_dir())


def sections(text: str, prefix: str) -> list[tuple[str, str]]:
    """``text`` cut before every line starting with ``prefix``: (heading line, the section's text) pairs, in
    order; what precedes the first heading is the section ``(before any heading)``. A list, not a dict, so
    that a heading that occurs twice, or headings that moved, show up as a difference."""
    found: list[tuple[str, list[str]]] = [("(before any heading)", [])]
    for line in text.split("\n"):
        if line.startswith(prefix):
            found.append((line, []))
        found[-1][1].append(line)
    return [(heading, "\n".join(lines)) for heading, lines in found]


def assert_same_sections(actual: str, expected: str, prefix: str, what: str) -> None:
    """The same headings in the same order, then each section equal, the failing one named."""
    got, want = sections(actual, prefix), sections(expected, prefix)
    assert [h for h, _ in got] == [h for h, _ in want], f"{what}: the headings differ"
    for (heading, body), (_, frozen) in zip(got, want, strict=True):
        assert body == frozen, f"{what}: section {heading!r} differs"
    assert actual == expected, f"{what}: equal section by section, yet the files differ"  # e.g. a final newline


def test_the_fixture_holds_every_run_of_its_comparison():
    """Every row of the frozen comparison has its run directory with the three records, so the parametrized
    test below cannot silently cover fewer runs than the comparison has."""
    comparison = json.loads((FIXTURE / "comparison.json").read_text(encoding="utf-8"))
    assert sorted(m["method"] for m in comparison["methods"]) == RUNS
    for run in RUNS:
        assert sorted(p.name for p in (FIXTURE / "runs" / run).iterdir()) == sorted(RUN_FILES), run


def test_compress_report_renders_the_frozen_comparison_md(tmp_path):
    directory = tmp_path / "comparison"
    directory.mkdir()
    shutil.copy(FIXTURE / "comparison.json", directory / "comparison.json")
    done = run_cli("report", str(directory))
    assert done.returncode == 0, done.stderr
    assert_same_sections((directory / "comparison.md").read_text(encoding="utf-8"),
                         (FIXTURE / "comparison.md").read_text(encoding="utf-8"), "#", "comparison.md")
    page = (directory / "comparison.html").read_text(encoding="utf-8")
    assert "<table" in page and page.rstrip().endswith("</html>")


@pytest.mark.parametrize("run", RUNS)
def test_write_report_renders_the_frozen_report_md(run, tmp_path):
    frozen = FIXTURE / "runs" / run
    record = read_run_record(frozen)
    config = json.loads((frozen / "config.json").read_text(encoding="utf-8"))
    path = tmp_path / "report.md"
    write_report(path, record, config)
    assert_same_sections(path.read_text(encoding="utf-8"), (frozen / "report.md").read_text(encoding="utf-8"),
                         "## ", f"{run}/report.md")
