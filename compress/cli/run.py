"""`compress run METHOD`: train one compressed student and write its run directory."""

from __future__ import annotations

import typer

from compress.cli.common import console, print_json, teacher_finetune
from compress.data.named import DEFAULT_DATASET
from compress.methods import METHODS
from compress.quantize.artefacts import QUANT_METHODS
from compress.reports.run_record import batched_change
from compress.teachers.registry import DEFAULT_TEACHER


def run(
    method: str = typer.Argument(..., help=f"One of {', '.join([*METHODS, *QUANT_METHODS])}."),
    teacher: str = typer.Option(DEFAULT_TEACHER, "--teacher", "-t", help="Teacher alias, checkpoint directory or hub id."),
    dataset: str = typer.Option(DEFAULT_DATASET, "--dataset", "-d", help="Dataset name, file, or hf:NAME[:CONFIG]."),
    text_column: str | None = typer.Option(None, help="Text column of a file dataset."),
    text_pair_column: str | None = typer.Option(None, help="Second text column (sentence-pair tasks)."),
    label_column: str | None = typer.Option(None, help="Label column of a file dataset."),
    epochs: int | None = typer.Option(None, help="Epochs of every training stage (default: the method's)."),
    batch_size: int = typer.Option(32, help="Training batch size."),
    lr: float | None = typer.Option(None, help="Learning rate of every stage (default: the method's)."),
    seed: int = typer.Option(13, help="Seed: same seed, same metrics."),
    layer_map: str | None = typer.Option(
        None, help="Student-teacher layer pairing: uniform, last, every_other, or teacher layers like 2,4,6."),
    patience: int | None = typer.Option(None, help="Stop a stage after this many epochs without a better dev score."),
    out: str | None = typer.Option(None, help="Run directory (default: runs/METHOD-DATASET-TIME)."),
    overwrite: bool = typer.Option(False, help="Replace an existing --out directory."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    teacher_epochs: int | None = typer.Option(None, help="Epochs of teacher fine-tuning (default 3)."),
    teacher_lr: float | None = typer.Option(None, help="Learning rate of teacher fine-tuning."),
    teacher_batch_size: int | None = typer.Option(None, help="Batch size of teacher fine-tuning (default 32)."),
    embedding_size: int | None = typer.Option(None, help="albert: embedding size E (default 128)."),
    sharing: str | None = typer.Option(None, help="albert: all, attention, ffn or none (default all)."),
    groups: int | None = typer.Option(None, help="albert: number of layer groups G (default 1)."),
    no_dropout: bool = typer.Option(False, "--no-dropout", help="albert: remove dropout, as the ALBERT paper does."),
    hidden_loss: bool = typer.Option(False, "--hidden-loss", help="albert: also distil the hidden states."),
    layers: int | None = typer.Option(None, help="distilbert / tinybert: student layers."),
    hidden_size: int | None = typer.Option(None, help="tinybert: student hidden size (default 312)."),
    heads: int | None = typer.Option(None, help="tinybert: student attention heads (default 12)."),
    ffn_size: int | None = typer.Option(None, help="tinybert: student FFN size (default 1200)."),
    general_distillation: bool = typer.Option(
        False, "--general-distillation", help="tinybert: distil the pre-trained teacher on raw text first (cached)."),
    init_from: str | None = typer.Option(None, help="tinybert: start from this student checkpoint directory."),
    augment: int | None = typer.Option(
        None, "--augment", help="tinybert: augmented copies per training sentence (paper: 20; default 0)."),
    target: str = typer.Option(
        "teacher", help="int8/bf16/onnx/...: what to quantize, 'teacher' or an earlier run directory."),
    backend: str = typer.Option(
        "auto", help="int8/bf16/onnx/...: torch, onnxruntime, or auto (measure and keep the fastest)."),
    then: str | None = typer.Option(None, help="After a distillation run, quantize its student: int8, bf16, ..."),
    threads: int | None = typer.Option(None, help="Threads speed is measured with (default: CPUs, at most 4)."),
    as_json: bool = typer.Option(False, "--json", help="Print metrics.json instead of a summary."),
) -> None:
    """Train a student (albert, distilbert, tinybert) or quantize a model (int8, static-int8, bf16, fp16, onnx),
    evaluate it against the fine-tuned teacher, and write a run directory."""
    from compress.runner import RunConfig
    from compress.runner import run as run_method

    given = {"embedding_size": embedding_size, "sharing": sharing, "groups": groups,
             "dropout": False if no_dropout else None, "hidden_loss": True if hidden_loss else None,
             "num_layers": layers, "hidden_size": hidden_size, "num_heads": heads, "ffn_size": ffn_size,
             "general_distillation": True if general_distillation else None, "init_from": init_from,
             "augment_copies": augment}
    options = {k: v for k, v in given.items() if v is not None}
    config = RunConfig(
        method=method, teacher=teacher, dataset=dataset, text_column=text_column,
        text_pair_column=text_pair_column, label_column=label_column, options=options, epochs=epochs,
        lr=lr, batch_size=batch_size, seed=seed, layer_map=layer_map, patience=patience, device=device, out=out,
        overwrite=overwrite, target=target, backend=backend, then=then, threads=threads,
        teacher_finetune=teacher_finetune(teacher_epochs, teacher_lr, teacher_batch_size),
    )
    result = run_method(config, show_progress=not as_json)
    runs = [r for r in (result, result.chained) if r is not None]
    if as_json:
        printed = {**result.metrics, "directory": str(result.directory)}
        if result.chained:
            printed["chained"] = {**result.chained.metrics, "directory": str(result.chained.directory)}
        print_json(printed)
        return
    for r in runs:
        _summary(r.metrics, r.directory)


def _summary(m: dict, directory) -> None:
    t, s = m["teacher"], m["student"]
    what = f"{s['dtype']} on {s['backend']}" if "quantization" in m else f"{s['params'] / 1e6:.1f}M params"
    console.print(
        f"[bold]{m['method']}[/]: teacher {t['params'] / 1e6:.1f}M params, {t['size_bytes'] / 1e6:.1f} MB, test "
        f"accuracy {t['accuracy']:.4f}; student {what}, {s['size_bytes'] / 1e6:.1f} MB "
        f"({m['ratios']['size_bytes']:.2f}x smaller), test accuracy {s['accuracy']:.4f}; "
        f"retention [bold]{m['retention']:.1%}[/]"
    )
    if "quantization" in m:
        q = m["quantization"]
        chosen = m["speed"]["student"]
        console.print(f"  batch-1 latency {chosen['latency_ms_p50']:.1f} ms vs fp32 {q['fp32_speed']['latency_ms_p50']:.1f}"
                      f" ms ({q['fp32_speed']['latency_ms_p50'] / chosen['latency_ms_p50']:.2f}x); "
                      f"accuracy {-q['accuracy_drop_points']:+.2f} points vs fp32{batched_change(q)}")
        console.print(f"  backend {q['backend']}: {q['chosen_by']}")
        if q["note"]:
            console.print(f"  [yellow]note:[/] {q['note']}")
    console.print(f"run directory: {directory} (report.md, metrics.json)")
