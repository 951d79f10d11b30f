"""One comparison across several tasks, as the compression papers print it: tasks as columns, methods as rows,
each task scored by its own metric, and the mean across tasks.

``compress compare --dataset mr,bbc-news,mr-score`` runs one ordinary comparison per task, each in
``OUT/tasks/<task>/`` (its runs reused as any comparison's are), then writes ``OUT/tasks.json`` (a
:class:`AcrossTasks`), ``tasks.md`` and ``tasks.html``. Every task is checked before any of them trains.

The mean's interval: the tasks' test sets are independent draws, so the variance of the mean of ``k`` task scores
is the sum of their variances over ``k^2``; each side of the mean's interval is the root of the sum of the squared
same sides of the tasks' intervals, over ``k`` (asymmetric intervals keep their sides). Each task's interval already
counts its test sentences and its seeds (:mod:`compress.stats`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compress.errors import CompressError
from compress.ownership import foreign, mark_comparison
from compress.paths import atomic_write_text, locked
from compress.reports.records import Comparison, IntervalRecord
from compress.runs.compare import CompareConfig, check_comparison, compare, run_dir_name
from compress.task_metrics import METRICS

ACROSS_TASKS_SCHEMA = 1
FILES = ("tasks", "tasks.json", "tasks.md", "tasks.html")


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def datasets_of(text: str | list[str]) -> list[str]:
    """The datasets a ``--dataset`` names: one, or several separated by commas (each once)."""
    names = [d.strip() for d in text.split(",")] if isinstance(text, str) else [str(d).strip() for d in text]
    names = [d for d in names if d]
    if not names:
        raise CompressError("--dataset names no dataset.")
    if len(set(names)) != len(names):
        raise CompressError(f"--dataset names a dataset twice ({', '.join(names)}); name each task once.")
    return names


def mean_interval(intervals: list[IntervalRecord]) -> IntervalRecord:
    """The mean of independent estimates with the interval their intervals imply (see the module docstring)."""
    k = len(intervals)
    estimate = sum(i["estimate"] for i in intervals) / k
    low = math.sqrt(sum((i["estimate"] - i["low"]) ** 2 for i in intervals)) / k
    high = math.sqrt(sum((i["high"] - i["estimate"]) ** 2 for i in intervals)) / k
    return IntervalRecord(estimate=estimate, low=estimate - low, high=estimate + high,
                          level=intervals[0]["level"])


def _point(value: float, level: float) -> IntervalRecord:
    return IntervalRecord(estimate=value, low=value, high=value, level=level)


def compare_tasks(config: CompareConfig, datasets: list[str],
                  progress: Callable[[str], None] | None = None) -> tuple[Path, AcrossTasks]:
    """One comparison per dataset under ``OUT/tasks/``, every one checked before any trains, then the table across
    them; returns its directory and the table (``to_dict()`` is tasks.json)."""
    say = progress or (lambda message: None)
    out = Path(config.out or f"runs/compare-{Path(config.teacher).name}-tasks")
    if out.exists() and not out.is_dir():
        raise CompressError(f"--out {out} is a file, not a directory; choose another --out.")
    if out.is_dir() and any(out.iterdir()) and (reason := foreign(out, "comparison")) is not None:
        raise CompressError(f"--out {out.resolve()} is not a comparison compress wrote: it {reason}; choose a new "
                            "or empty directory.")
    tasks_dir = out / "tasks"
    checked = []
    for dataset in datasets:
        directory = tasks_dir / run_dir_name(Path(dataset).name)
        if directory.resolve().parent != tasks_dir.resolve():
            raise CompressError(f"the comparison of {dataset!r} would resolve to {directory.resolve()}, outside "
                                f"{tasks_dir.resolve()}; remove that link or choose another --out.")
        checked.append(check_comparison(replace(config, dataset=dataset, out=str(directory))))
    with locked(out, wait=False, what=f"the comparison across tasks in {out}"):
        out.mkdir(parents=True, exist_ok=True)
        mark_comparison(out, list(FILES))
        made: list[tuple[str, Path, Comparison]] = []
        for dataset, one in zip(datasets, checked, strict=True):
            say(f"task {dataset}: {len(made) + 1} of {len(datasets)}")
            directory, comparison = compare(one, progress)
            made.append((dataset, directory, comparison))
        table = across(config, made, out)
        write_across(table, out)
    return out, table


def across(config: CompareConfig, made: list[tuple[str, Path, Comparison]], out: Path) -> AcrossTasks:
    """The table of several comparisons of one teacher and one set of methods, each on its own task."""
    columns = [TaskColumn(dataset, comparison.dataset.name, comparison.metric,
                          directory.relative_to(out).as_posix(), comparison.dataset.sizes.get("test", 0))
               for dataset, directory, comparison in made]
    rows: list[TaskRow] = []
    names = ["teacher", *(m.method for m in made[0][2].methods)]
    for name in names:
        scores, retentions, sizes, speedups = {}, {}, {}, {}
        label = name
        for dataset, _, comparison in made:
            model = comparison.teacher if name == "teacher" else \
                next((m for m in comparison.methods if m.method == name), None)
            if model is None:
                raise CompressError(f"the comparison of {dataset} has no row {name}; run it again.")
            level = comparison.intervals["level"] if comparison.intervals else 0.95
            scores[dataset] = model.accuracy_interval or _point(model.accuracy, level)
            sizes[dataset] = model.size_bytes
            if name != "teacher":
                label = model.label
                retentions[dataset] = model.retention_interval or _point(model.retention, level)
                speedups[dataset] = model.speedup
        rows.append(TaskRow(method=name, label=label, scores=scores, retentions=retentions,
                            mean_score=mean_interval(list(scores.values())),
                            mean_retention=mean_interval(list(retentions.values())) if retentions else None,
                            size_bytes=sizes, speedups=speedups))
    return AcrossTasks(created=datetime.now(timezone.utc).isoformat(timespec="seconds"), teacher=config.teacher,
                       tasks=columns, rows=rows, seeds=list(config.seeds), command=config.command)


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


def read_across(data: dict[str, Any]) -> AcrossTasks:
    """A tasks.json this version wrote; one sentence otherwise."""
    if data.get("kind") != "across-tasks" or data.get("schema_version") != ACROSS_TASKS_SCHEMA:
        raise CompressError("the file is not a tasks.json of compress compare --dataset A,B,C (schema "
                            f"{ACROSS_TASKS_SCHEMA}); run the comparison again.")
    try:
        return AcrossTasks(**data | {"tasks": [TaskColumn(**c) for c in data["tasks"]],
                                     "rows": [TaskRow(**r) for r in data["rows"]]})
    except (TypeError, KeyError) as error:
        raise CompressError(f"the tasks.json is malformed ({error}); run the comparison again.") from None
