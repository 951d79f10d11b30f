"""What a low-rank run shows of its own: its summary line, its section of report.md (the rank of every matrix,
layer by layer, and what the weighting kept) and its part of a comparison (the same per-layer picture)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.methods.lowrank.details import LowRankDetails
from compress.models.config import EncoderConfig
from compress.registry import Section
from compress.reports.records import score_text

if TYPE_CHECKING:
    from compress.reports.records import RunRecord

COLUMNS = (("attention", "query", "Q"), ("attention", "key", "K"), ("attention", "value", "V"),
           ("attention", "output", "O"), ("ffn", "intermediate", "FFN in"), ("ffn", "output", "FFN out"))

WHY = {
    "svd": "plain truncated SVD keeps the directions of largest weight energy, whether or not the task uses them",
    "fisher": "Fisher weighting (FWSVD) keeps best the output rows whose weights the task loss is most sensitive "
              "to (their squared gradients, summed over the calibration batches)",
    "activation": "activation-aware factorization (SVD-LLM) keeps best the directions the layer's real inputs "
                  "use: it minimizes the error of W x on the calibration inputs, not of W itself",
}


def _details(record: RunRecord) -> LowRankDetails:
    return record.details  # type: ignore[return-value]


def _rows(record: RunRecord) -> list[list[str]]:
    """One row per layer of the model: each matrix's rank (of its break-even) or "dense"."""
    d = _details(record)
    config = EncoderConfig.from_dict(d.source_config)
    by = {(m.kind, m.block, m.name): m for m in d.matrices}
    rows = []
    for layer in range(config.num_layers):
        blocks = {"attention": config.attention_block_of(layer), "ffn": config.ffn_block_of(layer)}
        cells = []
        for kind, name, _ in COLUMNS:
            m = by.get((kind, blocks[kind], name))
            cells.append("–" if m is None else "dense" if not m.rank else f"{m.rank} ({m.energy:.0%})")
        rows.append([str(layer + 1), *cells])
    return rows


def summary_lines(record: RunRecord) -> list[str]:
    d = _details(record)
    factorized = sum(1 for m in d.matrices if m.rank)
    src, new = record.speed["source"], record.speed["student"]
    return [f"{factorized} of {len(d.matrices)} matrices factorized ({d.options.weighting}, {d.options.allocation}); "
            f"matrix parameters {d.matrix_params_before:,} -> {d.matrix_params_after:,} ({d.kept:.0%} kept); "
            f"batch-1 latency {new['latency_ms_p50']:.1f} ms vs {src['latency_ms_p50']:.1f} ms unfactorized "
            f"({src['latency_ms_p50'] / new['latency_ms_p50']:.2f}x)"]


def report_lines(record: RunRecord) -> list[str]:
    d = _details(record)
    source, o = record.source, d.options
    what = "the fine-tuned teacher" if source.kind == "teacher" else f"the student of `{source.parent}`"
    asked = f"rank {o.rank} for every matrix" if o.rank is not None else \
        f"{o.keep:.0%} of the matrices' parameters, shared out by {o.allocation}"
    lines = [
        "## Low-rank factorization", "",
        f"Factorized: {what} (test {score_text(source)}). Asked for {asked}, weighting {o.weighting}"
        + (f" (calibrated on {o.calibration_examples} training examples)" if o.weighting != "svd" else "")
        + f": the attention and FFN matrices went from {d.matrix_params_before:,} to {d.matrix_params_after:,} "
        f"parameters ({d.kept:.1%} kept).", "",
        *([f"The token embedding is factorized too: {d.embedding_params_before:,} -> {d.embedding_params_after:,} "
           f"parameters (rank {o.embedding_rank}).", ""] if o.embedding_rank else []),
        *([] if o.recovery_epochs else
          ["Training-free (`--recovery-epochs 0`): no recovery was trained; the accuracy is the factorized "
           "model's.", ""]),
        "Rank kept per matrix (and the share of its weighted energy it keeps); dense where two factors would "
        "not be smaller:", "",
        "| layer | " + " | ".join(label for _, _, label in COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
        *("| " + " | ".join(row) + " |" for row in _rows(record)), "",
        f"Why: {WHY[o.weighting]}. A matrix W (out x in) held as up (out x r) @ down (r x in) costs r (out + in) "
        "parameters and multiply-adds per token instead of out x in, so below the break-even rank the model is "
        "smaller and does less arithmetic.", "",
    ]
    return lines


def compared_sections(record: RunRecord) -> list[Section]:
    return [Section("ranks", lines=[f"Rank kept per matrix ({_details(record).options.weighting} weighting; "
                                    "share of weighted energy kept):"],
                    headers=["layer", *(label for _, _, label in COLUMNS)], rows=_rows(record),
                    align=["left", *("right" for _ in COLUMNS)])]
