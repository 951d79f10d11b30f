"""What the markdown and HTML comparison reports share: the table's headers and notes, each number formatted
(with its interval where the comparison has one), the rows of the main table and of a pipeline's steps, the
verdict's parts, the context line, the held-out table and each method's details, all read from the frozen
dataclasses of :mod:`compress.reports.comparison_data`. :mod:`compress.reports.comparison_markdown` and
:mod:`compress.reports.comparison_html` only put these into their own syntax, so the two reports say the same.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from compress.bench.contention import BUSY_THRESHOLD
from compress.bench.measurement import batch_phrase
from compress.registry import Section
from compress.reports.comparison_data import MISSING, ShownComparison, ShownInterval, ShownMethod, ShownModel, in_metric
from compress.reports.verdicts import front_names, verdict
from compress.task_metrics import METRICS


HEADERS = ("method", "params (M)", "size (MB)", "FLOPs (G / sequence)", "accuracy (%)",
           "retention (% of teacher)", "latency p50, batch 1 (ms)", "throughput (examples/s)",
           "speed-up vs teacher (×)")

NOTES = (
    "params: embeddings + encoder + pooler, in millions; size: bytes of the saved weights, in MB (10⁶ bytes).",
    "FLOPs: analytic, two per multiply-add, for one forward pass over one sequence of the latency sequence length.",
    "accuracy: on the test split; retention: the method's accuracy as a percentage of the teacher's.",
    ("latency: median of batch-1 forward passes on the CPU; throughput: examples per second; "
     "speed-up: how many times faster than the teacher."),
    "–: not measured for that method.",
)

INTERVAL_NOTES = (
    ("accuracy and retention: the mean over the seeds and, in brackets, its 95% interval, low to high (over the "
     "test sentences and, with several seeds, the seeds: comparison.json's intervals.method says how; retention "
     "paired with the teacher on the same sentences)."),
    ("retention is relative to one fine-tuned teacher: fine-tuning it again would move every retention together, "
     "which no interval here counts."),
)
SPEEDUP_NOTES = {
    # comparison.json's speed.speedup: how the speed-up column was computed
    None: ("speed-up: the median over rounds of the teacher's batch-1 latency / the model's, each round timing "
           "every model once; in brackets the interquartile range of those ratios (the latency column comes from "
           "other passes)."),
    "median rounds": ("latency and speed-up: from the same rounds, each timing every model's batch-1 latency once: "
                      "the latency is the median of the model's rounds, the speed-up the teacher's over it; in "
                      "brackets the interquartile range of the per-round ratios."),
    "passes": ("latency, throughput and speed-up: from the same independent passes, each loading every model "
               "afresh and timing them in a new order, in rounds (every model's batch-1 latency once a round), then "
               "the large batch; the latency is the median of the model's rounds; a pass's speed-up is the "
               "teacher's median round over the model's in that pass, the speed-up the median of the passes', and "
               "in brackets the lowest and highest (its run-to-run spread)."),
}
METRICS_HEADING = "Every metric side by side (test, means over the seeds)"
ONE_RUN = "¹"   # marks an interval over the test sentences only, in a comparison of several seeds

NO_NUMBERS = ShownModel()   # a step of a pipeline that has no row of its own: nothing measured


# --- formatting --------------------------------------------------------------------------------

def _significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant figures (at most 4 decimals), never in scientific notation."""
    if value == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    if decimals > 4 and abs(value) < 0.00005:
        return "<0.0001" if value > 0 else ">-0.0001"
    return f"{value:,.{min(max(decimals, 0), 4)}f}"


def _scaled(divisor: float, x: float | None) -> str:
    return MISSING if x is None else _significant(x / divisor)


def _percent(x: float | None) -> str:
    return MISSING if x is None else f"{100 * x:.1f}"


def _throughput(x: float | None) -> str:
    return MISSING if x is None else (f"{x:,.0f}" if x >= 100 else _significant(x))


def _speedup(x: float | None) -> str:
    return MISSING if x is None else f"{x:.2f}x"


def _with_interval(x: float | None, interval: ShownInterval | None) -> str:
    """A percentage, as ``97.8 (96.1–99.2)`` when it has an interval (low to high: they need not be symmetric)."""
    return _percent(x) if interval is None or x is None else \
        f"{100 * x:.1f} ({100 * interval.low:.1f}–{100 * interval.high:.1f})"


def _speedup_cell(x: float | None, method: ShownMethod | None) -> str:
    """The speed-up with, in brackets, the lowest and highest pass's (timed in passes) or the rounds' IQR."""
    spread = None if method is None else \
        (min(method.speedup_passes), max(method.speedup_passes)) if len(method.speedup_passes) > 1 else \
        method.speedup_iqr
    return _speedup(x) if spread is None or x is None else f"{x:.2f}x ({spread[0]:.2f}–{spread[1]:.2f})"


def _number_cells(model: ShownModel, retention: float | None, speedup: float | None) -> list[str]:
    """Every column after the method name, formatted (with its interval where the comparison has one)."""
    method = model if isinstance(model, ShownMethod) else None
    return [_scaled(1e6, model.params), _scaled(1e6, model.size_bytes), _scaled(1e9, model.flops),
            _with_interval(model.accuracy, model.accuracy_interval),
            _with_interval(retention, method.retention_interval if method else None),
            _scaled(1, model.latency_ms_p50), _throughput(model.throughput),
            _speedup_cell(speedup, method)]


# --- the rows both renderers share -------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One table row: display name, the anchor of its explanation (None for the teacher), cells."""

    name: str
    anchor: str | None
    cells: list[str]
    short: str | None = None   # the page's name for it (``distilbert+prune+int8``); ``name`` shows on hover


def anchors(methods: tuple[ShownMethod, ...]) -> list[str]:
    """``method-<name>`` per method, made URL-safe and unique."""
    seen: dict[str, int] = {}
    out = []
    for m in methods:
        slug = "method-" + (re.sub(r"[^a-z0-9_-]+", "-", m.method.lower()).strip("-") or "x")
        seen[slug] = seen.get(slug, 0) + 1
        out.append(slug if seen[slug] == 1 else f"{slug}-{seen[slug]}")
    return out


def _runtime(method: ShownMethod) -> str:
    """`` on openvino``: the runtime of a row that is not PyTorch fp32 (quantized or exported), which the backend
    choice made on the comparison's CPU; empty for the rest."""
    other = method.backend not in (None, "torch") or method.dtype not in (None, "fp32")
    return f" on {method.backend}" if other and method.backend else ""


def display_name(method: ShownMethod) -> str:
    name = method.name + _runtime(method)
    return name + " ⚠" if method.note else name


def warnings(comparison: ShownComparison) -> list[str]:
    """One line per method this CPU runs badly (marked ⚠ in the table), then one per method whose runtime was the
    fastest at batch 1 or in large batches but not both."""
    return [f"⚠ {m.name}: {m.note}" for m in comparison.methods if m.note] + \
        [f"{m.name}: {m.runtime_note}." for m in comparison.methods if m.runtime_note]


def verdict_parts(comparison: ShownComparison) -> tuple[list[tuple[str, str]], list[list[str]], str] | None:
    """The verdict worded in the comparison's metric: the list (claim, models), the rows of the neighbouring
    pairs' table, and what the intervals count; None for a comparison without intervals."""
    found = verdict(comparison)
    if found is None:
        return None
    items = [(in_metric(what, comparison), models) for what, models in found.items()]
    rows = [[in_metric(cell, comparison) for cell in row] for row in found.pair_rows()]
    return items, rows, in_metric(found.scope, comparison)


def headers(comparison: ShownComparison, headers: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(in_metric(header, comparison) for header in headers)


def notes(comparison: ShownComparison) -> tuple[str, ...]:
    return tuple(in_metric(note, comparison) for note in _notes_of(comparison))


def _notes_of(comparison: ShownComparison) -> tuple[str, ...]:
    context = comparison.context
    # the batches' shape where the record says it (a comparison made before shapes keeps the report it had)
    shape = "" if context.batch_shape is None else \
        " at " + batch_phrase(context.batch_shape, context.batch_size, context.seq_len, context.padding)
    notes = tuple(note.replace("throughput: examples per second", f"throughput: examples per second{shape}")
                  .replace("on the CPU", f"on the GPU ({context.gpu}), each call synchronised" if context.gpu
                           else "on the CPU") for note in NOTES)
    if not comparison.has_intervals:
        return notes
    seeds = comparison.context.seeds
    speedup = SPEEDUP_NOTES.get(comparison.context.speedup, SPEEDUP_NOTES[None])
    several = (f"{ONE_RUN} one run (the teacher, or a method that neither trains nor samples): its interval counts "
               "the test sentences only; every other row's counts the seeds too.",
               f"params, size, FLOPs, latency, throughput and speed-up: each method's first seed's model (seed "
               f"{seeds[0]}); accuracy and retention: the mean over its seeds.") if len(seeds) > 1 else ()
    return notes + INTERVAL_NOTES + (speedup, *several)


def front_sentences(comparison: ShownComparison) -> list[str]:
    """The front in one sentence, for a comparison without intervals (one with them says it in its verdicts)."""
    front = front_names(comparison)
    if comparison.has_intervals or not front:
        return []
    tie = comparison.context.accuracy_standard_error or 0.0
    test = comparison.dataset.test_size
    ties = (f" Accuracy differences within ±{100 * tie:.1f} points (one standard error of accuracy on "
            f"{test:,} test examples) are ties, and the faster model wins them." if tie and test else "")
    return ["On the accuracy / latency Pareto front (nothing else is both faster and more accurate): "
            + ", ".join(front) + "." + ties]


def rows(comparison: ShownComparison) -> list[Row]:
    """The teacher (the 100% / 1.00x reference) and then each method; with several seeds, an interval over the
    test sentences only (one run) is marked."""
    rows = []
    teacher = comparison.teacher
    several = comparison.has_intervals and len(comparison.context.seeds) > 1

    def marked(cells: list[str], one_run: bool) -> list[str]:
        return [c + ONE_RUN if one_run and i in (3, 4) and "(" in c else c for i, c in enumerate(cells)]

    if teacher is not None:
        retention = 1.0 if teacher.accuracy is not None else None
        speedup = 1.0 if teacher.latency_ms_p50 is not None else None
        name = "?" if teacher.name is None else teacher.name
        rows.append(Row(f"teacher: {name}", None, marked(_number_cells(teacher, retention, speedup), several)))
    for method, anchor in zip(comparison.methods, anchors(comparison.methods)):
        short = method.method + _runtime(method) + (" ⚠" if method.note else "")
        cells = _number_cells(method, method.retention, method.speedup)
        rows.append(Row(display_name(method), anchor, marked(cells, several and len(method.per_seed) == 1), short))
    return rows


def precision_phrase(precision: str) -> str:
    """How a report names what the students trained in: ``auto`` is a choice each training stage measured."""
    return "the faster of fp32 and bf16, timed per stage (auto)" if precision == "auto" else precision


def time_phrase(spent: dict[str, float]) -> str:
    """Where a comparison's time went, in minutes (comparison.json's ``time``)."""
    def minutes(key: str) -> str:
        return f"{spent.get(key, 0.0) / 60:.1f}"

    runs = ", ".join(f"{label} {minutes(f'runs_{phase}_s')}" for phase, label in (
        ("training", "training"), ("making", "quantizing, scoring and factorizing"), ("evaluating", "evaluating"),
        ("timing", "timing against their sources"), ("saving", "saving")) if f"runs_{phase}_s" in spent)
    made = int(spent.get("runs_made", 0))
    return (f"took {minutes('total_s')} min: the teacher {minutes('teacher_s')}, {made} run{'' if made == 1 else 's'} "
            f"made {minutes('runs_s')}" + (f" ({runs})" if runs else "") + f", timing every model "
            f"{minutes('speed_s')}, intervals {minutes('intervals_s')}")


def context_line(comparison: ShownComparison) -> list[str]:
    """Facts about the data and the machine, as short phrases."""
    parts = []
    dataset, context = comparison.dataset, comparison.context
    if dataset.name:
        split = " / ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in dataset.sizes.items())
        fingerprint = f", fingerprint {dataset.fingerprint}" if dataset.fingerprint else ""
        parts.append(f"dataset {dataset.name}" + (f" ({split}{fingerprint})" if split or fingerprint else ""))
    if context.seq_len is not None:
        parts.append(f"sequence length {context.seq_len} tokens")
    if context.gpu:
        parts.append(f"timed on the GPU {context.gpu}")
    if context.cpu:
        parts.append(f"CPU {context.cpu}")
    if context.threads is not None and not context.gpu:
        parts.append(f"{context.threads} threads")
    if context.precision:
        parts.append(f"students trained in {precision_phrase(context.precision)}")
    if context.time.get("total_s"):
        parts.append(time_phrase(context.time))
    if context.other_cpus is not None and context.other_cpus > BUSY_THRESHOLD:
        parts.append(f"other processes kept {context.other_cpus:.1f} CPUs busy while speed was measured (timings "
                     "inflated, speed-ups understated)")
    if context.created:
        parts.append(f"created {context.created}")
    return parts


def title(comparison: ShownComparison) -> str:
    teacher, dataset = comparison.teacher, comparison.dataset.name
    title = "Compression comparison"
    if teacher is not None and teacher.name:
        title += f": {teacher.name}"
    return title + (f" on {dataset}" if dataset else "")


def _also(model: ShownModel, comparison: ShownComparison) -> str | None:
    """The metrics shown beside the comparison's own (``F1 86.1, accuracy 85.0``), seeds averaged."""
    others = [(METRICS[name].title if name in METRICS else name, value)
              for name, value in model.scores.items() if name != comparison.context.metric]
    return ", ".join(f"{title} {100 * value:.1f}" for title, value in others) or None


def details(method: ShownMethod, seeds: int, comparison: ShownComparison) -> list[str]:
    """Kind, backend, dtype, run directory, the metrics shown beside the comparison's and, in a comparison of
    ``seeds`` seeds, each seed's score of a method, where recorded."""
    shown = (("kind", method.kind), ("backend", method.backend), ("dtype", method.dtype), ("run", method.run_dir))
    details = [f"{label} {value}" for label, value in shown if value]
    if also := _also(method, comparison):
        details.append(f"on the test split, {also} (×100)")
    if len(method.per_seed) > 1:
        unit = "%" if comparison.context.metric == "accuracy" else ""
        details.append(in_metric("accuracy", comparison) + " by seed "
                       + ", ".join(f"{r.seed}: {_percent(r.accuracy)}{unit}" for r in method.per_seed))
    elif len(method.per_seed) == 1 and seeds > 1:
        details.append("one run for every seed: nothing in it depends on the seed")
    return details


def explanation(method: ShownMethod) -> str:
    return method.explanation or "No explanation was recorded for this method."


def _change(before: ShownModel, after: ShownModel) -> str:
    """What one step changed, in words: ``size ÷3.9 · latency ÷1.8 · accuracy −0.3 points``."""
    parts = []
    for what, a, b in (("params", before.params, after.params), ("size", before.size_bytes, after.size_bytes),
                       ("latency", before.latency_ms_p50, after.latency_ms_p50)):
        if a and b and abs(a / b - 1) >= 0.005:
            parts.append(f"{what} ÷{a / b:.2f}" if b < a else f"{what} ×{b / a:.2f}")
    a, b = before.accuracy, after.accuracy
    if a is not None and b is not None:
        parts.append(f"accuracy {100 * (b - a):+.1f} points".replace("-", "−"))
    return " · ".join(parts) or "no change"


STEP_HEADERS = ("step", *HEADERS[1:], "what the step changed")


def step_rows(comparison: ShownComparison, pipeline: ShownMethod) -> list[Row]:
    """The teacher, then each step of ``pipeline`` with the change from the step before."""
    teacher = comparison.teacher or NO_NUMBERS
    methods = comparison.methods
    by_name = {m.method: (m, anchor) for m, anchor in zip(methods, anchors(methods))}
    rows = [Row("teacher", None, _number_cells(teacher, 1.0, 1.0) + [""])]
    before: ShownModel = teacher
    for name in pipeline.steps:
        step, anchor = by_name.get(name, (None, None))
        cells = (_number_cells(step, step.retention, step.speedup) if step is not None
                 else _number_cells(NO_NUMBERS, None, None))
        rows.append(Row(name, anchor, cells + [_change(before, step or NO_NUMBERS)]))
        before = step or NO_NUMBERS
    return rows


HELD_OUT_HEADERS = ("method", "recipe", "retention, held-out sentences", "retention, test")


def held_out_section(comparison: ShownComparison) -> Section | None:
    """Each row's recipe and its retention on the held-out training sentences beside test's, where the comparison
    held sentences out (``--hold-out``) or its rows trained with a recipe; None otherwise."""
    methods = [m for m in comparison.methods if m.held_out_retention or m.recipe]
    if not methods:
        return None

    def shown(interval: ShownInterval | None) -> str:
        return MISSING if interval is None else \
            f"{interval.estimate:.1%} ({interval.low:.1%}-{interval.high:.1%})"

    return Section("held-out", headers=list(HELD_OUT_HEADERS), align=["left", "left", "right", "right"],
                   rows=[[m.name, m.recipe or MISSING, shown(m.held_out_retention), shown(m.retention_interval)]
                         for m in methods])


def table(section: Section) -> tuple[list[str], list[list[str]]] | None:
    """A section's headers and rows, each as wide as the widest (a hand-edited row may be short); None when
    it has no table."""
    width = max([len(section.headers), *(len(row) for row in section.rows)])
    if not section.rows or not width:
        return None
    return ([*section.headers, *[""] * (width - len(section.headers))],
            [[*row, *[""] * (width - len(row))] for row in section.rows])
