"""The search's report: search.md and search.html (the answer, its verdict on test, how the search spent its budget,
the frontier it found and the path it took) and search.png (the objective against selection retention, by fidelity)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from compress.paths import atomic_write_bytes, atomic_write_text
from compress.reports.comparison_html import CSS
from compress.search.ledger import DISAGREEMENT, FIDELITIES, CandidateRecord, SearchRecord
from compress.search.resolution import DEVIATION
from compress.task_metrics import METRICS

OBJECTIVE_NAMES = {"latency": "batch-1 latency (ms)", "throughput": "time per example at batch 32 (ms)",
                   "size": "size (MB)"}
FIDELITY_STYLE = {"timed": ("#bbbbbb", "|"), "partial": ("#ff7f0e", "x"), "full": ("#1f77b4", "o"),
                  "final": ("#2ca02c", "*")}


def _objective(record: SearchRecord, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value / 1e6:.2f} MB" if record.minimize == "size" else f"{value:.3f} ms"


def _metric(record: SearchRecord) -> str:
    """The name of what the bar is a share of, as the report's sentences say it (``accuracy``, ``Pearson``)."""
    return METRICS[record.metric].title


def _score(record: SearchRecord, value: float) -> str:
    """A score in the search's metric: a share as a percentage, a correlation (Matthews, Pearson, Spearman) as is."""
    return f"{value:.1%}" if record.metric in ("accuracy", "f1", "macro_f1") else f"{value:.3f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _scores(record: SearchRecord, values: list[float]) -> str:
    return f"{_score(record, values[0])} to {_score(record, values[1])}" if values else "–"


def _interval(values: list[float]) -> str:
    return f"{values[0]:.1%} to {values[1]:.1%}" if values else "–"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def verdict_lines(record: SearchRecord) -> list[str]:
    """The answer in sentences: the chosen model, its test verdict, and how it stands against the reference."""
    if record.chosen is None:
        return [*record.notes] or ["The search has not chosen a model yet."]
    chosen = next((c for c in record.candidates if c.text == record.chosen), None)
    final = next((f for f in record.finals if f.role == "chosen"), None)
    lines = [f"Chosen: {record.chosen} (run directory {record.chosen_run})."]
    if final is not None:
        seeds = len(record.seeds)
        lines.append(f"On test, over {seeds} seed{'s' if seeds > 1 else ''} and every test sentence: "
                     f"{_metric(record)} {_score(record, final.accuracy)} ({_scores(record, final.accuracy_interval)}),"
                     f" retention {final.retention:.1%} "
                     f"of the teacher ({_interval(final.retention_interval)}); {final.speedup:.2f}x the teacher's "
                     f"speed at batch 1 ({final.speedup_spread()}), "
                     f"{final.throughput_speedup:.2f}x its throughput, {final.size_bytes / 1e6:.2f} MB.")
        low, high = final.retention_interval or [final.retention, final.retention]
        bar = record.min_retention
        lines.append(f"Its retention interval lies {'above' if low >= bar else 'below' if high < bar else 'across'} "
                     f"{bar:.0%}: " + ("it keeps the bar beyond doubt." if low >= bar else
                                       "it misses the bar on test." if high < bar else
                                       "on test it cannot be told from the bar."))
    reference = next((f for f in record.finals if f.role == "reference"), None)
    if reference is not None and final is not None:
        speed = record.differences.get(f"speed-up of {record.chosen} over {reference.text}, passes")
        rounds = record.differences.get(f"speed-up of {record.chosen} over {reference.text}")   # before passes
        paired = {f"{record.chosen} - {reference.text}", f"{reference.text} - {record.chosen}"}
        parts = []
        if batches := record.differences.get(f"throughput of {record.chosen} over {reference.text}, passes"):
            parts.append(f"{batches[0]:.2f}x its throughput (passes {batches[1]:.2f}-{batches[2]:.2f}x)")
        if speed:
            parts.append(f"{speed[0]:.2f}x as fast at batch 1 (passes {speed[1]:.2f}-{speed[2]:.2f}x)")
        elif rounds:
            parts.append(f"{rounds[0]:.2f}x as fast at batch 1 (IQR {rounds[1]:.2f}-{rounds[2]:.2f}x, paired rounds)")
        if paired & set(record.differences):
            estimate, low, high = _signed(record, reference.text)
            told = "cannot be told apart" if low <= 0 <= high else "differ beyond the interval"
            parts.append(f"{_metric(record)} {estimate:+.1f} points ({low:+.1f} to {high:+.1f}): {told}")
        lines.append(f"Against {reference.text} (the reference, same seeds): " + "; ".join(parts) + ".")
    if chosen is not None and chosen.held_out_retention is not None:
        trained = sum(1 for c in record.candidates if c.fidelity in ("partial", "full", "final"))
        score = "–" if chosen.held_out_accuracy is None else _score(record, chosen.held_out_accuracy)
        lines.append(f"Its selection {_metric(record)} ({score}, "
                     f"{_percent(chosen.held_out_retention)} of the teacher's) is what chose it among {trained} "
                     "trained candidates, so it is biased upward by the selection; the test interval above is not: it "
                     "comes from seeds and sentences the search never selected on.")
    return lines


def _signed(record: SearchRecord, reference: str) -> tuple[float, float, float]:
    """The chosen model's score minus the reference's, in points, with its interval."""
    found = record.differences.get(f"{record.chosen} - {reference}")
    if found:
        return found[0] * 100, found[1] * 100, found[2] * 100
    other = record.differences[f"{reference} - {record.chosen}"]
    return -other[0] * 100, -other[2] * 100, -other[1] * 100


def time_line(record: SearchRecord) -> str:
    spent = record.spent_s
    accounted = sum(record.seconds.values())
    parts = [f"{name} {_duration(s)}" for name, s in record.seconds.items() if s >= 0.05]
    overhead = max(0.0, spent - accounted)
    reused = (f" Of the budget, {_duration(record.reused_s)} is work reused from another search or comparison "
              "(runs, timings), charged at what it cost when it was done; this search took "
              f"{_duration(spent - record.reused_s)}.") if record.reused_s >= 0.05 else ""
    return (f"Time: {_duration(spent)} of a {_duration(record.budget_s)} budget: " + ", ".join(parts)
            + f"; the search's own work (enumerating, fitting, deciding, writing) {_duration(overhead)} "
              f"({overhead / spent:.1%})." + reused if spent else "Time: none spent yet.")


def resolution_line(record: SearchRecord, sentences: int) -> str:
    """How finely the selection evidence resolves a retention near the bar, in words a user can act on."""
    bar, half = record.min_retention, record.resolution or 0.0
    candidate = f"whose values depart from the teacher's by {DEVIATION:.0%} of their spread" \
        if record.metric in ("pearson", "spearman") else f"that answers otherwise than the teacher on " \
        f"{DISAGREEMENT:.0%} of them"
    return (f"selection evidence: {sentences:,} {record.selection} sentences resolve a retention of the teacher's "
            f"{_metric(record)} near {bar:.0%} to +-{half:.1%} (for a candidate {candidate}): {bar:.0%} cannot be "
            f"told from {bar - half:.1%} or from {bar + half:.1%} there")


def count_line(record: SearchRecord) -> str:
    counts = record.counts()
    return (f"Candidates: {len(record.candidates)} in the space; " +
            ", ".join(f"{counts[name]} {name}" for name in FIDELITIES) +
            " (shape: sized from its shape; timed: its structure timed untrained; partial: trained until it could "
            "not reach the bar; full: trained to the end on one seed; final: every seed, scored on test).")


def summary_lines(record: SearchRecord) -> list[str]:
    """What `compress search` prints."""
    bar = f"{record.bar:.4f}" if record.bar is not None else "?"
    return [f"search ({record.status}): minimize {record.minimize} keeping {record.min_retention:.0%} of the "
            f"teacher's {_metric(record)} on the {record.selection} sentences (the bar: {_metric(record)} {bar}; a "
            f"retention there is resolved to +-{record.resolution or 0:.1%})", *verdict_lines(record),
            count_line(record), time_line(record)]


def frontier(record: SearchRecord) -> list[CandidateRecord]:
    """The candidates trained to the end that no other beats on both the objective and selection retention."""
    done = [c for c in record.candidates if c.fidelity in ("full", "final") and c.objective is not None
            and c.held_out_retention is not None]
    front = [c for c in done if not any(
        o.objective <= c.objective and o.held_out_retention >= c.held_out_retention  # type: ignore[operator]
        and (o.objective, o.held_out_retention) != (c.objective, c.held_out_retention) for o in done)]
    return sorted(front, key=lambda c: c.objective)  # type: ignore[arg-type, return-value]


def path(record: SearchRecord) -> list[CandidateRecord]:
    return sorted((c for c in record.candidates if c.order is not None), key=lambda c: c.order)  # type: ignore


PATH_HEADERS = ("#", "candidate", "objective", "reached", "selection retention", "what happened", "seconds")
FRONT_HEADERS = ("candidate", "objective", "selection retention (95% interval, one seed)", "params (M)", "size (MB)")


def final_headers(record: SearchRecord) -> tuple[str, ...]:
    return ("model", "role", "selection retention (every seed)", f"test {_metric(record)}", "test retention",
            "speed-up (batch 1)", "size (MB)")


def _path_rows(record: SearchRecord) -> list[list[str]]:
    return [[str(c.order), c.text, _objective(record, c.objective), c.fidelity, _percent(c.held_out_retention),
             f"{c.status}: {c.reason}", f"{c.seconds:.0f}"] for c in path(record)]


def _front_rows(record: SearchRecord) -> list[list[str]]:
    return [[c.text, _objective(record, c.objective),
             f"{_percent(c.held_out_retention)} ({_interval(c.held_out_interval or [])})", f"{c.params / 1e6:.2f}",
             f"{c.size_bytes / 1e6:.2f}"] for c in frontier(record)]


def _final_rows(record: SearchRecord) -> list[list[str]]:
    return [[f.text, f.role, f"{f.held_out_retention:.1%} ({_interval(f.held_out_retention_interval)})",
             f"{_score(record, f.accuracy)} ({_scores(record, f.accuracy_interval)})",
             f"{f.retention:.1%} ({_interval(f.retention_interval)})",
             f"{f.speedup:.2f}x ({f.speedup_spread()})", f"{f.size_bytes / 1e6:.2f}"]
            for f in record.finals]


def _sections(record: SearchRecord) -> list[tuple[str, list[str], tuple[str, ...], list[list[str]]]]:
    """(title, paragraphs, table headers, table rows) of each section, shared by the Markdown and the HTML."""
    space = [f"{name}: " + (", ".join(f"{k} {'/'.join(map(str, v))}" for k, v in options.items()) or
                            "no option searched (a step or not)") for name, options in record.space.items()]
    return [
        ("Answer", verdict_lines(record), (), []),
        ("The finals", ["The chosen model, the other candidates kept (best first) and the reference, each trained "
                        "with every seed and compared on test in one process (comparison.md has the whole "
                        "comparison); selection retention over every seed is what chose."], final_headers(record),
         _final_rows(record)),
        ("How the search went", [count_line(record), time_line(record), *record.notes], (), []),
        ("The frontier found", ["Candidates trained to the end that no other beats on both the objective and "
                                "selection retention (selection scores, one seed)."], FRONT_HEADERS,
         _front_rows(record)),
        ("The path", ["Every candidate the search trained, in the order it took them (the fastest first, for a "
                      "speed objective)."], PATH_HEADERS, _path_rows(record)),
        ("The space", space, (), []),
    ]


def _title(record: SearchRecord) -> str:
    return (f"Search: {record.teacher} on {record.dataset}, minimize {record.minimize} keeping "
            f"{record.min_retention:.0%} of the teacher")


def _context(record: SearchRecord) -> str:
    bar = f"{_metric(record)} {record.bar:.4f} on the {record.selection} sentences ({record.min_retention:.0%} of " \
          f"the teacher's {record.teacher_held_out_accuracy:.4f})" if record.bar is not None else "no bar yet"
    made = f"Made by `{record.command}`" if record.command else "Made from Python"
    recipe = f"; every candidate and final trained with the {record.recipe} recipe" if record.recipe else ""
    return (f"{made} on {record.cpu}, {record.threads} threads, sequence length {record.seq_len}, "
            f"{record.created}; status: {record.status}; the bar: {bar}{recipe}.")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(record: SearchRecord) -> str:
    lines = [f"# {_title(record)}", "", _context(record), ""]
    for title, paragraphs, headers, rows in _sections(record):
        lines += [f"## {title}", ""]
        lines += [line for p in paragraphs for line in (f"- {p}" if title == "The space" else p, "")]
        if headers and rows:
            lines.append("| " + " | ".join(headers) + " |")
            lines.append("|" + "|".join(":--" if i < 2 else "--:" for i in range(len(headers))) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            lines.append("")
        if title == "The frontier found":
            lines += ["![objective against selection retention](search.png)", ""]
    return "\n".join(lines).rstrip() + "\n"


def render_html(record: SearchRecord, png: bytes) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(_title(record))}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
             f"<h1>{html.escape(_title(record))}</h1>", f'<p class="context">{html.escape(_context(record))}</p>']
    for title, paragraphs, headers, rows in _sections(record):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in paragraphs]
        if headers and rows:
            head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in headers)
            body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
            parts.append(f'<div class="table-wrap"><table class="search"><thead><tr>{head}</tr></thead>'
                         f"<tbody>{body}</tbody></table></div>")
        if title == "The frontier found":
            data = base64.b64encode(png).decode("ascii")
            parts.append(f'<figure><img src="data:image/png;base64,{data}" alt="The objective against selection '
                         f'retention '
                         f'of every candidate trained, by how far it got."><figcaption>Left is better, up is better; '
                         f"the dashed line is the bar.</figcaption></figure>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def plot_png(record: SearchRecord) -> bytes:
    """The objective against selection retention: every trained candidate by the fidelity it reached, numbered by the
    order the search took them; timed-only candidates as ticks along the bottom."""
    fig = Figure(figsize=(8, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    scale = 1e6 if record.minimize == "size" else 1.0
    trained = [c for c in record.candidates if c.held_out_retention is not None and c.objective is not None]
    floor = min([c.held_out_retention for c in trained] + [record.min_retention]) - 0.01  # type: ignore[type-var]
    timed = [c.objective / scale for c in record.candidates if c.fidelity == "timed" and c.objective is not None]
    if timed:
        color, marker = FIDELITY_STYLE["timed"]
        ax.scatter(timed, [100 * floor] * len(timed), c=color, marker=marker, label="timed, not trained")
    for fidelity in ("partial", "full", "final"):
        shown = [c for c in trained if c.fidelity == fidelity]
        if shown:
            color, marker = FIDELITY_STYLE[fidelity]
            ax.scatter([c.objective / scale for c in shown],
                       [100 * c.held_out_retention for c in shown],  # type: ignore[operator]
                       c=color, marker=marker, s=60, label=fidelity)
    for c in trained:
        if c.order is not None:
            ax.annotate(str(c.order), (c.objective / scale, 100 * c.held_out_retention), fontsize=7,  # type: ignore
                        xytext=(4, 4), textcoords="offset points")
    ax.axhline(100 * record.min_retention, linestyle="--", color="#555555", label="the bar")
    ax.set_xlabel(OBJECTIVE_NAMES[record.minimize])
    ax.set_ylabel("selection retention (% of the teacher)")
    ax.set_title(f"{record.teacher} on {record.dataset}: the path of the search", fontsize=10)
    if trained or timed:
        ax.set_xscale("log")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def write_search_report(record: SearchRecord, directory: Path) -> list[Path]:
    """search.md, search.html and search.png in ``directory`` (each written whole, then renamed)."""
    directory = Path(directory)
    png = plot_png(record)
    atomic_write_bytes(directory / "search.png", png)
    atomic_write_text(directory / "search.md", render_markdown(record))
    atomic_write_text(directory / "search.html", render_html(record, png))
    return [directory / name for name in ("search.md", "search.html", "search.png")]
