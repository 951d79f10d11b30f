"""The table of one comparison across several tasks (``tasks.json``, a :class:`AcrossTasks`) and its renderings:
tasks as columns, methods as rows, each task scored by its own metric, and the mean across tasks.
:mod:`compress.runs.across_tasks` makes it; ``compress results`` renders a kept one.

The mean's interval: the tasks' test sets are independent draws, so the variance of the mean of ``k`` task scores
is the sum of their variances over ``k^2``; each side of the mean's interval is the root of the sum of the squared
same sides of the tasks' intervals, over ``k`` (asymmetric intervals keep their sides). Each task's interval already
counts its test sentences and its seeds (:mod:`compress.stats`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compress.errors import CompressError
from compress.paths import atomic_write_text
from compress.reports.records import IntervalRecord
from compress.task_metrics import METRICS

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

ACROSS_TASKS_SCHEMA = 1


@dataclass
class TaskColumn:
    """One task of the table: its dataset, the metric it is scored by, and where its own comparison is."""

    dataset: str             # as --dataset named it: the key of every row's scores
    name: str                # the task's name (a file's name without its directory)
    metric: str
    comparison: str          # the task's comparison directory, relative to the table's
    test_size: int


@dataclass
class TaskRow:
    """One model across the tasks: its score and retention on each (by dataset) and their means."""

    method: str              # "teacher" or the comparison's method (distilbert+int8)
    label: str
    scores: dict[str, IntervalRecord]
    retentions: dict[str, IntervalRecord]      # empty for the teacher (100% by definition)
    mean_score: IntervalRecord
    mean_retention: IntervalRecord | None
    size_bytes: dict[str, int] = field(default_factory=dict)
    speedups: dict[str, float] = field(default_factory=dict)


@dataclass
class AcrossTasks:
    """tasks.json."""

    created: str
    teacher: str
    tasks: list[TaskColumn]
    rows: list[TaskRow]
    seeds: list[int]
    command: str | None = None
    mean: str = ("each side: the root of the sum of the tasks' same sides squared, over the number of tasks "
                 "(independent test sets)")
    kind: str = "across-tasks"
    schema_version: int = ACROSS_TASKS_SCHEMA

    def to_dict(self) -> JSONObject:
        return asdict(self)


def mean_interval(intervals: list[IntervalRecord]) -> IntervalRecord:
    """The mean of independent estimates with the interval their intervals imply (see the module docstring)."""
    k = len(intervals)
    estimate = sum(i["estimate"] for i in intervals) / k
    low = math.sqrt(sum((i["estimate"] - i["low"]) ** 2 for i in intervals)) / k
    high = math.sqrt(sum((i["high"] - i["estimate"]) ** 2 for i in intervals)) / k
    return IntervalRecord(estimate=estimate, low=estimate - low, high=estimate + high,
                          level=intervals[0]["level"])


def _title(metric: str) -> str:
    return METRICS[metric].title if metric in METRICS else metric


def _cell(interval: IntervalRecord | None) -> str:
    if interval is None:
        return "–"
    if interval["low"] == interval["high"]:
        return f"{100 * interval['estimate']:.1f}"
    return f"{100 * interval['estimate']:.1f} ({100 * interval['low']:.1f}–{100 * interval['high']:.1f})"


def table_rows(table: AcrossTasks) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """The headers and the two tables' cells: each model's score on each task and the mean, then its retention."""
    headers = ["model", *(f"{c.name} ({_title(c.metric)})" for c in table.tasks), "mean"]
    scores = [[row.label if row.method != "teacher" else f"teacher: {table.teacher}",
               *(_cell(row.scores.get(c.dataset)) for c in table.tasks), _cell(row.mean_score)] for row in table.rows]
    retentions = [[row.label, *(_cell(row.retentions.get(c.dataset)) for c in table.tasks),
                   _cell(row.mean_retention)] for row in table.rows if row.method != "teacher"]
    return headers, scores, retentions


NOTES = ("Each task is scored by its own metric (in brackets in its column's header), times 100, with its 95% "
         "interval over the test sentences and the seeds (each task's comparison.json says how); the mean is the "
         "mean of the columns, its interval from theirs as independent test sets (tasks.json's mean says how).",
         "Retention: each task's score as a percentage of the teacher's on that task, paired on its sentences.")


def render_markdown(table: AcrossTasks, links: bool = True) -> str:
    """tasks.md; ``links``: to each task's comparison.md beside it (not where the table is copied elsewhere)."""
    headers, scores, retentions = table_rows(table)

    def markdown(rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(headers) + " |", "|:--" + "|--:" * (len(headers) - 1) + "|",
                *("| " + " | ".join(cells) + " |" for cells in rows)]

    seeds = ", ".join(map(str, table.seeds))
    lines = [f"# {table.teacher} across {len(table.tasks)} tasks", "",
             f"Seeds {seeds}; each task's own comparison: "
             + ", ".join((f"[{c.name}]({c.comparison}/comparison.md)" if links else c.name)
                         + f" ({c.test_size:,} test sentences)" for c in table.tasks) + ".", "", "## Scores", "", *markdown(scores), "",
             "## Retention (% of the teacher)", "", *markdown(retentions), "", *(f"- {note}" for note in NOTES), ""]
    return "\n".join(lines)


def render_html(table: AcrossTasks) -> str:
    import html

    headers, scores, retentions = table_rows(table)

    def html_table(rows: list[list[str]]) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    title = html.escape(f"{table.teacher} across {len(table.tasks)} tasks")
    links = ", ".join(f'<a href="{html.escape(c.comparison)}/comparison.html">{html.escape(c.name)}</a>'
                      for c in table.tasks)
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', '<head><meta charset="utf-8">', f"<title>{title}</title>",
                      "<style>body{font-family:sans-serif;max-width:72rem;margin:2rem auto}table{border-collapse:"
                      "collapse}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}"
                      "td:first-child,th:first-child{text-align:left}</style></head>", "<body>",
                      f"<h1>{title}</h1>", f"<p>Each task's own comparison: {links}.</p>",
                      "<h2>Scores</h2>", html_table(scores), "<h2>Retention (% of the teacher)</h2>",
                      html_table(retentions), "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in NOTES) + "</ul>",
                      "</body>", "</html>", ""])


def write_across(table: AcrossTasks, out: Path) -> None:
    atomic_write_text(out / "tasks.md", render_markdown(table))
    atomic_write_text(out / "tasks.html", render_html(table))
    atomic_write_text(out / "tasks.json", json.dumps(table.to_dict(), indent=2) + "\n")


def read_across(data: JSONObject) -> AcrossTasks:
    """A tasks.json this version wrote; one sentence otherwise."""
    if data.get("kind") != "across-tasks" or data.get("schema_version") != ACROSS_TASKS_SCHEMA:
        raise CompressError("the file is not a tasks.json of compress compare --dataset A,B,C (schema "
                            f"{ACROSS_TASKS_SCHEMA}); run the comparison again.")
    try:
        return AcrossTasks(**data | {"tasks": [TaskColumn(**c) for c in data["tasks"]],
                                     "rows": [TaskRow(**r) for r in data["rows"]]})
    except (TypeError, KeyError) as error:
        raise CompressError(f"the tasks.json is malformed ({error}); run the comparison again.") from None
