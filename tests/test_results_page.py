"""docs/results.md and the README's results table are generated from the comparison files in docs/results/: made
again here and compared, so no number on them is typed by hand or stale."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from helpers import REPO, run_cli

from compress.reports.comparison_markdown import render_brief

FIXTURE = REPO / "tests" / "fixtures" / "before_r3_2" / "comparison.json"


def test_docs_results_md_is_what_compress_results_gives():
    done = run_cli("results", "--check")
    assert done.returncode == 0, done.stderr
    assert sorted((REPO / "docs" / "results").glob("*.json")), "docs/results/ holds no comparison"


def test_the_readmes_results_table_is_rendered_from_the_file_it_names(monkeypatch):
    monkeypatch.chdir(REPO)  # the README names the files relative to the repository
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"<!-- results: (\S+) -->\n(.*?)<!-- /results -->", readme, flags=re.S)
    assert blocks, "the README shows no generated results table"
    for name, shown in blocks:
        expected = render_brief(Path(name))
        assert "97% of the teacher beyond the interval" in shown and "On the front, fastest first:" in shown
        assert shown == expected, f"README.md's table from {name} is stale; replace it with:\n{expected}"


def test_results_writes_the_page_checks_it_and_refuses_a_page_it_did_not_write(tmp_path: Path):
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "tiny.json")
    page = tmp_path / "results.md"
    assert run_cli("results", str(folder), "--out", str(page), "--check").returncode == 1   # no page yet
    assert not page.exists()
    written = run_cli("results", str(folder), "--out", str(page))
    assert written.returncode == 0, written.stderr
    text = page.read_text()
    # the table's provenance: the comparison's CPU (with its units), its date and the file it was rendered from
    assert "Intel(R) Xeon(R) Processor, 2 CPUs (avx2" in text and "amx_int8" in text.replace("\\", "")
    assert "2026-11-25T07:48:30+00:00" in text and f"rendered from `{folder.as_posix()}/tiny.json`" in text
    assert "| **distilbert+prune+int8 on onnxruntime** | 10.4 | 10.5 |" in text
    assert run_cli("results", str(folder), "--out", str(page), "--check").returncode == 0
    page.write_text("# My own notes\n")
    done = run_cli("results", str(folder), "--out", str(page))
    assert done.returncode == 2 and "was not written by `compress results`" in done.stderr
    assert page.read_text() == "# My own notes\n"
