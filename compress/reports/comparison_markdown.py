"""The comparison as markdown: :func:`render_markdown` writes comparison.md (context, verdict, table, notes,
one section per method); :func:`render_summary` and :func:`render_brief` render a comparison.json as a section
of a results page and as its one results table. The rows, numbers and sentences come from
:mod:`compress.reports.comparison_rows`; this module escapes them and lays them out as GitHub-flavoured markdown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from compress.errors import CompressError
from compress.registry import Section
from compress.reports import comparison_rows
from compress.reports.comparison_data import ShownComparison, in_metric, read_comparison
from compress.reports.comparison_rows import HEADERS, INTERVAL_NOTES, METRICS_HEADING, ONE_RUN, STEP_HEADERS, Row
from compress.reports.metric_agreement import metrics_section
from compress.reports.plots import steps_stem
from compress.reports.verdicts import PAIR_HEADERS, RETENTION_TARGET, called, verdict

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject


ALIGNMENT = {"left": ":--", "right": "--:"}


def _md(text: str) -> str:
    """Escape the characters markdown would read as formatting or table syntax."""
    return re.sub(r"([\\`*_\[\]|<>#])", r"\\\1", text)


def _md_verdict(comparison: ShownComparison) -> list[str]:
    """The verdict in markdown: a short list, the table of neighbours on the front, and what the intervals count."""
    parts = comparison_rows.verdict_parts(comparison)
    if parts is None:
        return []
    items, rows, scope = parts
    lines = [f"- **{_md(what)}**: {_md(models)}" for what, models in items] + [""]
    if rows:
        lines += ["| " + " | ".join(comparison_rows.headers(comparison, PAIR_HEADERS)) + " |", "|:--|--:|:--|--:|:--|",
                  *("| " + " | ".join(map(_md, row)) + " |" for row in rows), ""]
    return lines + [f"_{_md(scope)}_", ""]


def _held_out_lines(comparison: ShownComparison) -> list[str]:
    section = comparison_rows.held_out_section(comparison)
    return [] if section is None else ["", *_md_section(section)]


def _md_table(rows: list[Row], headers: tuple[str, ...] = HEADERS) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|:--" + "|--:" * (len(headers) - 1) + "|"]
    for row in rows:
        name = f"[{_md(row.name)}](#{row.anchor})" if row.anchor else f"**{_md(row.name)}**"
        lines.append("| " + " | ".join([name, *row.cells]) + " |")
    return lines


def _md_section(section: Section) -> list[str]:
    """A method's section: its title, its sentences as paragraphs, its table aligned as ``align`` says."""
    lines = [f"#### {_md(section.title)}", ""] if section.title else []
    for line in section.lines:
        lines += [_md(line), ""]
    table = comparison_rows.table(section)
    if table is not None:
        headers, rows = table
        align = [ALIGNMENT.get(a, "---") for a in section.align[:len(headers)]]
        align += ["---"] * (len(headers) - len(align))
        lines += ["| " + " | ".join(map(_md, headers)) + " |", "|" + "|".join(align) + "|",
                  *("| " + " | ".join(map(_md, cells)) + " |" for cells in rows), ""]
    return lines


def render_markdown(comparison: JSONObject | ShownComparison) -> str:
    """The comparison as GitHub-flavoured markdown: context, table, notes, one section per method."""
    shown = read_comparison(comparison)
    lines = [f"# {_md(comparison_rows.title(shown))}", ""]
    if comparison_rows.context_line(shown):
        lines += [_md(" · ".join(comparison_rows.context_line(shown))), ""]
    lines += _md_verdict(shown)
    lines += _md_table(comparison_rows.rows(shown), comparison_rows.headers(shown, HEADERS))
    lines += _held_out_lines(shown)
    lines += [line for sentence in comparison_rows.front_sentences(shown) for line in ("", _md(sentence))]
    warnings = comparison_rows.warnings(shown)
    lines += [""] + [_md(w) + "  " for w in warnings] if warnings else []
    lines += ["", "## How to read the table", ""] + [f"- {_md(note)}" for note in comparison_rows.notes(shown)]
    if (metrics := metrics_section(shown)) is not None:
        lines += ["", f"## {METRICS_HEADING}", "", *_md_section(metrics)]
    if shown.pipelines():
        lines += ["", "## What each step of a pipeline bought", ""]
        for pipeline in shown.pipelines():
            lines += [f"### {_md(pipeline.method)}", "",
                      *_md_table(comparison_rows.step_rows(shown, pipeline),
                                 comparison_rows.headers(shown, STEP_HEADERS)),
                      "", f"![{_md(pipeline.method)}: each step]({steps_stem(pipeline)}.png)", ""]
    lines += ["", "## What each method changed", ""]
    for method, anchor in zip(shown.methods, comparison_rows.anchors(shown.methods)):
        lines += [f'<a id="{anchor}"></a>', "",
                  f"### {_md(comparison_rows.display_name(method))} (`{method.method}`)", ""]
        if details := comparison_rows.details(method, len(shown.context.seeds), shown):
            lines += ["_" + _md(" · ".join(details)) + "_", ""]
        lines += [_md(comparison_rows.explanation(method)), ""]
        for section in method.sections:
            lines += _md_section(section)
    return "\n".join(lines).rstrip() + "\n"


def read_json(path: Path) -> JSONObject:
    """The comparison.json at ``path``; a file that is not JSON says how to make it again."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CompressError(f"{path} is not valid JSON ({error}); re-run `compress compare` to rewrite it.") from None


def _cpu_phrase(comparison: JSONObject) -> str:
    """The CPU a comparison ran on, with the vector and matrix units that decide what runs fast there."""
    cpu = (comparison.get("manifest") or {}).get("cpu") or {}
    features = [name for name, present in (cpu.get("features") or {}).items() if present]
    count = f", {cpu['count']} CPUs" if cpu.get("count") else ""
    return f"{cpu.get('model') or 'an unrecorded CPU'}{count}" + (f" ({', '.join(features)})" if features else "")


def render_summary(path: Path, heading: str = "##") -> str:
    """The comparison in ``path`` (a comparison.json) as one section of a results page: its title, what made it
    (the command, the CPU and its units, the date), its table and its Pareto front; no per-method sections."""
    data = read_json(Path(path))
    shown = read_comparison(data)
    command = data.get("command")
    made = f"Made by `{command}`" if command else "Made by a `compress compare` whose command was not recorded"
    made += f" on {_md(_cpu_phrase(data))}"
    if shown.context.gpu:
        made += f", timed on the GPU {_md(shown.context.gpu)}"
    elif (threads := shown.context.threads) is not None:
        made += f", timed with {threads} thread{'' if threads == 1 else 's'}"
    if shown.context.precision:
        made += f", students trained in {_md(comparison_rows.precision_phrase(shown.context.precision))}"
    if shown.context.created:
        made += f", {_md(shown.context.created)}"
    lines = [f"{heading} {_md(comparison_rows.title(shown))}", "",
             made + f"; rendered from `{Path(path).as_posix()}`.", ""]
    lines += _md_verdict(shown)
    rows = comparison_rows.rows(shown)
    lines += _md_table([Row(row.short or row.name, None, row.cells) for row in rows])
    if any(ONE_RUN in cell for row in rows for cell in row.cells):
        lines += ["", _md(next(note for note in comparison_rows.notes(shown) if note.startswith(ONE_RUN)))]
    if shown.has_intervals:
        lines += ["", _md(INTERVAL_NOTES[1][0].upper() + INTERVAL_NOTES[1][1:])]
    lines += _held_out_lines(shown)
    lines += [line for sentence in comparison_rows.front_sentences(shown) for line in ("", _md(sentence))]
    if (metrics := metrics_section(shown)) is not None:   # where the metrics disagree, the page says so too
        lines += ["", f"{heading}# {METRICS_HEADING}", "", *_md_section(metrics)]
    lines += [_md(w) + "  " for w in comparison_rows.warnings(shown)]
    return "\n".join(lines).rstrip() + "\n"


BRIEF_COLUMNS = (2, 5, 8)   # of HEADERS after the name: size (MB), retention, speed-up


def render_brief(path: Path) -> str:
    """The comparison in ``path`` as a page's one results table (the README's): each model's size, retention and
    speed-up, and the verdict in two sentences; ``render_summary`` has the rest."""
    data = read_json(Path(path))
    shown = read_comparison(data)
    seeds = len(shown.context.seeds)
    cpu = (data.get("manifest") or {}).get("cpu") or {}
    made = (f"{_md(comparison_rows.title(shown))}: {seeds} seed{'s' if seeds != 1 else ''}, timed on "
            f"{_md(shown.context.gpu or cpu.get('model') or 'an unrecorded CPU')}, "
            f"{_md(str(shown.context.created or '')[:10])} (`{Path(path).as_posix()}`).")
    headers = tuple(comparison_rows.headers(shown, HEADERS)[i] for i in (0, *BRIEF_COLUMNS))
    rows = [Row(row.short or row.name, None, [row.cells[i - 1] for i in BRIEF_COLUMNS])
            for row in comparison_rows.rows(shown)]
    lines = [made, "", *_md_table(rows, headers), ""]
    found = verdict(shown)
    if found is not None:
        def count(n: int, verb: str) -> str:   # "none lies", "1 model lies", "3 models lie"
            return f"none {verb}s" if n == 0 else f"{n} model{'s' if n > 1 else ''} {verb}{'' if n > 1 else 's'}"

        target = f"{100 * RETENTION_TARGET:.0f}%"
        keep = ", ".join(name for name, _ in found.keep)
        kept = f"{keep} keep{'s' if len(found.keep) == 1 else ''}" if keep else "No model keeps"
        their = "its" if len(found.unsure) == 1 else "their"
        lines.append(_md(in_metric(
            f"{kept} {target} of the teacher beyond the interval; {count(len(found.unsure), 'hold')} {target} within "
            f"{their} interval, and {count(len(found.below), 'lie')} below it. On the front, fastest first: "
            f"{', '.join(map(called, found.front))}.", shown)))
    if any(ONE_RUN in cell for row in rows for cell in row.cells):
        lines += ["", f"{ONE_RUN} one run: its interval counts the test sentences only."]
    lines += comparison_rows.front_sentences(shown)
    return "\n".join(lines).rstrip() + "\n"
