"""Every metric a comparison shows, side by side: each row's test score and retention in each, and where the metrics
disagree (about one row's retention, or about which of two rows is better), which rows and why.

On a task with a rare class they disagree most: accuracy and the F1 of a common positive class reward the common
answer, Matthews correlation does not (it is 0 for any constant answer), so a model that gives up on the rare class
keeps its accuracy and loses its Matthews. The sentences here name the rows and the constant answer's scores.
"""

from __future__ import annotations

from itertools import combinations

from compress.registry import Section
from compress.reports.comparison_data import ShownComparison, ShownInterval, ShownModel
from compress.task_metrics import METRICS

APART = 0.02           # retentions this far apart (2 points) are a disagreement about a row
ORDER_MARGIN = 0.005   # two rows closer than this (0.5 points) in a metric are not ordered by it
LISTED = 6             # row pairs named before "and N more"

WHAT_IT_COUNTS = {
    "accuracy": "accuracy counts every sentence alike, so the common class's hits carry it",
    "f1": "F1 scores the positive class alone (its precision and recall), high when that class is the common one "
          "and blind to the errors on the other",
    "macro_f1": "macro-F1 averages each class's F1, so the rare class weighs as much as the common one",
    "mcc": "Matthews correlation weighs both classes' errors and is 0 for any constant answer, so it is the one that "
           "falls when a model gives up on the rare class",
    "pearson": "Pearson measures how closely the predictions follow the scores along a straight line, so a model "
               "that squeezes or bends the scale loses it",
    "spearman": "Spearman counts only whether the predictions keep the scores' order, so it forgives a bent scale "
                "and punishes swapped neighbours",
}


def _title(name: str) -> str:
    return METRICS[name].title if name in METRICS else name


def shown_metrics(comparison: ShownComparison) -> tuple[str, ...]:
    """The comparison's metric first, then every other one that the teacher and each row have a score in."""
    teacher = comparison.teacher
    if teacher is None:
        return ()
    first = comparison.context.metric
    return tuple(name for name in (first, *(n for n in teacher.scores if n != first))
                 if name in teacher.scores and all(name in m.scores for m in comparison.methods))


def _retention(model: ShownModel, teacher: ShownModel, name: str) -> float | None:
    """``model``'s score as a fraction of the teacher's; none where the teacher's is not above 0 (a Matthews of 0)."""
    return model.scores[name] / teacher.scores[name] if teacher.scores[name] > 0 else None


def _cell(value: float | None, interval: ShownInterval | None = None) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.1f}" + (f" ({100 * interval.low:.1f}–{100 * interval.high:.1f})" if interval else "")


def metric_table(comparison: ShownComparison) -> tuple[list[str], list[list[str]]] | None:
    """Headers and rows: the teacher and each method, its score (×100) and retention (%) in every metric shown, each
    with its 95% interval where recorded; None where the comparison shows one metric only."""
    names, teacher = shown_metrics(comparison), comparison.teacher
    if len(names) < 2 or teacher is None:
        return None
    headers = ["method", *(f"{_title(n)} (×100)" for n in names), *(f"{_title(n)} retention (%)" for n in names)]
    rows = [[f"teacher: {teacher.name or '?'}", *(_cell(teacher.scores[n], teacher.score_intervals.get(n))
                                                  for n in names),
             *(_cell(1.0 if teacher.scores[n] > 0 else None) for n in names)]]
    rows += [[m.method, *(_cell(m.scores[n], m.score_intervals.get(n)) for n in names),
              *(_cell(_retention(m, teacher, n), m.retention_intervals.get(n)) for n in names)]
             for m in comparison.methods]
    return headers, rows


def _constant_answer(comparison: ShownComparison, names: tuple[str, ...]) -> list[str]:
    """What always giving a two-class task's common answer scores, from the test split's classes."""
    classes = comparison.dataset.test_classes
    if len(classes) != 2 or not (total := sum(classes.values())):
        return []
    (common, count), positive = max(classes.items(), key=lambda kv: kv[1]), list(classes)[1]
    share = count / total
    scores = {"accuracy": share, "f1": 2 * share / (1 + share) if common == positive else 0.0,
              "macro_f1": share / (1 + share), "mcc": 0.0}
    said = ", ".join(f"{_title(n)} {100 * scores[n]:.1f}" for n in names if n in scores)
    return [f"{count:,.0f} of the {total:,.0f} test sentences ({100 * share:.1f}%) are {common}: a model that always "
            f"answers {common} scores {said} (×100; the positive class is {positive})."] if said else []


def disagreements(comparison: ShownComparison) -> list[str]:
    """Sentences: the constant answer's scores (two classes), the rows whose retention differs by :data:`APART` or
    more between the metrics, the row pairs two metrics order the other way round, and what each metric counts."""
    names, teacher = shown_metrics(comparison), comparison.teacher
    if len(names) < 2 or teacher is None:
        return []
    apart = []
    for method in comparison.methods:
        kept = {n: r for n in names if (r := _retention(method, teacher, n)) is not None}
        if len(kept) > 1 and max(kept.values()) - min(kept.values()) >= APART:
            apart.append(f"{method.method} ({', '.join(f'{_title(n)} {100 * r:.1f}%' for n, r in kept.items())})")
    crossed = []
    for a, b in combinations((teacher, *comparison.methods), 2):
        for x, y in combinations(names, 2):
            dx, dy = a.scores[x] - b.scores[x], a.scores[y] - b.scores[y]
            if abs(dx) >= ORDER_MARGIN and abs(dy) >= ORDER_MARGIN and dx * dy < 0:
                higher, lower = (a, b) if dx > 0 else (b, a)
                crossed.append(f"{_title(x)} puts {_row_name(higher)} above {_row_name(lower)}, {_title(y)} the "
                               "other way round")
    sentences = _constant_answer(comparison, names)
    if apart:
        sentences.append(f"Retention differs by {100 * APART:.0f} points or more between the metrics for "
                         + "; ".join(apart) + ".")
    if crossed:
        more = f" (and {len(crossed) - LISTED} more)" if len(crossed) > LISTED else ""
        sentences.append("The metrics order some rows differently: " + "; ".join(crossed[:LISTED]) + more + ".")
    if not apart and not crossed:
        sentences.append(f"Here the metrics agree: no row's retention differs between them by {100 * APART:.0f} "
                         f"points or more, and none orders two rows (more than {100 * ORDER_MARGIN:.1f} points apart "
                         "in each) the other way round.")
    counts = [WHAT_IT_COUNTS[n] for n in names if n in WHAT_IT_COUNTS]
    if counts:
        sentences.append("Why they can disagree: " + "; ".join(counts) + ".")
    return sentences


def _row_name(model: ShownModel) -> str:
    return getattr(model, "method", None) or "the teacher"


def metrics_section(comparison: ShownComparison) -> Section | None:
    """The report's part on every metric: the sentences of :func:`disagreements` over :func:`metric_table`'s table
    (means over the seeds); None where the comparison shows one metric only."""
    table = metric_table(comparison)
    if table is None:
        return None
    headers, rows = table
    return Section("metrics", lines=disagreements(comparison), headers=headers, rows=rows,
                   align=["left", *["right"] * (len(headers) - 1)])
