"""What a quantization run shows of its own: its lines under `compress run`'s summary and its section of report.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.bench.measurement import Speed, batch_phrase
from compress.methods.quantization.details import QuantDetails

if TYPE_CHECKING:
    from compress.reports.records import RunRecord


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def batched_change(q: QuantDetails) -> str:
    """`` (+x.xx in padded batches of N)``: the accuracy change against fp32 when scored in batches
    (empty for records made before it was measured)."""
    if q.batched_accuracy is None:
        return ""
    return f" ({100 * (q.batched_accuracy - q.fp32_accuracy):+.2f} in padded batches of {q.batched_size})"


def _runtime(q: QuantDetails, backend: str) -> str:
    """The backend, with the precision it computed in where it says (OpenVINO)."""
    precision = q.inference_precision.get(backend)
    return f"{backend}, computing in {precision}" if precision else backend


def _large_batch(speed: Speed) -> str:
    """The large batches' size, and their shape where the measurement says it (runs made before shapes do not)."""
    if "batch_shape" not in speed:
        return f"batch {speed['config']['batch_size']}"
    return batch_phrase(speed["batch_shape"], speed["config"]["batch_size"], speed["seq_len"], speed.get("padding"))


def summary_lines(record: RunRecord) -> list[str]:
    from compress.reports.run_record import primary_name  # the registry loads this module: imported when used

    q: QuantDetails = record.details  # type: ignore[assignment]
    chosen = record.speed["student"]
    lines = [f"batch-1 latency {chosen['latency_ms_p50']:.1f} ms vs fp32 {q.fp32_speed['latency_ms_p50']:.1f} ms "
             f"({q.fp32_speed['latency_ms_p50'] / chosen['latency_ms_p50']:.2f}x); {primary_name(record.teacher)} "
             f"{-q.accuracy_drop_points:+.2f} points vs fp32{batched_change(q)}",
             f"backend {_runtime(q, q.backend)}: {q.chosen_by}"]
    return lines + aware_lines(q) + ([f"note: {q.note}"] if q.note else [])


def aware_lines(q: QuantDetails) -> list[str]:
    """Quantization-aware training: what it ran and how closely the exported model answers as the trained one."""
    if q.aware is None:
        return []
    a = q.aware
    agrees = f"answers as the trained fake-quantized model on {a.agreement:.1%} of dev sentences, " \
        if a.agreement is not None else ""
    return [f"trained {a.epochs} epoch(s) at lr {a.lr:g} with {q.dtype}'s rounding in the forward pass, distilled from "
            f"the fp32 model; the exported model {agrees}its outputs within {a.max_abs_logit_diff:.2e}"]


def report_lines(record: RunRecord) -> list[str]:
    from compress.reports.run_record import primary_name

    q: QuantDetails = record.details  # type: ignore[assignment]
    score = primary_name(record.teacher)   # accuracy, or a regression's Pearson correlation
    source = record.source
    found = [name for name, present in q.cpu.features.items() if present]
    what = "fine-tuned teacher" if source is None or source.kind == "teacher" else f"student of {source.parent}"
    base = q.fp32_speed
    scored = bool(q.dev_accuracy)  # --backend auto chose among several (records before 2026-11 have no dev column)
    lines = [
        "## Quantization",
        "",
        f"Quantized: the {what} (fp32 test {score} {q.fp32_accuracy:.4f}). Backend **{q.backend}**, {q.dtype} "
        f"({q.chosen_by}); test {score}, one sentence at a time, changes by {-q.accuracy_drop_points:+.2f} "
        f"points{batched_change(q)}, " + (f"the model agrees with fp32 on {q.prediction_agreement:.1%} of test "
                                          "predictions, and its logits differ" if record.teacher.accuracy is not None
                                          else "its predicted values differ") +
        f" by at most {q.max_abs_logit_diff:.2e}.",
        "",
        f"CPU: {q.cpu.model} (features: {', '.join(found) or 'none of note'}; torch uses {q.cpu.torch_capability}).",
        "",
        f"Speed at sequence length {base['seq_len']}, {base['threads']} threads (median of "
        f"{base['config']['repeats']} calls at batch 1, {base['config']['batch_repeats']} at "
        f"{_large_batch(base)}):",
        "",
        "| model | latency p50 (ms) | speed-up | throughput (examples/s) | speed-up |"
        + (f" dev {score} |" if scored else ""),
        "|---|---:|---:|---:|---:|" + ("---:|" if scored else ""),
    ]
    dev = {"fp32": q.fp32_dev_accuracy, **q.dev_accuracy}
    for key, name, m in [("fp32", "fp32 (torch)", base),
                         *((b, f"{q.dtype} ({_runtime(q, b)})", m) for b, m in q.measured.items())]:
        cells = [f"{m['latency_ms_p50']:.2f}", f"{base['latency_ms_p50'] / m['latency_ms_p50']:.2f}x",
                 f"{m['throughput']:.0f}", f"{m['throughput'] / base['throughput']:.2f}x"]
        lines.append(_row(name, *cells, *([f"{dev[key]:.2%}"] if scored else [])))
    if q.note:
        lines += ["", f"Note: {q.note}"]
    if q.runtime_note:
        lines += ["", f"{q.runtime_note[0].upper()}{q.runtime_note[1:]}."]
    aware = [f"Quantization-aware: {aware_lines(q)[0]}.", ""] if q.aware else []
    return lines + bits_lines(q) + ["", *aware, f"Quantized model saved in `model/` ({record.student.layout})."]


def bits_lines(q: QuantDetails) -> list[str]:
    """Bits per matrix: every matrix with what 8 and 4 bits cost the loss (least sensitive first) and its width."""
    if not q.bits:
        return []
    four = sum(m.weights for m in q.bits if m.bits == 4)
    total = sum(m.weights for m in q.bits)
    lines = ["", "### Bits per matrix", "",
             f"{sum(m.bits == 4 for m in q.bits)} of {len(q.bits)} matrices in 4 bits ({four / total:.1%} of their "
             f"{total:,} weights), the rest in 8: the expected loss each width adds, 1/2 sum F (w - q(w))^2 with F "
             "the Fisher information's diagonal on training sentences, least extra loss per weight first.", "",
             "| matrix | weights | loss at 8 bits | loss at 4 bits | extra per weight | bits |",
             "|---|---:|---:|---:|---:|---:|"]
    for m in sorted(q.bits, key=lambda m: m.extra_per_weight):
        lines.append(_row(m.name, f"{m.weights:,}", f"{m.loss_int8:.3e}", f"{m.loss_int4:.3e}",
                          f"{m.extra_per_weight:.3e}", str(m.bits)))
    return lines + ["", "![Each matrix's extra loss per weight at 4 bits, in the model's order](bits.png)"]
