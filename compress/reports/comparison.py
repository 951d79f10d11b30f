"""The side-by-side comparison of methods: ``comparison.json`` rendered to markdown, HTML and PNGs.

comparison.json is a :class:`~compress.reports.records.Comparison` (schema version 3; version 1,
without pipelines, and 2, without seeds and intervals, are still rendered; :mod:`compress.reports.verdicts`
says what each may claim). A comparison may be edited by hand or come from an older
compress, so it is not read through that dataclass: :func:`read_comparison` validates it and reads
what the report shows into the frozen dataclasses of :mod:`compress.reports.comparison_data`, where
any field beyond the required ones may be missing and any number None (not measured); it shows as
"–" and is left out of the plots. A method's own part of the report (a pruned model's per-layer
picture, ...) arrives as generic sections: a title, sentences and a table, drawn alike for every method.
The HTML page is self-contained: inline CSS, plots embedded as data URIs, no script, no URL.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compress.bench.contention import BUSY_THRESHOLD
from compress.bench.measurement import batch_phrase
from compress.errors import CompressError
from compress.ownership import mark_comparison, read_marker
from compress.paths import as_ordinary_file, atomic_write_text
from compress.registry import Section
from compress.reports.comparison_data import (
    MISSING,
    REQUIRED_METHOD_FIELDS,
    ShownComparison,
    ShownInterval,
    ShownMethod,
    ShownModel,
    in_metric,
    read_comparison,
    validate_comparison,
)
from compress.reports.metric_agreement import metrics_section
from compress.reports.plots import render_plots, steps_stem
from compress.reports.verdicts import PAIR_HEADERS, RETENTION_TARGET, called, front_names, verdict
from compress.task_metrics import METRICS

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

__all__ = ["HEADERS", "REQUIRED_METHOD_FIELDS", "read_comparison", "render_directory", "render_html",
           "render_markdown", "render_summary", "validate_comparison", "write_comparison"]

PLOT_FILES = {"accuracy_vs_latency": "accuracy_vs_latency.png",
              "params_by_component": "params_by_component.png"}

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


def _anchors(methods: tuple[ShownMethod, ...]) -> list[str]:
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


def _display_name(method: ShownMethod) -> str:
    name = method.name + _runtime(method)
    return name + " ⚠" if method.note else name


def _warnings(comparison: ShownComparison) -> list[str]:
    """One line per method this CPU runs badly (marked ⚠ in the table), then one per method whose runtime was the
    fastest at batch 1 or in large batches but not both."""
    return [f"⚠ {m.name}: {m.note}" for m in comparison.methods if m.note] + \
        [f"{m.name}: {m.runtime_note}." for m in comparison.methods if m.runtime_note]


def _verdict_parts(comparison: ShownComparison) -> tuple[list[tuple[str, str]], list[list[str]], str] | None:
    """The verdict worded in the comparison's metric: the list (claim, models), the rows of the neighbouring
    pairs' table, and what the intervals count; None for a comparison without intervals."""
    found = verdict(comparison)
    if found is None:
        return None
    items = [(in_metric(what, comparison), models) for what, models in found.items()]
    rows = [[in_metric(cell, comparison) for cell in row] for row in found.pair_rows()]
    return items, rows, in_metric(found.scope, comparison)


def _md_verdict(comparison: ShownComparison) -> list[str]:
    """The verdict in markdown: a short list, the table of neighbours on the front, and what the intervals count."""
    parts = _verdict_parts(comparison)
    if parts is None:
        return []
    items, rows, scope = parts
    lines = [f"- **{_md(what)}**: {_md(models)}" for what, models in items] + [""]
    if rows:
        lines += ["| " + " | ".join(_headers(comparison, PAIR_HEADERS)) + " |", "|:--|--:|:--|--:|:--|",
                  *("| " + " | ".join(map(_md, row)) + " |" for row in rows), ""]
    return lines + [f"_{_md(scope)}_", ""]


def _html_verdict(comparison: ShownComparison) -> list[str]:
    """The verdict as HTML: the list, the table of neighbours on the front (``table.verdict``), what intervals
    count."""
    parts = _verdict_parts(comparison)
    if parts is None:
        return []
    items, rows, scope = parts
    out = ['<ul class="verdict">' + "".join(f"<li><strong>{html.escape(what)}</strong>: {html.escape(models)}</li>"
                                            for what, models in items) + "</ul>"]
    if rows:
        out.append(_html_section(Section("verdict", headers=list(_headers(comparison, PAIR_HEADERS)), rows=rows)))
    return out + [f'<p class="scope">{html.escape(scope)}</p>']


def _headers(comparison: ShownComparison, headers: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(in_metric(header, comparison) for header in headers)


def _notes(comparison: ShownComparison) -> tuple[str, ...]:
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


def _front_sentences(comparison: ShownComparison) -> list[str]:
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


def _rows(comparison: ShownComparison) -> list[Row]:
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
    for method, anchor in zip(comparison.methods, _anchors(comparison.methods)):
        short = method.method + _runtime(method) + (" ⚠" if method.note else "")
        cells = _number_cells(method, method.retention, method.speedup)
        rows.append(Row(_display_name(method), anchor, marked(cells, several and len(method.per_seed) == 1), short))
    return rows


def _context_line(comparison: ShownComparison) -> list[str]:
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


def _title(comparison: ShownComparison) -> str:
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


def _details(method: ShownMethod, seeds: int, comparison: ShownComparison) -> list[str]:
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


def _explanation(method: ShownMethod) -> str:
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


def _step_rows(comparison: ShownComparison, pipeline: ShownMethod) -> list[Row]:
    """The teacher, then each step of ``pipeline`` with the change from the step before."""
    teacher = comparison.teacher or NO_NUMBERS
    methods = comparison.methods
    by_name = {m.method: (m, anchor) for m, anchor in zip(methods, _anchors(methods))}
    rows = [Row("teacher", None, _number_cells(teacher, 1.0, 1.0) + [""])]
    before: ShownModel = teacher
    for name in pipeline.steps:
        step, anchor = by_name.get(name, (None, None))
        cells = (_number_cells(step, step.retention, step.speedup) if step is not None
                 else _number_cells(NO_NUMBERS, None, None))
        rows.append(Row(name, anchor, cells + [_change(before, step or NO_NUMBERS)]))
        before = step or NO_NUMBERS
    return rows


def _table(section: Section) -> tuple[list[str], list[list[str]]] | None:
    """A section's headers and rows, each as wide as the widest (a hand-edited row may be short); None when
    it has no table."""
    width = max([len(section.headers), *(len(row) for row in section.rows)])
    if not section.rows or not width:
        return None
    return ([*section.headers, *[""] * (width - len(section.headers))],
            [[*row, *[""] * (width - len(row))] for row in section.rows])


# --- markdown ----------------------------------------------------------------------------------

ALIGNMENT = {"left": ":--", "right": "--:"}


def _md(text: str) -> str:
    """Escape the characters markdown would read as formatting or table syntax."""
    return re.sub(r"([\\`*_\[\]|<>#])", r"\\\1", text)


HELD_OUT_HEADERS = ("method", "recipe", "retention, held-out sentences", "retention, test")


def _held_out_section(comparison: ShownComparison) -> Section | None:
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


def _held_out_lines(comparison: ShownComparison) -> list[str]:
    section = _held_out_section(comparison)
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
    table = _table(section)
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
    lines = [f"# {_md(_title(shown))}", ""]
    if _context_line(shown):
        lines += [_md(" · ".join(_context_line(shown))), ""]
    lines += _md_verdict(shown)
    lines += _md_table(_rows(shown), _headers(shown, HEADERS))
    lines += _held_out_lines(shown)
    lines += [line for sentence in _front_sentences(shown) for line in ("", _md(sentence))]
    warnings = _warnings(shown)
    lines += [""] + [_md(w) + "  " for w in warnings] if warnings else []
    lines += ["", "## How to read the table", ""] + [f"- {_md(note)}" for note in _notes(shown)]
    if (metrics := metrics_section(shown)) is not None:
        lines += ["", f"## {METRICS_HEADING}", "", *_md_section(metrics)]
    if shown.pipelines():
        lines += ["", "## What each step of a pipeline bought", ""]
        for pipeline in shown.pipelines():
            lines += [f"### {_md(pipeline.method)}", "",
                      *_md_table(_step_rows(shown, pipeline), _headers(shown, STEP_HEADERS)),
                      "", f"![{_md(pipeline.method)}: each step]({steps_stem(pipeline)}.png)", ""]
    lines += ["", "## What each method changed", ""]
    for method, anchor in zip(shown.methods, _anchors(shown.methods)):
        lines += [f'<a id="{anchor}"></a>', "", f"### {_md(_display_name(method))} (`{method.method}`)", ""]
        if details := _details(method, len(shown.context.seeds), shown):
            lines += ["_" + _md(" · ".join(details)) + "_", ""]
        lines += [_md(_explanation(method)), ""]
        for section in method.sections:
            lines += _md_section(section)
    return "\n".join(lines).rstrip() + "\n"


def _read_json(path: Path) -> JSONObject:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CompressError(f"{path} is not valid JSON ({error}); re-run `compress compare` to rewrite it.") from None


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


def _cpu_phrase(comparison: JSONObject) -> str:
    """The CPU a comparison ran on, with the vector and matrix units that decide what runs fast there."""
    cpu = (comparison.get("manifest") or {}).get("cpu") or {}
    features = [name for name, present in (cpu.get("features") or {}).items() if present]
    count = f", {cpu['count']} CPUs" if cpu.get("count") else ""
    return f"{cpu.get('model') or 'an unrecorded CPU'}{count}" + (f" ({', '.join(features)})" if features else "")


def render_summary(path: Path, heading: str = "##") -> str:
    """The comparison in ``path`` (a comparison.json) as one section of a results page: its title, what made it
    (the command, the CPU and its units, the date), its table and its Pareto front; no per-method sections."""
    data = _read_json(Path(path))
    shown = read_comparison(data)
    command = data.get("command")
    made = f"Made by `{command}`" if command else "Made by a `compress compare` whose command was not recorded"
    made += f" on {_md(_cpu_phrase(data))}"
    if shown.context.gpu:
        made += f", timed on the GPU {_md(shown.context.gpu)}"
    elif (threads := shown.context.threads) is not None:
        made += f", timed with {threads} thread{'' if threads == 1 else 's'}"
    if shown.context.precision:
        made += f", students trained in {_md(precision_phrase(shown.context.precision))}"
    if shown.context.created:
        made += f", {_md(shown.context.created)}"
    lines = [f"{heading} {_md(_title(shown))}", "", made + f"; rendered from `{Path(path).as_posix()}`.", ""]
    lines += _md_verdict(shown)
    rows = _rows(shown)
    lines += _md_table([Row(row.short or row.name, None, row.cells) for row in rows])
    if any(ONE_RUN in cell for row in rows for cell in row.cells):
        lines += ["", _md(next(note for note in _notes(shown) if note.startswith(ONE_RUN)))]
    if shown.has_intervals:
        lines += ["", _md(INTERVAL_NOTES[1][0].upper() + INTERVAL_NOTES[1][1:])]
    lines += _held_out_lines(shown)
    lines += [line for sentence in _front_sentences(shown) for line in ("", _md(sentence))]
    if (metrics := metrics_section(shown)) is not None:   # where the metrics disagree, the page says so too
        lines += ["", f"{heading}# {METRICS_HEADING}", "", *_md_section(metrics)]
    lines += [_md(w) + "  " for w in _warnings(shown)]
    return "\n".join(lines).rstrip() + "\n"


BRIEF_COLUMNS = (2, 5, 8)   # of HEADERS after the name: size (MB), retention, speed-up


def render_brief(path: Path) -> str:
    """The comparison in ``path`` as a page's one results table (the README's): each model's size, retention and
    speed-up, and the verdict in two sentences; ``render_summary`` has the rest."""
    data = _read_json(Path(path))
    shown = read_comparison(data)
    seeds = len(shown.context.seeds)
    cpu = (data.get("manifest") or {}).get("cpu") or {}
    made = (f"{_md(_title(shown))}: {seeds} seed{'s' if seeds != 1 else ''}, timed on "
            f"{_md(shown.context.gpu or cpu.get('model') or 'an unrecorded CPU')}, "
            f"{_md(str(shown.context.created or '')[:10])} (`{Path(path).as_posix()}`).")
    headers = tuple(_headers(shown, HEADERS)[i] for i in (0, *BRIEF_COLUMNS))
    rows = [Row(row.short or row.name, None, [row.cells[i - 1] for i in BRIEF_COLUMNS]) for row in _rows(shown)]
    lines = [made, "", *_md_table(rows, headers), ""]
    found = verdict(shown)
    if found is not None:
        def count(n: int, verb: str) -> str:   # "none lies", "1 model lies", "3 models lie"
            return f"none {verb}s" if n == 0 else f"{n} model{'s' if n > 1 else ''} {verb}{'' if n > 1 else 's'}"

        target = f"{100 * RETENTION_TARGET:.0f}%"
        keep = ", ".join(name for name, _ in found.keep)
        kept = f"{keep} keep{'s' if len(found.keep) == 1 else ''}" if keep else "No model keeps"
        lines.append(_md(in_metric(
            f"{kept} {target} of the teacher beyond the interval; {count(len(found.unsure), 'hold')} {target} within "
            f"{'its' if len(found.unsure) == 1 else 'their'} interval, and {count(len(found.below), 'lie')} below it. On the front, fastest first: "
            f"{', '.join(map(called, found.front))}.", shown)))
    if any(ONE_RUN in cell for row in rows for cell in row.cells):
        lines += ["", f"{ONE_RUN} one run: its interval counts the test sentences only."]
    lines += _front_sentences(shown)
    return "\n".join(lines).rstrip() + "\n"


# --- HTML --------------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 72rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
h3 { font-size: 1.05rem; margin-bottom: 0.2rem; }
.context { color: #555; margin-top: 0; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.92rem; }
th, td { padding: 0.35rem 0.7rem; border-bottom: 1px solid #e3e3e3; }
th { background: #f4f6f8; text-align: right; vertical-align: bottom; font-weight: 600; }
th:first-child, td:first-child { text-align: left; }
tbody th { font-weight: normal; background: transparent; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafafa; }
tbody tr.teacher, tbody tr.teacher th { background: #eef3f8; font-weight: 600; }
a { color: #1f5fa8; }
figure { margin: 1.5rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9rem; }
.details { color: #666; font-size: 0.88rem; margin: 0; }
ul.notes { color: #444; font-size: 0.9rem; }
ul.verdict { margin: 0.8rem 0; } p.scope { color: #555; font-size: 0.88rem; }
p.warning { color: #8a5300; }
section.method:target { background: #fffbe6; }
"""


def _html_table(rows: list[Row], headers: tuple[str, ...] = HEADERS, css_class: str = "") -> str:
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in headers)
    body = []
    for row in rows:
        # The short name keeps the numbers on screen; the long label shows on hover and in the row's section.
        name = html.escape(row.short or row.name)
        hover = f' title="{html.escape(row.name)}"' if row.short and row.short != row.name else ""
        first = f'<a href="#{row.anchor}"{hover}>{name}</a>' if row.anchor else name
        cells = "".join(f'<td class="num">{html.escape(c)}</td>' for c in row.cells)
        css = "" if row.anchor else ' class="teacher"'
        body.append(f'<tr{css}><th scope="row">{first}</th>{cells}</tr>')
    table = f'class="{css_class}"' if css_class else 'id="comparison"'
    return (f'<div class="table-wrap"><table {table}>\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table></div>")


def _alt_texts(comparison: ShownComparison) -> dict[str, str]:
    count = len(comparison.methods)
    front = ", ".join(front_names(comparison)) or "none"
    return {
        "accuracy_vs_latency": f"Scatter plot of test accuracy (%) against batch-1 latency p50 (ms) for the "
                               f"teacher and {count} methods; bubble area is proportional to parameters and a "
                               f"dashed step line marks the Pareto front ({front}).",
        "params_by_component": f"Horizontal stacked bars of parameters (millions) by component for the teacher "
                               f"and {count} methods.",
    }


CAPTIONS = {
    "accuracy_vs_latency": "Up and to the left is better. Points on the dashed line are Pareto-optimal: "
                           "no other model is both faster and more accurate. Arrows lead from each step of "
                           "a pipeline to the next.",
    "params_by_component": "Where each model's parameters sit. Quantization keeps the count and shrinks "
                           "the bytes per parameter; distillation and sharing change the count itself.",
}


def _html_figure(png: bytes | None, alt: str, caption: str) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _html_figures(comparison: ShownComparison, plots: dict[str, bytes]) -> list[str]:
    alts = _alt_texts(comparison)
    return [_html_figure(plots[name], alts[name], CAPTIONS[name]) for name in PLOT_FILES if name in plots]


def _html_methods(comparison: ShownComparison) -> list[str]:
    out = []
    for method, anchor in zip(comparison.methods, _anchors(comparison.methods)):
        details = html.escape(" · ".join(_details(method, len(comparison.context.seeds), comparison)))
        out.append(f'<section class="method" id="{anchor}">'
                   f"<h3>{html.escape(_display_name(method))} <code>{html.escape(method.method)}</code></h3>"
                   + (f'<p class="details">{details}</p>' if details else "")
                   + f"<p>{html.escape(_explanation(method))}</p>"
                   + "".join(_html_section(section) for section in method.sections) + "</section>")
    return out


def _html_section(section: Section) -> str:
    """A method's section: title, paragraphs, and a table whose first column heads its rows."""
    out = f"<h4>{html.escape(section.title)}</h4>" if section.title else ""
    out += "".join(f"<p>{html.escape(line)}</p>" for line in section.lines)
    table = _table(section)
    if table is None:
        return out
    headers, rows = table
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in headers)
    body = "".join(f'<tr><th scope="row">{html.escape(first)}</th>'
                   + "".join(f'<td class="num">{html.escape(c)}</td>' for c in cells) + "</tr>"
                   for first, *cells in rows)
    return (out + f'<table class="{html.escape(section.name)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def render_html(comparison: JSONObject | ShownComparison, plots: dict[str, bytes]) -> str:
    """A self-contained HTML5 page: table ``#comparison``, embedded plots, one section per method."""
    shown = read_comparison(comparison)
    title = html.escape(_title(shown))
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
        f"<h1>{title}</h1>", f'<p class="context">{html.escape(" · ".join(_context_line(shown)))}</p>',
        *_html_verdict(shown),
        "<h2>Results</h2>", _html_table(_rows(shown), _headers(shown, HEADERS)),
    ]
    if (held_out := _held_out_section(shown)) is not None:
        parts.append(_html_section(held_out))
    parts += [f"<p>{html.escape(sentence)}</p>" for sentence in _front_sentences(shown)]
    parts += [f'<p class="warning">{html.escape(w)}</p>' for w in _warnings(shown)]
    parts.append('<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in _notes(shown)) + "</ul>")
    if (metrics := metrics_section(shown)) is not None:
        parts += [f"<h2>{METRICS_HEADING}</h2>", _html_section(metrics)]
    figures = _html_figures(shown, plots)
    if figures:
        parts += ["<h2>Plots</h2>", *figures]
    if shown.pipelines():
        parts.append("<h2>What each step of a pipeline bought</h2>")
        for pipeline in shown.pipelines():
            parts += [f"<h3>{html.escape(pipeline.method)}</h3>",
                      _html_table(_step_rows(shown, pipeline), _headers(shown, STEP_HEADERS), "steps"),
                      _html_figure(plots.get(steps_stem(pipeline)), f"Bars of parameters, size, latency and accuracy "
                                   f"for the teacher and each step of {pipeline.method}.",
                                   "Left to right: the teacher, then each step; each bar as measured in this "
                                   "comparison.")]
    parts += ["<h2>What each method changed</h2>", *_html_methods(shown), "</body>", "</html>"]
    return "\n".join(parts) + "\n"


# --- files -------------------------------------------------------------------------------------

def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    as_ordinary_file(Path(tmp))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        _atomic_write_bytes(directory / f"{stem}.png", png)
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
    return write_comparison(_read_json(path), Path(directory))
