"""The side-by-side comparison of methods: ``comparison.json`` rendered to markdown, HTML and PNGs.

comparison.json is a :class:`~compress.reports.records.Comparison` (schema version 2; version 1,
without pipelines, is still rendered). This module reads it as JSON, not through the dataclass,
because a comparison may be edited by hand or come from an older compress: any field beyond the
required ones may be missing, and any numeric field may be null (not measured); it shows as "–"
and is left out of the plots.
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
from typing import Any

from compress.bench.contention import BUSY_THRESHOLD
from compress.errors import CompressError
from compress.ownership import mark_comparison, read_marker
from compress.paths import as_ordinary_file, atomic_write_text
from compress.reports.layers_kept import layer_cells
from compress.reports.plots import number, pareto_front, pipelines, render_plots, steps_stem
from compress.reports.records import COMPARISON_SCHEMA, READABLE_COMPARISON_SCHEMAS

REQUIRED_METHOD_FIELDS = ("params", "size_bytes", "flops", "accuracy", "retention", "latency_ms_p50",
                          "throughput", "speedup")
MISSING = "–"

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


# --- validation --------------------------------------------------------------------------------

def _validate_method(index: int, method: Any) -> None:
    if not isinstance(method, dict):
        raise CompressError(f"Entry {index} of the comparison's methods is not an object.")
    name = method.get("method")
    if not isinstance(name, str) or not name:
        raise CompressError(f"Entry {index} of the comparison's methods has no 'method' name.")
    for field in REQUIRED_METHOD_FIELDS:
        if field not in method:
            raise CompressError(f"Method '{name}' in the comparison lacks the required field '{field}' "
                                f"(it may be null, but the key must be present).")
        value = method[field]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise CompressError(f"Method '{name}' has a non-numeric {field} ({value!r}); "
                                f"expected a number or null.")


def validate_comparison(data: dict[str, Any]) -> None:
    """Raise :class:`CompressError` unless ``data`` is a schema-1 comparison with complete methods."""
    if not isinstance(data, dict):
        raise CompressError("The comparison is not a JSON object; expected a dict with schema_version and methods.")
    if "schema_version" not in data:
        raise CompressError(f"The comparison has no schema_version; expected schema_version {COMPARISON_SCHEMA}.")
    version = data["schema_version"]
    if version not in READABLE_COMPARISON_SCHEMAS or isinstance(version, bool):
        raise CompressError(f"The comparison has schema_version {version!r}, but this version of compress "
                            f"reads schema_version {' or '.join(map(str, READABLE_COMPARISON_SCHEMAS))}; run "
                            "`compress compare` again.")
    methods = data.get("methods")
    if not isinstance(methods, list) or not methods:
        raise CompressError("The comparison has no methods; run at least one method before rendering it.")
    for index, method in enumerate(methods):
        _validate_method(index, method)


# --- formatting --------------------------------------------------------------------------------

def _significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant figures (at most 4 decimals), never in scientific notation."""
    if value == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    if decimals > 4 and abs(value) < 0.00005:
        return "<0.0001" if value > 0 else ">-0.0001"
    return f"{value:,.{min(max(decimals, 0), 4)}f}"


def _scaled(divisor: float, value: Any) -> str:
    x = number(value)
    return MISSING if x is None else _significant(x / divisor)


def _percent(value: Any) -> str:
    x = number(value)
    return MISSING if x is None else f"{100 * x:.1f}"


def _throughput(value: Any) -> str:
    x = number(value)
    return MISSING if x is None else (f"{x:,.0f}" if x >= 100 else _significant(x))


def _speedup(value: Any) -> str:
    x = number(value)
    return MISSING if x is None else f"{x:.2f}x"


def _number_cells(model: dict[str, Any], retention: Any, speedup: Any) -> list[str]:
    """Every column after the method name, formatted."""
    return [_scaled(1e6, model.get("params")), _scaled(1e6, model.get("size_bytes")),
            _scaled(1e9, model.get("flops")), _percent(model.get("accuracy")), _percent(retention),
            _scaled(1, model.get("latency_ms_p50")), _throughput(model.get("throughput")),
            _speedup(speedup)]


# --- the rows both renderers share -------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One table row: display name, the anchor of its explanation (None for the teacher), cells."""

    name: str
    anchor: str | None
    cells: list[str]
    short: str | None = None   # the page's name for it (``distilbert+prune+int8``); ``name`` shows on hover


def _anchors(methods: list[dict[str, Any]]) -> list[str]:
    """``method-<name>`` per method, made URL-safe and unique."""
    seen: dict[str, int] = {}
    out = []
    for m in methods:
        slug = "method-" + (re.sub(r"[^a-z0-9_-]+", "-", str(m["method"]).lower()).strip("-") or "x")
        seen[slug] = seen.get(slug, 0) + 1
        out.append(slug if seen[slug] == 1 else f"{slug}-{seen[slug]}")
    return out


def _display_name(method: dict[str, Any]) -> str:
    name = str(method.get("label") or method["method"])
    return name + " ⚠" if method.get("note") else name


def _warnings(comparison: dict[str, Any]) -> list[str]:
    """One line per method this CPU runs badly (marked ⚠ in the table)."""
    return [f"⚠ {m.get('label') or m['method']}: {m['note']}" for m in comparison["methods"] if m.get("note")]


def _tie(comparison: dict[str, Any]) -> float:
    """The accuracy difference (a fraction) under which two models tie on the front."""
    return number(comparison.get("accuracy_standard_error")) or 0.0


def _front_sentence(comparison: dict[str, Any], front: list[str]) -> str:
    tie = _tie(comparison)
    test = ((comparison.get("dataset") or {}).get("sizes") or {}).get("test")
    ties = (f" Accuracy differences within ±{100 * tie:.1f} points (one standard error of accuracy on "
            f"{test:,} test examples) are ties, and the faster model wins them." if tie and test else "")
    return ("On the accuracy / latency Pareto front (nothing else is both faster and more accurate): "
            + ", ".join(front) + "." + ties)


def _teacher(comparison: dict[str, Any]) -> dict[str, Any] | None:
    teacher = comparison.get("teacher")
    return teacher if isinstance(teacher, dict) else None


def _rows(comparison: dict[str, Any]) -> list[Row]:
    """The teacher (the 100% / 1.00x reference) and then each method."""
    rows = []
    teacher = _teacher(comparison)
    if teacher is not None:
        retention = 1.0 if number(teacher.get("accuracy")) is not None else None
        speedup = 1.0 if number(teacher.get("latency_ms_p50")) is not None else None
        rows.append(Row(f"teacher: {teacher.get('name', '?')}", None, _number_cells(teacher, retention, speedup)))
    methods = comparison["methods"]
    for method, anchor in zip(methods, _anchors(methods)):
        short = str(method["method"]) + (" ⚠" if method.get("note") else "")
        rows.append(Row(_display_name(method), anchor,
                        _number_cells(method, method.get("retention"), method.get("speedup")), short))
    return rows


def _context_line(comparison: dict[str, Any]) -> list[str]:
    """Facts about the data and the machine, as short phrases."""
    parts = []
    dataset = comparison.get("dataset") or {}
    if dataset.get("name"):
        sizes = dataset.get("sizes") or {}
        split = " / ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in sizes.items())
        fingerprint = f", fingerprint {dataset['fingerprint']}" if dataset.get("fingerprint") else ""
        parts.append(f"dataset {dataset['name']}" + (f" ({split}{fingerprint})" if split or fingerprint else ""))
    if comparison.get("seq_len") is not None:
        parts.append(f"sequence length {comparison['seq_len']} tokens")
    manifest = comparison.get("manifest") or {}
    cpu = manifest.get("cpu") if isinstance(manifest, dict) else None
    if isinstance(cpu, dict) and cpu.get("model"):
        parts.append(f"CPU {cpu['model']}")
    if comparison.get("threads") is not None:
        parts.append(f"{comparison['threads']} threads")
    other = (comparison.get("speed") or {}).get("other_cpus")
    if other is not None and other > BUSY_THRESHOLD:
        parts.append(f"other processes kept {other:.1f} CPUs busy while speed was measured (timings inflated, "
                     "speed-ups understated)")
    if comparison.get("created"):
        parts.append(f"created {comparison['created']}")
    return parts


def _title(comparison: dict[str, Any]) -> str:
    teacher = _teacher(comparison)
    dataset = (comparison.get("dataset") or {}).get("name")
    title = "Compression comparison"
    if teacher is not None and teacher.get("name"):
        title += f": {teacher['name']}"
    return title + (f" on {dataset}" if dataset else "")


def _details(method: dict[str, Any]) -> list[str]:
    """Kind, backend, dtype and run directory of a method, where recorded."""
    labels = {"kind": "kind", "backend": "backend", "dtype": "dtype", "run_dir": "run"}
    return [f"{label} {method[key]}" for key, label in labels.items() if method.get(key)]


def _explanation(method: dict[str, Any]) -> str:
    return str(method.get("explanation") or "No explanation was recorded for this method.")


LAYER_HEADERS = ("layer of the source", "heads kept", "", "FFN neurons kept", "")


def _layer_rows(method: dict[str, Any]) -> list[list[str]]:
    """The per-layer picture of what pruning kept, as table rows (none when nothing was pruned)."""
    return [[f"{row['layer']}" + (" (dropped)" if row["dropped"] else ""), *layer_cells(row)]
            for row in method.get("layers") or []]


def _front_names(comparison: dict[str, Any]) -> list[str]:
    """Names of the models on the accuracy / latency Pareto front, fastest first."""
    models = ([("teacher", t)] if (t := _teacher(comparison)) else []) + \
        [(str(m["method"]), m) for m in comparison["methods"]]
    measured = [(name, number(m.get("latency_ms_p50")), number(m.get("accuracy"))) for name, m in models]
    measured = [(name, x, y) for name, x, y in measured if x is not None and y is not None]
    front = [measured[i] for i in pareto_front([(x, y) for _, x, y in measured], _tie(comparison))]
    return [name for name, _, _ in sorted(front, key=lambda m: (m[1], m[2]))]


def _change(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What one step changed, in words: ``size ÷3.9 · latency ÷1.8 · accuracy −0.3 points``."""
    parts = []
    for key, what in (("params", "params"), ("size_bytes", "size"), ("latency_ms_p50", "latency")):
        a, b = number(before.get(key)), number(after.get(key))
        if a and b and abs(a / b - 1) >= 0.005:
            parts.append(f"{what} ÷{a / b:.2f}" if b < a else f"{what} ×{b / a:.2f}")
    a, b = number(before.get("accuracy")), number(after.get("accuracy"))
    if a is not None and b is not None:
        parts.append(f"accuracy {100 * (b - a):+.1f} points".replace("-", "−"))
    return " · ".join(parts) or "no change"


STEP_HEADERS = ("step", *HEADERS[1:], "what the step changed")


def _step_rows(comparison: dict[str, Any], pipeline: dict[str, Any]) -> list[Row]:
    """The teacher, then each step of ``pipeline`` with the change from the step before."""
    teacher = _teacher(comparison) or {}
    methods = comparison["methods"]
    by_name = {str(m["method"]): (m, anchor) for m, anchor in zip(methods, _anchors(methods))}
    rows = [Row("teacher", None, _number_cells(teacher, 1.0, 1.0) + [""])]
    before = teacher
    for name in pipeline["steps"]:
        step, anchor = by_name.get(name, ({}, None))
        rows.append(Row(name, anchor, _number_cells(step, step.get("retention"), step.get("speedup"))
                        + [_change(before, step)]))
        before = step
    return rows


# --- markdown ----------------------------------------------------------------------------------

def _md(text: str) -> str:
    """Escape the characters markdown would read as formatting or table syntax."""
    return re.sub(r"([\\`*_\[\]|<>#])", r"\\\1", text)


def _md_table(rows: list[Row], headers: tuple[str, ...] = HEADERS) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|:--" + "|--:" * (len(headers) - 1) + "|"]
    for row in rows:
        name = f"[{_md(row.name)}](#{row.anchor})" if row.anchor else f"**{_md(row.name)}**"
        lines.append("| " + " | ".join([name, *row.cells]) + " |")
    return lines


def render_markdown(comparison: dict[str, Any]) -> str:
    """The comparison as GitHub-flavoured markdown: context, table, notes, one section per method."""
    lines = [f"# {_md(_title(comparison))}", ""]
    if _context_line(comparison):
        lines += [_md(" · ".join(_context_line(comparison))), ""]
    lines += _md_table(_rows(comparison))
    front = _front_names(comparison)
    if front:
        lines += ["", _md(_front_sentence(comparison, front))]
    warnings = _warnings(comparison)
    lines += [""] + [_md(w) + "  " for w in warnings] if warnings else []
    lines += ["", "## How to read the table", ""] + [f"- {_md(note)}" for note in NOTES]
    if pipelines(comparison):
        lines += ["", "## What each step of a pipeline bought", ""]
        for pipeline in pipelines(comparison):
            lines += [f"### {_md(pipeline['method'])}", "", *_md_table(_step_rows(comparison, pipeline), STEP_HEADERS),
                      "", f"![{_md(pipeline['method'])}: each step]({steps_stem(pipeline)}.png)", ""]
    lines += ["", "## What each method changed", ""]
    methods = comparison["methods"]
    for method, anchor in zip(methods, _anchors(methods)):
        lines += [f'<a id="{anchor}"></a>', "", f"### {_md(_display_name(method))} (`{method['method']}`)", ""]
        if _details(method):
            lines += ["_" + _md(" · ".join(_details(method))) + "_", ""]
        lines += [_md(_explanation(method)), ""]
        if _layer_rows(method):
            lines += ["| " + " | ".join(LAYER_HEADERS) + " |", "|:--" + "|--:|:--" * 2 + "|",
                      *("| " + " | ".join(cells) + " |" for cells in _layer_rows(method)), ""]
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


def _alt_texts(comparison: dict[str, Any]) -> dict[str, str]:
    count = len(comparison["methods"])
    front = ", ".join(_front_names(comparison)) or "none"
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


def _html_figures(comparison: dict[str, Any], plots: dict[str, bytes]) -> list[str]:
    alts = _alt_texts(comparison)
    return [_html_figure(plots[name], alts[name], CAPTIONS[name]) for name in PLOT_FILES if name in plots]


def _html_methods(comparison: dict[str, Any]) -> list[str]:
    methods = comparison["methods"]
    out = []
    for method, anchor in zip(methods, _anchors(methods)):
        details = html.escape(" · ".join(_details(method)))
        out.append(f'<section class="method" id="{anchor}">'
                   f"<h3>{html.escape(_display_name(method))} <code>{html.escape(str(method['method']))}</code></h3>"
                   + (f'<p class="details">{details}</p>' if details else "")
                   + f"<p>{html.escape(_explanation(method))}</p>{_html_layers(method)}</section>")
    return out


def _html_layers(method: dict[str, Any]) -> str:
    rows = _layer_rows(method)
    if not rows:
        return ""
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in LAYER_HEADERS)
    body = "".join(f'<tr><th scope="row">{html.escape(first)}</th>'
                   + "".join(f'<td class="num">{html.escape(c)}</td>' for c in cells) + "</tr>"
                   for first, *cells in rows)
    return f'<table class="layers"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render_html(comparison: dict[str, Any], plots: dict[str, bytes]) -> str:
    """A self-contained HTML5 page: table ``#comparison``, embedded plots, one section per method."""
    title = html.escape(_title(comparison))
    front = _front_names(comparison)
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
        f"<h1>{title}</h1>", f'<p class="context">{html.escape(" · ".join(_context_line(comparison)))}</p>',
        "<h2>Results</h2>", _html_table(_rows(comparison)),
    ]
    if front:
        parts.append(f"<p>{html.escape(_front_sentence(comparison, front))}</p>")
    parts += [f'<p class="warning">{html.escape(w)}</p>' for w in _warnings(comparison)]
    parts.append('<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in NOTES) + "</ul>")
    figures = _html_figures(comparison, plots)
    if figures:
        parts += ["<h2>Plots</h2>", *figures]
    if pipelines(comparison):
        parts.append("<h2>What each step of a pipeline bought</h2>")
        for pipeline in pipelines(comparison):
            parts += [f"<h3>{html.escape(pipeline['method'])}</h3>",
                      _html_table(_step_rows(comparison, pipeline), STEP_HEADERS, "steps"),
                      _html_figure(plots.get(steps_stem(pipeline)), f"Bars of parameters, size, latency and accuracy "
                                   f"for the teacher and each step of {pipeline['method']}.",
                                   "Left to right: the teacher, then each step; each bar as measured in this "
                                   "comparison.")]
    parts += ["<h2>What each method changed</h2>", *_html_methods(comparison), "</body>", "</html>"]
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


def write_comparison(comparison: dict[str, Any], directory: Path) -> list[Path]:
    """Validate, then write comparison.json, .md, .html and the PNG plots into ``directory``."""
    validate_comparison(comparison)
    directory = Path(directory)
    plots = render_plots(comparison)  # render everything first: a failure writes nothing
    texts = {
        "comparison.json": json.dumps(comparison, indent=2, ensure_ascii=False) + "\n",
        "comparison.md": render_markdown(comparison),
        "comparison.html": render_html(comparison, plots),
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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CompressError(f"{path} is not valid JSON ({error}); re-run `compress compare` to rewrite it.") from None
    return write_comparison(data, Path(directory))
