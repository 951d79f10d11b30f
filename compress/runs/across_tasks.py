"""One comparison across several tasks, as the compression papers print it: tasks as columns, methods as rows,
each task scored by its own metric, and the mean across tasks.

``compress compare --dataset mr,bbc-news,mr-score`` runs one ordinary comparison per task, each in
``OUT/tasks/<task>/`` (its runs reused as any comparison's are), then writes ``OUT/tasks.json`` (a
:class:`compress.reports.across_tasks.AcrossTasks`), ``tasks.md`` and ``tasks.html``. Every task is checked before
any of them trains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from compress.errors import CompressError
from compress.ownership import foreign, mark_comparison
from compress.paths import locked
from compress.reports.across_tasks import AcrossTasks, TaskColumn, TaskRow, mean_interval, write_across
from compress.reports.records import Comparison, IntervalRecord
from compress.runs.compare import check_comparison, compare, run_dir_name
from compress.runs.compare_plan import CompareConfig

FILES = ("tasks", "tasks.json", "tasks.md", "tasks.html")


def datasets_of(text: str | list[str]) -> list[str]:
    """The datasets a ``--dataset`` names: one, or several separated by commas (each once)."""
    names = [d.strip() for d in text.split(",")] if isinstance(text, str) else [str(d).strip() for d in text]
    names = [d for d in names if d]
    if not names:
        raise CompressError("--dataset names no dataset.")
    if len(set(names)) != len(names):
        raise CompressError(f"--dataset names a dataset twice ({', '.join(names)}); name each task once.")
    return names


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


