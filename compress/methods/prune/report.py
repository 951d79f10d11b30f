"""What a structural-pruning run shows of its own: its summary line, its section of report.md (what each layer
kept, the head-importance curve) and its part of a comparison (the same per-layer picture)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.methods.prune.details import PruneDetails
from compress.methods.prune.layers import layers_kept
from compress.methods.prune.options import PruneOptions, channels_to_keep
from compress.models.config import EncoderConfig
from compress.registry import Section
from compress.reports.layers_kept import layer_cells
from compress.reports.records import score_text

if TYPE_CHECKING:
    from compress.reports.records import RunRecord

LAYER_HEADERS = ["layer of the source", "heads kept", "", "FFN neurons kept", ""]


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _layer_rows(record: RunRecord) -> list[list[str]]:
    return [[f"{row['layer']}" + (" (dropped)" if row["dropped"] else ""), *layer_cells(row)]
            for row in layers_kept(record.details, record.student.config)]  # type: ignore[arg-type]


def summary_lines(record: RunRecord) -> list[str]:
    """What a pruning run kept and what it bought, in one line."""
    p: PruneDetails = record.details  # type: ignore[assignment]
    source = EncoderConfig.from_dict(p.source_config)
    after = EncoderConfig.from_dict(record.student.config)
    src, new = record.speed["source"], record.speed["student"]
    return [f"kept heads {after.total_heads}/{source.total_heads}, FFN neurons {after.total_ffn}/"
            f"{source.total_ffn}, layers {after.num_layers}/{source.num_layers}"
            + (f", width {after.hidden_size}/{source.hidden_size}" if after.hidden_size != source.hidden_size else "")
            + "; batch-1 latency "
            f"{new['latency_ms_p50']:.1f} ms vs {src['latency_ms_p50']:.1f} ms unpruned "
            f"({src['latency_ms_p50'] / new['latency_ms_p50']:.2f}x), throughput at batch "
            f"{new['config']['batch_size']} {new['throughput'] / src['throughput']:.2f}x"]


_CHANNEL_GOES = ("; a removed channel of the hidden size its column of every matrix that reads the residual stream and "
                 "its row of every one that writes it, its entry of every layer norm and its column of the embeddings")


def _width(options: PruneOptions, p: PruneDetails) -> str:
    """What the run asked of the width, where it cut it."""
    source = EncoderConfig.from_dict(p.source_config).hidden_size
    kept = channels_to_keep(options.keep_width, source)
    return "" if kept == source else f", {kept} of the {source} hidden channels"


def report_lines(record: RunRecord) -> list[str]:
    """What pruning removed, layer by layer, and the head-importance curve."""
    p: PruneDetails = record.details  # type: ignore[assignment]
    source, options = record.source, p.options
    what = "the fine-tuned teacher" if source.kind == "teacher" else f"the student of `{source.parent}`"
    lines = [
        "## Pruning", "",
        f"Pruned: {what} (test {score_text(source)}, {source.params:,} parameters). Importance measured "
        f"on {p.steps[0].examples} training examples against the {options.score_against}, "
        f"ranked {options.ranking}ly, cut in {options.steps} step(s); asked to keep {options.keep_heads:.0%} "
        f"of the heads and {options.keep_ffn:.0%} of the FFN neurons{_width(options, p)} and to drop "
        f"{options.drop_layers} layer(s) ({options.layer_order}). Scores of every step: `importance.json`.", "",
        *([] if options.recovery_epochs else
          ["Training-free (`--recovery-epochs 0`): no recovery was trained; the accuracy is the cut model's.", ""]),
        "| layer (of the source) | heads kept | | FFN neurons kept | |",
        "|---|---:|---|---:|---|",
        *(_row(*cells) for cells in _layer_rows(record)),
        "", "A removed head takes its rows of the query, key and value matrices and its columns of the "
        "output matrix with it; a removed neuron its row of the intermediate and column of the output "
        f"matrix{_CHANNEL_GOES if _width(options, p) else ''}. What is left is a smaller dense model: fewer "
        "parameters, bytes, FLOPs and milliseconds.", "",
    ]
    curve = p.head_curve
    if curve:
        lines += _curve_section(
            "Head-importance curve", f"{curve.split.capitalize()} accuracy of the source with a share of its "
            f"{curve.heads} heads removed, least important first and in a random order (seed {curve.seed}):",
            ("heads removed", "importance order", "random order"), [f"{share:.0%}" for share in curve.shares_removed],
            curve.importance, curve.random, "head-importance curve", "head_curve.png")
    widths = p.width_curve
    if widths:
        lines += _curve_section(
            "Width curve", f"{widths.split.capitalize()} accuracy of the source keeping some of its {widths.hidden} "
            "hidden channels, those of the highest first-order Taylor score over its layer norms' outputs and a "
            f"random choice of as many (seed {widths.seed}):", ("channels kept", "by score", "random"),
            [f"{n}" for n in widths.channels], widths.importance, widths.random, "width curve", "width_curve.png")
    return lines


def _curve_section(title: str, sentence: str, headers: tuple[str, str, str], xs: list[str], ranked: list[float],
                   drawn: list[float], alt: str, png: str) -> list[str]:
    """A training-free curve's part of report.md: its title, what it shows, its table and its picture."""
    return [f"### {title} (no recovery)", "", sentence, "", _row(*headers), "|---:|---:|---:|",
            *(_row(x, f"{a:.4f}", f"{b:.4f}") for x, a, b in zip(xs, ranked, drawn, strict=True)),
            "", f"![{alt}]({png})", ""]


def compared_sections(record: RunRecord) -> list[Section]:
    """The per-layer picture of what pruning kept, for the comparison's row."""
    return [Section("layers", headers=LAYER_HEADERS, rows=_layer_rows(record),
                    align=["left", "right", "left", "right", "left"])]
