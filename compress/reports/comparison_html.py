"""The comparison as one self-contained HTML5 page (comparison.html): :func:`render_html` lays out the rows,
numbers and sentences of :mod:`compress.reports.comparison_rows` as escaped HTML with inline CSS, the plots
embedded as data URIs, no script and no URL; the table is ``#comparison`` and each method's section is the
target of its row's link.
"""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING

from compress.registry import Section
from compress.reports import comparison_rows
from compress.reports.comparison_data import ShownComparison, read_comparison
from compress.reports.comparison_rows import HEADERS, METRICS_HEADING, STEP_HEADERS, Row
from compress.reports.metric_agreement import metrics_section
from compress.reports.plots import steps_stem
from compress.reports.verdicts import PAIR_HEADERS, front_names

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject


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


PLOT_FILES = {"accuracy_vs_latency": "accuracy_vs_latency.png",
              "params_by_component": "params_by_component.png"}


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
    for method, anchor in zip(comparison.methods, comparison_rows.anchors(comparison.methods)):
        details = html.escape(" · ".join(comparison_rows.details(method, len(comparison.context.seeds), comparison)))
        out.append(f'<section class="method" id="{anchor}">'
                   f"<h3>{html.escape(comparison_rows.display_name(method))} "
                   f"<code>{html.escape(method.method)}</code></h3>"
                   + (f'<p class="details">{details}</p>' if details else "")
                   + f"<p>{html.escape(comparison_rows.explanation(method))}</p>"
                   + "".join(_html_section(section) for section in method.sections) + "</section>")
    return out


def _html_section(section: Section) -> str:
    """A method's section: title, paragraphs, and a table whose first column heads its rows."""
    out = f"<h4>{html.escape(section.title)}</h4>" if section.title else ""
    out += "".join(f"<p>{html.escape(line)}</p>" for line in section.lines)
    table = comparison_rows.table(section)
    if table is None:
        return out
    headers, rows = table
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in headers)
    body = "".join(f'<tr><th scope="row">{html.escape(first)}</th>'
                   + "".join(f'<td class="num">{html.escape(c)}</td>' for c in cells) + "</tr>"
                   for first, *cells in rows)
    return (out + f'<table class="{html.escape(section.name)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _html_verdict(comparison: ShownComparison) -> list[str]:
    """The verdict as HTML: the list, the table of neighbours on the front (``table.verdict``), what intervals
    count."""
    parts = comparison_rows.verdict_parts(comparison)
    if parts is None:
        return []
    items, rows, scope = parts
    out = ['<ul class="verdict">' + "".join(f"<li><strong>{html.escape(what)}</strong>: {html.escape(models)}</li>"
                                            for what, models in items) + "</ul>"]
    if rows:
        headers = list(comparison_rows.headers(comparison, PAIR_HEADERS))
        out.append(_html_section(Section("verdict", headers=headers, rows=rows)))
    return out + [f'<p class="scope">{html.escape(scope)}</p>']


def render_html(comparison: JSONObject | ShownComparison, plots: dict[str, bytes]) -> str:
    """A self-contained HTML5 page: table ``#comparison``, embedded plots, one section per method."""
    shown = read_comparison(comparison)
    title = html.escape(comparison_rows.title(shown))
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
        f"<h1>{title}</h1>", f'<p class="context">{html.escape(" · ".join(comparison_rows.context_line(shown)))}</p>',
        *_html_verdict(shown),
        "<h2>Results</h2>", _html_table(comparison_rows.rows(shown), comparison_rows.headers(shown, HEADERS)),
    ]
    if (held_out := comparison_rows.held_out_section(shown)) is not None:
        parts.append(_html_section(held_out))
    parts += [f"<p>{html.escape(sentence)}</p>" for sentence in comparison_rows.front_sentences(shown)]
    parts += [f'<p class="warning">{html.escape(w)}</p>' for w in comparison_rows.warnings(shown)]
    parts.append('<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in comparison_rows.notes(shown))
                 + "</ul>")
    if (metrics := metrics_section(shown)) is not None:
        parts += [f"<h2>{METRICS_HEADING}</h2>", _html_section(metrics)]
    figures = _html_figures(shown, plots)
    if figures:
        parts += ["<h2>Plots</h2>", *figures]
    if shown.pipelines():
        parts.append("<h2>What each step of a pipeline bought</h2>")
        for pipeline in shown.pipelines():
            parts += [f"<h3>{html.escape(pipeline.method)}</h3>",
                      _html_table(comparison_rows.step_rows(shown, pipeline),
                                  comparison_rows.headers(shown, STEP_HEADERS), "steps"),
                      _html_figure(plots.get(steps_stem(pipeline)), f"Bars of parameters, size, latency and accuracy "
                                   f"for the teacher and each step of {pipeline.method}.",
                                   "Left to right: the teacher, then each step; each bar as measured in this "
                                   "comparison.")]
    parts += ["<h2>What each method changed</h2>", *_html_methods(shown), "</body>", "</html>"]
    return "\n".join(parts) + "\n"
