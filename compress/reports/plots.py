"""The comparison report's plots, rendered to PNG bytes with matplotlib's Agg canvas.

Figures are built with the object-oriented API (``Figure`` + ``FigureCanvasAgg``), never pyplot,
so no GUI backend is touched and no global figure registry keeps them alive. They draw from the
comparison as :func:`~compress.reports.comparison_data.read_comparison` reads it: a number that is None
there (null, NaN, or missing in comparison.json) leaves that model out of the plot that needs it.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

from compress.models.accounting import COMPONENTS
from compress.reports.comparison_data import (
    ShownComparison,
    ShownMethod,
    ShownModel,
    in_metric,
    number,
    read_comparison,
)
from compress.reports.verdicts import front_names

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

DPI = 110
MAX_BUBBLE_AREA = 900.0   # points^2 of the largest model's bubble (about 34 points across)
UNKNOWN_PARAMS_AREA = 40.0
KIND_COLORS = {"distillation": "#1f77b4", "quantization": "#ff7f0e", "pruning": "#9467bd", "pipeline": "#2ca02c"}
STEP_COLOR = KIND_COLORS["pipeline"]
OTHER_COLOR = "#7f7f7f"
TEACHER_COLOR = "#333333"
COMPONENT_COLORS = ("#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f",
                    "#8cd17d", "#b6992d", "#e15759", "#79706e", "#d37295")


__all__ = ["bits_per_matrix_png", "number", "pipelines", "render_plots", "steps_stem"]   # number: read_comparison's


def _to_png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    fig.clear()
    return buffer.getvalue()


def _count_label(n: float) -> str:
    """A parameter count for a legend: 20M, 500k, 300."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:g}{suffix}"
    return f"{n:g}"


def _reference_counts(largest: float) -> list[float]:
    """Up to three round parameter counts (1, 2, 5 x 10^k) spanning about 1/16 .. 1 of ``largest``."""
    nice = sorted(m * 10 ** k for k in range(13) for m in (1, 2, 5))
    picked: list[float] = []
    limit = largest
    for _ in range(3):
        below = [n for n in nice if n <= limit and (not picked or n < picked[-1])]
        if not below:
            break
        picked.append(below[-1])
        limit = picked[-1] / 4
    return picked


# --- accuracy vs latency -----------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """A model on the accuracy / latency plot."""

    name: str
    kind: str | None         # the method's kind, which picks its colour; None for the teacher
    teacher: bool
    x: float                 # batch-1 latency p50, ms
    y: float                 # test accuracy, %
    params: float | None     # the bubble's area; None draws a small cross
    y_range: tuple[float, float] | None = None   # the accuracy's 95% interval, %
    x_range: tuple[float, float] | None = None   # the quartiles of its latency over the rounds, ms


def _scatter_points(comparison: ShownComparison) -> tuple[list[Point], list[str]]:
    """Plottable models (teacher first) and the names of those left out for lack of data."""
    points, missing = [], []
    models: list[tuple[str, ShownModel, str | None]] = [("teacher", t, None) for t in [comparison.teacher] if t]
    models += [(m.method, m, m.kind) for m in comparison.methods]
    for name, m, kind in models:
        if m.latency_ms_p50 is None or m.accuracy is None:
            missing.append(name)
            continue
        interval, rounds = m.accuracy_interval, m.latency_rounds
        # Where latency was timed in rounds (what the speed-ups and the front use), the point is their median and
        # its bar their quartiles: one measurement for the point, its bar and the verdicts.
        latency = float(np.median(rounds)) if rounds else m.latency_ms_p50
        points.append(Point(name, kind, m is comparison.teacher, latency, 100 * m.accuracy, m.params,
                            (100 * interval.low, 100 * interval.high) if interval else None,
                            tuple(np.percentile(rounds, [25, 75])) if rounds else None))
    return points, missing


def _bubble_area(params: float | None, largest: float) -> float:
    if params is None or largest <= 0:
        return UNKNOWN_PARAMS_AREA
    return MAX_BUBBLE_AREA * params / largest


def _overlaps(box: Bbox, others: Sequence[Bbox]) -> bool:
    return any(box.overlaps(o) for o in others)


def _front_steps(ax: Axes, front: list[Point]) -> list[Bbox]:
    """Display-space boxes around the segments of the Pareto step line, so labels avoid it."""
    xy = [ax.transData.transform((p.x, p.y)) for p in front]
    boxes = []
    for (x0, y0), (x1, y1) in itertools.pairwise(xy):
        boxes.append(Bbox.from_extents(x0, y0 - 2, x1, y0 + 2))                       # across
        boxes.append(Bbox.from_extents(x1 - 2, min(y0, y1), x1 + 2, max(y0, y1)))    # up
    return boxes


def _segment_boxes(ax: Axes, segments: list[tuple[tuple[float, float], tuple[float, float]]]) -> list[Bbox]:
    """Small display-space boxes every few pixels along each segment (a pipeline's arrows), so labels avoid
    them without avoiding the whole rectangle a slanted arrow spans."""
    boxes = []
    for start, end in segments:
        (x0, y0), (x1, y1) = ax.transData.transform(start), ax.transData.transform(end)
        steps = max(1, int(math.hypot(x1 - x0, y1 - y0) / 6))
        for k in range(steps + 1):
            x, y = x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps
            boxes.append(Bbox.from_extents(x - 3, y - 3, x + 3, y + 3))
    return boxes


def _place_labels(fig: Figure, ax: Axes, points: list[Point], areas: list[float], front: list[Point],
                  arrows: list[tuple[tuple[float, float], tuple[float, float]]]) -> None:
    """Annotate each point with its name beside its bubble, avoiding labels, bubbles and the front."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    fig.set_layout_engine("none")  # freeze the layout so the positions measured here stay true
    inside = ax.get_window_extent(renderer)
    steps = _front_steps(ax, front) + _segment_boxes(ax, arrows)
    scale = fig.dpi / 72
    bubbles = []
    for p, area in zip(points, areas):
        cx, cy = ax.transData.transform((p.x, p.y))
        r = math.sqrt(area) / 2 * scale
        bubbles.append(Bbox.from_extents(cx - r, cy - r, cx + r, cy + r))
    placed: list[Bbox] = []
    for i, (p, area) in enumerate(zip(points, areas)):
        gap = math.sqrt(area) / 2 + 3
        candidates = [((gap, 0), "left", "center"), ((-gap, 0), "right", "center"),
                      ((0, gap), "center", "bottom"), ((0, -gap), "center", "top"),
                      ((gap * 0.7, gap * 0.7), "left", "bottom"), ((-gap * 0.7, gap * 0.7), "right", "bottom"),
                      ((gap * 0.7, -gap * 0.7), "left", "top"), ((-gap * 0.7, -gap * 0.7), "right", "top")]
        obstacles = placed + bubbles[:i] + bubbles[i + 1:] + steps
        chosen = None
        for offset, ha, va in candidates:
            text = ax.annotate(p.name, (p.x, p.y), xytext=offset, textcoords="offset points",
                               ha=ha, va=va, fontsize=9)
            box = text.get_window_extent(renderer)
            if inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1) \
                    and not _overlaps(box, obstacles):
                chosen = box
                break
            text.remove()
        if chosen is None:  # nowhere free: take the first place and accept the overlap
            offset, ha, va = candidates[0]
            text = ax.annotate(p.name, (p.x, p.y), xytext=offset, textcoords="offset points",
                               ha=ha, va=va, fontsize=9)
            chosen = text.get_window_extent(renderer)
        placed.append(chosen)


def _front_points(comparison: ShownComparison, points: list[Point]) -> list[Point]:
    """The points on the Pareto front (:func:`compress.reports.verdicts.front_names`), fastest first."""
    by_name = {p.name: p for p in points}
    return [by_name[name] for name in front_names(comparison) if name in by_name]


def _draw_front(ax: Axes, points: list[Point], areas: list[float], front: list[Point], by_intervals: bool) -> None:
    """The front as rings joined by a dashed line: a step line (best accuracy reachable within each latency), or,
    for a front judged by intervals (which keeps a slower, less accurate model that is not beaten beyond them),
    a plain line from the fastest to the slowest."""
    xs, ys = [p.x for p in front], [p.y for p in front]
    if by_intervals:
        ax.plot(xs, ys, color="black", linestyle="--", linewidth=1.2, zorder=2)
    else:
        ax.step(xs, ys, where="post", color="black", linestyle="--", linewidth=1.2, zorder=2)
    ax.scatter(xs, ys, s=[areas[points.index(p)] for p in front], facecolors="none", edgecolors="black",
               linewidths=2.0, zorder=4)


def _draw_pipelines(ax: Axes, comparison: ShownComparison, points: list[Point],
                    areas: list[float]) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """An arrow from each later step of a pipeline to it from the step before (``distilbert`` ->
    ``distilbert+int8``; each row draws its own, so a step shared by pipelines gets one), from bubble
    edge to bubble edge; the (start, end) of each arrow drawn."""
    where = {p.name: ((p.x, p.y), math.sqrt(area) / 2) for p, area in zip(points, areas)}
    drawn = []
    for m in comparison.methods:
        steps = m.steps
        start, end = (where.get(steps[-2]), where.get(steps[-1])) if len(steps) > 1 else (None, None)
        if start is not None and end is not None:
            ax.annotate("", xy=end[0], xytext=start[0], zorder=3.5,
                        arrowprops={"arrowstyle": "-|>", "color": STEP_COLOR, "lw": 1.5,
                                    "shrinkA": start[1] + 1, "shrinkB": end[1] + 2})
            drawn.append((start[0], end[0]))
    return drawn


def _legends(ax: Axes, kinds: set[str | None], teacher: bool, largest: float, arrows: bool, front: str) -> None:
    """A legend of what colour and ring mean, and one of reference bubble sizes."""
    handles = [Line2D([], [], marker="D", linestyle="", color=TEACHER_COLOR, label="teacher")] if teacher else []
    for kind, color in KIND_COLORS.items():
        if kind in kinds:
            handles.append(Line2D([], [], marker="o", linestyle="", color=color, label=kind))
    if kinds - set(KIND_COLORS) - {None}:
        handles.append(Line2D([], [], marker="o", linestyle="", color=OTHER_COLOR, label="other"))
    if arrows:
        handles.append(Line2D([], [], color=STEP_COLOR, linewidth=1.3, label="pipeline step"))
    handles.append(Line2D([], [], marker="o", markerfacecolor="none", markeredgecolor="black",
                          markeredgewidth=2, color="black", linestyle="--",
                          label=front))
    first = ax.legend(handles=handles, title="model", loc="upper left", bbox_to_anchor=(1.02, 1.0),
                      fontsize=9, title_fontsize=9, frameon=False)
    ax.add_artist(first)
    if largest <= 0:
        return
    sizes = [ax.scatter([], [], s=_bubble_area(n, largest), color="#bbbbbb", edgecolors="#555555",
                        label=f"{_count_label(n)} params") for n in _reference_counts(largest)]
    ax.legend(handles=sizes, title="bubble area", loc="lower left", bbox_to_anchor=(1.02, 0.0),
              fontsize=9, title_fontsize=9, frameon=False, labelspacing=1.6, borderpad=1.0,
              handletextpad=1.2)


def _title(comparison: ShownComparison, what: str) -> str:
    details, context = [], comparison.context
    if context.seq_len is not None:
        details.append(f"{context.seq_len} tokens")
    if context.threads is not None:
        details.append(f"{context.threads} threads")
    dataset = comparison.dataset.name
    head = f"{what} on {dataset}" if dataset else what
    return f"{head} (batch 1, {', '.join(details)})" if details else head


def accuracy_vs_latency_png(comparison: ShownComparison) -> bytes:
    """Test accuracy (%) against batch-1 latency p50 (ms); bubble area is proportional to parameters."""
    points, missing = _scatter_points(comparison)
    tie = 100 * (comparison.context.accuracy_standard_error or 0.0)
    front = _front_points(comparison, points)
    legend = ("Pareto front\n(beyond the\nintervals)" if comparison.has_intervals else
              "Pareto front" + (f"\n(±{tie:.1f} points\ncount as ties)" if tie > 0 else ""))
    fig = Figure(figsize=(9.0, 5.6), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    largest = max((p.params for p in points if p.params is not None), default=0.0)
    areas = [_bubble_area(p.params, largest) for p in points]
    for p, area in zip(points, areas):
        color = TEACHER_COLOR if p.teacher else KIND_COLORS.get(p.kind, OTHER_COLOR)
        marker = "D" if p.teacher else ("o" if p.params is not None else "x")
        ax.scatter([p.x], [p.y], s=area, marker=marker, color=color, alpha=0.7,
                   edgecolors="white" if marker != "x" else None, linewidths=0.8, zorder=3)
        if p.y_range or p.x_range:  # the accuracy's interval up and down, the latency's quartiles across
            ax.errorbar([p.x], [p.y], fmt="none", ecolor=color, elinewidth=1.2, capsize=3, zorder=2.5,
                        yerr=[[max(p.y - p.y_range[0], 0)], [max(p.y_range[1] - p.y, 0)]] if p.y_range else None,
                        xerr=[[max(p.x - p.x_range[0], 0)], [max(p.x_range[1] - p.x, 0)]] if p.x_range else None)
    arrows = _draw_pipelines(ax, comparison, points, areas)
    if points:
        _draw_front(ax, points, areas, front, comparison.has_intervals)
        ax.margins(x=0.15, y=0.2)
    else:
        ax.text(0.5, 0.5, "no model has both accuracy and latency measured", ha="center",
                va="center", transform=ax.transAxes)
    ax.set_xlabel("batch-1 latency (ms; median of the timing rounds where there are any) — lower is better"
                  if any(p.x_range for p in points) else "batch-1 latency p50 (ms) — lower is better")
    ax.set_ylabel(in_metric("test accuracy (%) — higher is better", comparison))
    ax.set_title(_title(comparison, in_metric("Accuracy vs latency", comparison)))
    ax.grid(True, color="#e5e5e5", linewidth=0.8, zorder=0)
    ax.set_axisbelow(True)
    if points:
        _legends(ax, {p.kind for p in points if not p.teacher}, any(p.teacher for p in points), largest,
                 bool(arrows), legend)
    if missing:
        ax.text(0.0, -0.14, "not plotted (no latency or accuracy measured): " + ", ".join(missing),
                transform=ax.transAxes, fontsize=8, color="#555555", va="top")
    if points:
        ax.set_xlim(ax.get_xlim())
        ax.set_ylim(ax.get_ylim())
        _place_labels(fig, ax, points, areas, front, arrows)
    return _to_png(fig)


# --- parameters by component -------------------------------------------------------------------

def _component_rows(comparison: ShownComparison | JSONObject) -> list[tuple[str, dict[str, float]]]:
    """(bar label, component -> parameters) for each model with a breakdown, teacher first."""
    shown = read_comparison(comparison)
    rows: list[tuple[str, ShownModel]] = []
    if shown.teacher is not None:
        rows.append((f"teacher ({'?' if shown.teacher.name is None else shown.teacher.name})", shown.teacher))
    # The short names the results table shows: long labels squeezed the bars and pushed the title off the figure.
    rows += [(m.method, m) for m in shown.methods]
    return [(label, {key: parts.get(key) or 0.0 for key in COMPONENTS})
            for label, model in rows if (parts := model.params_by_component) is not None]


def params_by_component_png(comparison: ShownComparison) -> bytes:
    """Horizontal stacked bars of parameters (millions) by component, one bar per model."""
    rows = _component_rows(comparison)
    used = [key for key in COMPONENTS if any(parts[key] > 0 for _, parts in rows)]
    fig = Figure(figsize=(9.0, 1.9 + 0.5 * max(len(rows), 1)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    labels = [label for label, _ in rows]
    left = [0.0] * len(rows)
    for index, key in enumerate(used):
        widths = [parts[key] / 1e6 for _, parts in rows]
        ax.barh(labels, widths, left=left, height=0.6, label=COMPONENTS[key],
                color=COMPONENT_COLORS[index % len(COMPONENT_COLORS)], edgecolor="white", linewidth=0.5)
        left = [a + b for a, b in zip(left, widths)]
    for y, total in enumerate(left):
        ax.text(total, y, f"  {total:.1f}M" if total >= 10 else f"  {total:.2f}M", va="center", fontsize=9)
    if rows:
        ax.set_xlim(0, max(left) * 1.15 or 1)
        ax.invert_yaxis()  # teacher on top
    else:
        ax.text(0.5, 0.5, "no model has a parameter breakdown", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("parameters (millions)")
    fig.suptitle("Parameters by component (bar totals include the classifier)")  # centred on the figure
    ax.grid(True, axis="x", color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    if used:
        fig.legend(loc="outside lower center", ncols=3, fontsize=9, frameon=False)
    return _to_png(fig)


# --- what each step of a pipeline changed ------------------------------------------------------

STEP_PANELS: tuple[tuple[Callable[[ShownModel], float | None], float, str], ...] = (
    (lambda m: m.params, 1e6, "parameters (M)"), (lambda m: m.size_bytes, 1e6, "size (MB)"),
    (lambda m: m.latency_ms_p50, 1.0, "latency p50, batch 1 (ms)"), (lambda m: m.accuracy, 0.01, "test accuracy (%)"))
ACCURACY_PANEL = 3   # its axis is cut to the accuracies shown: they differ by a few points of 100


def pipelines(comparison: ShownComparison | JSONObject) -> list[ShownMethod]:
    """The methods that are pipelines (two or more steps), in table order."""
    return read_comparison(comparison).pipelines()


def steps_stem(method: ShownMethod) -> str:
    """The file stem of a pipeline's step plot: ``steps-distilbert-int8``."""
    return "steps-" + (re.sub(r"[^a-z0-9_]+", "-", method.method.lower()).strip("-") or "x")


def pipeline_steps_png(comparison: ShownComparison, pipeline: ShownMethod) -> bytes:
    """Four panels (parameters, size, latency, accuracy), one bar per model from the teacher through
    each step of ``pipeline``, so what each step bought reads from left to right."""
    by_name = {m.method: m for m in comparison.methods}
    blank = ShownModel()   # a step without a row of its own, or no teacher: nothing measured
    names = ["teacher", *pipeline.steps]
    models = [comparison.teacher or blank, *(by_name.get(n, blank) for n in pipeline.steps)]
    labels = ["teacher", *(n if i == 0 else "+" + n.split("+")[-1] for i, n in enumerate(pipeline.steps))]
    fig = Figure(figsize=(9.0, 3.2), dpi=DPI, layout="constrained")
    for index, (value_of, scale, title) in enumerate(STEP_PANELS):
        ax = fig.add_subplot(1, len(STEP_PANELS), index + 1)
        values = [value_of(m) for m in models]
        heights = [v / scale if v is not None else 0.0 for v in values]
        colors = [TEACHER_COLOR] + [STEP_COLOR] * (len(names) - 1)
        ax.bar(range(len(names)), heights, color=colors, alpha=0.8)
        for x, (v, h) in enumerate(zip(values, heights)):
            ax.text(x, h, "–" if v is None else (f"{h:.1f}" if h >= 10 else f"{h:.2f}"), ha="center",
                    va="bottom", fontsize=8)
        ax.set_xticks(range(len(names)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(in_metric(title, comparison), fontsize=9)
        ax.margins(y=0.15)
        if index == ACCURACY_PANEL:
            known = [h for h, v in zip(heights, values) if v is not None]
            if known:
                ax.set_ylim(max(0.0, min(known) - 10), min(100.0, max(known) + 5))
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle(f"{pipeline.method}: what each step changed", fontsize=10)
    return _to_png(fig)


PLOTS = {
    "accuracy_vs_latency": accuracy_vs_latency_png,
    "params_by_component": params_by_component_png,
}


def render_plots(comparison: ShownComparison | JSONObject) -> dict[str, bytes]:
    """Every plot of the report as PNG bytes, keyed by file stem (``accuracy_vs_latency``, ...,
    then ``steps-NAME`` for each pipeline); a comparison.json's dict is read (and validated) first."""
    shown = read_comparison(comparison)
    plots = {name: render(shown) for name, render in PLOTS.items()}
    plots |= {steps_stem(m): pipeline_steps_png(shown, m) for m in shown.pipelines()}
    return plots


BITS_COLORS = {4: "#e15759", 8: "#4e79a7"}


def bits_per_matrix_png(bits: Sequence[Any], title: str) -> bytes:
    """Bits per matrix (``MatrixBits`` records, in the model's order): each matrix's extra expected loss per weight at 4
    bits over 8 (log scale), coloured by the width it got; the allocation moves the lowest bars to 4 bits first."""
    fig = Figure(figsize=(9.0, 2.2 + 0.18 * len(bits)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    extra = [max(m.extra_per_weight, 1e-30) for m in bits]   # log scale: a matrix the loss never notices sits at the floor
    ax.barh([m.name for m in bits], extra, color=[BITS_COLORS[m.bits] for m in bits], height=0.7)
    ax.set_xscale("log")
    ax.invert_yaxis()   # the model's order, embeddings on top
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("extra expected loss per weight at 4 bits over 8: (L4 - L8) / weights, L = 1/2 sum F (w - q(w))^2")
    ax.grid(True, axis="x", color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    fig.suptitle(title)
    fig.legend(handles=[Line2D([], [], color=color, linewidth=6, label=f"{width} bits")
                        for width, color in BITS_COLORS.items()], loc="outside lower center", ncols=2, frameon=False)
    return _to_png(fig)
