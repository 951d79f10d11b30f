"""Console objects and output helpers shared by the CLI commands."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import typer
from rich.console import Console

from compress.distill.schedule import DEFAULT_SCHEDULE, SCHEDULES
from compress.errors import CompressError
from compress.train_config import FinetuneConfig

console = Console()
err_console = Console(stderr=True)

# The options `compress compare` and `compress search` share: how speed is measured, the teacher's fine-tuning, where
# and in what precision the runs train.
THREADS = typer.Option(None, help="Threads speed is measured with (default: CPUs, at most 4).")
BATCH_SHAPE = typer.Option("filled", help="How throughput's batches of 32 are shaped: filled (every row the "
                                             "speed sequence length of real tokens), real (test sentences, each "
                                             "batch padded to its longest), padded (to the split's longest) or "
                                             "bucketed (by length, padded to 16, 32, 64, ... tokens).")
SEQ_LEN = typer.Option(None, help="Sequence length of speed inputs (default: 95th percentile).")
REPEATS = typer.Option(30, help="Timed batch-1 calls per model (the median is reported); a third as many, at "
                                 "least 3, at batch 32.")
TEACHER_EPOCHS = typer.Option(None, help="Epochs of teacher fine-tuning (default 3).")
TEACHER_LR = typer.Option(None, help="Learning rate of teacher fine-tuning.")
TEACHER_BATCH_SIZE = typer.Option(None, help="Batch size of teacher fine-tuning (default 32).")
TEACHER_LAYER_DECAY = typer.Option(None, help="Layer-wise lr decay of teacher fine-tuning (default 0.8; 1 for a "
                                              "teacher with random weights, which learns in every layer).")
DEVICE = typer.Option("auto", help="Where the runs train: auto, cpu or cuda.")
TEXT_COLUMN = typer.Option(None, help="Text column of a file or hub dataset (default: text, else sentence).")
TEXT_PAIR_COLUMN = typer.Option(None, help="Second text column (sentence-pair tasks; default: text_pair if present).")
LABEL_COLUMN = typer.Option(None, help="Label column of a file or hub dataset (default: label).")
TASK = typer.Option("auto", "--task", help="What a file's labels are: auto (numbers with fractions are a regression's "
                                             "targets, anything else classes), classification or regression.")
METRIC = typer.Option(None, help="The task's metric: accuracy, macro_f1, f1 (the positive class of two), mcc "
                                 "(Matthews), pearson or spearman (regression); it picks every epoch and is what "
                                 "retention and the intervals are of (default: accuracy, or pearson for a regression).")
SPEED_DEVICE = typer.Option("cpu", help="Where every model is timed and served: cpu, or cuda (a GPU: PyTorch in "
                                        "fp32, bf16 and fp16, float8 where the card has float8 units, and ONNX "
                                        "Runtime where its CUDA provider is installed; the int8 and int4 formats run "
                                        "on the CPU only).")
EXECUTOR = typer.Option("local", help="local (runs one after another here) or ray (one Ray task per run; speed is "
                                      "still measured here, in one process).")
ADDRESS = typer.Option(None, help="Ray cluster to run on, HOST:PORT (default: a local Ray instance).")
CPUS_PER_RUN = typer.Option(1.0, help="CPUs each Ray task declares (and trains with).")
GPUS_PER_RUN = typer.Option(0.0, help="GPUs each Ray task declares.")
PRECISION = typer.Option("auto", help="Precision every run trains in: auto (the default: timed per stage, the "
                                      "fastest of fp32 and bf16 on a CPU that computes bf16 natively, of fp32 (TF32), "
                                      "bf16 and fp16 on a GPU; else fp32), fp32, bf16 (autocast) or fp16 (CUDA only).")

# What every distillation stage learns from and for how long (compress run, compare and search).
RECIPE = typer.Option(DEFAULT_SCHEDULE, help="The recipe, by cost: " + "; ".join(
    f"{s.name}: {s.summary}" for s in SCHEDULES.values()) + ". Each row of a report says which made it.")
TRANSFER_TEXT = typer.Option(None, help="A file of unlabeled in-domain text (one a line, or a table's text column) "
                                        "every student and recovery also learns from, through the teacher's outputs "
                                        "alone.")
COPIES_PER_EPOCH = typer.Option(None, help="Augmented copies each epoch of every stage learns from besides the "
                                           "training sentences, the next ones in turn (with 1: copy 1 in the first "
                                           "epoch, copy 2 in the second, ..., cycling); default: the recipe's "
                                           "(default: 2, albert's 1; fast and thorough: every copy in every epoch).")
WARMUP = typer.Option(None, help="Share of every stage's steps that warm the learning rate up, in [0, 1) (default: "
                                 "the stage's own, 0.1).")
DECAY = typer.Option(None, help="How every stage's learning rate falls after the warm-up: linear, cosine or constant "
                                "(default: the stage's own, linear).")


def print_json(obj: Any) -> None:
    """Print one JSON object on stdout, untouched by rich's markup and wrapping."""
    print(json.dumps(obj, indent=2, sort_keys=False, default=str))


def teacher_finetune(epochs: int | None, lr: float | None, batch_size: int | None,
                     layer_decay: float | None = None) -> FinetuneConfig:
    """The teacher's fine-tuning from --teacher-epochs/--teacher-lr/--teacher-batch-size/--teacher-layer-decay
    (None: the default)."""
    base = FinetuneConfig()
    given = {"epochs": epochs, "lr": lr, "batch_size": batch_size, "layer_decay": layer_decay}
    try:
        return replace(base, train=replace(base.train, **{k: v for k, v in given.items() if v is not None}))
    except ValueError as e:
        raise CompressError(f"teacher fine-tuning: {e}") from None


def parsed_seeds(text: str) -> list[int]:
    """``--seeds`` parsed, after one line on stderr where a count also reads as a seed (``--seeds 13``: 13 seeds)."""
    from rich.markup import escape

    from compress.runs.compare_plan import count_note, parse_seeds

    seeds = parse_seeds(text)
    if (note := count_note(text)) is not None:
        err_console.print(f"[yellow]![/] {escape(note)}", highlight=False, soft_wrap=True)
    return seeds
