"""The side-by-side comparison of methods: ``comparison.json`` rendered to markdown, HTML and PNGs.

comparison.json is a :class:`~compress.reports.records.Comparison` (schema version 3; version 1,
without pipelines, and 2, without seeds and intervals, are still rendered; :mod:`compress.reports.verdicts`
says what each may claim). A comparison may be edited by hand or come from an older compress, so it is not
read through that dataclass: :func:`~compress.reports.comparison_data.read_comparison` validates it and reads
what the report shows into the frozen dataclasses of :mod:`compress.reports.comparison_data`. The rows and
sentences both reports share are in :mod:`compress.reports.comparison_rows`, the markdown report in
:mod:`compress.reports.comparison_markdown`, the self-contained HTML page in
:mod:`compress.reports.comparison_html` and the plots in :mod:`compress.reports.plots`; this module writes them
all into a comparison's directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from compress.errors import CompressError
from compress.ownership import mark_comparison, read_marker
from compress.paths import atomic_write_bytes, atomic_write_text
from compress.reports.comparison_data import read_comparison
from compress.reports.comparison_html import render_html
from compress.reports.comparison_markdown import read_json, render_markdown
from compress.reports.plots import render_plots

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

__all__ = ["render_directory", "write_comparison"]


def write_comparison(comparison: JSONObject, directory: Path) -> list[Path]:
    """Validate, then write comparison.json, .md, .html and the PNG plots into ``directory``."""
    shown = read_comparison(comparison)
    directory = Path(directory)
    plots = render_plots(shown)  # render everything first: a failure writes nothing
    texts = {
        "comparison.json": json.dumps(comparison, indent=2, ensure_ascii=False) + "\n",
        "comparison.md": render_markdown(shown),
        "comparison.html": render_html(shown, plots),
    }
    names = [*texts, *(f"{stem}.png" for stem in plots)]
    marker = read_marker(directory)
    # A new or empty directory becomes ours; one holding a comparison of an older version (no marker) is
    # rendered into, but nothing in it is deleted.
    ours = (marker is not None and marker.kind == "comparison") or not directory.is_dir() or \
        not any(directory.iterdir())
    directory.mkdir(parents=True, exist_ok=True)
    if ours:  # listed before they are written, so the marker always covers what is there
        mark_comparison(directory, names)
    written = []
    for name, text in texts.items():
        atomic_write_text(directory / name, text)
        written.append(directory / name)
    for stem, png in plots.items():
        atomic_write_bytes(directory / f"{stem}.png", png)
        written.append(directory / f"{stem}.png")
    if ours:  # step plots of pipelines no longer compared, that an earlier comparison wrote here
        for stale in sorted(set(marker.entries if marker else ()) - set(names)):
            if re.fullmatch(r"steps-[a-z0-9_-]+\.png", stale):
                (directory / stale).unlink(missing_ok=True)
    return written


def render_directory(directory: Path) -> list[Path]:
    """Re-render everything from ``directory/comparison.json`` (``compress report DIR``)."""
    path = Path(directory) / "comparison.json"
    if not path.is_file():
        raise CompressError(f"There is no comparison.json in {directory}; run `compress compare` to make one.")
    return write_comparison(read_json(path), Path(directory))
