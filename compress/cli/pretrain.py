"""`compress pretrain`: masked-LM pre-training of an ALBERT-shaped encoder with SOP, NSP or no sentence objective."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from compress.cli.common import console, print_json
from compress.pretrain.config import OBJECTIVES, PAPER_TABLE5, DownstreamConfig, PretrainConfig

if TYPE_CHECKING:
    from compress.stats import Interval

D = PretrainConfig()
DD = DownstreamConfig()


def pretrain(
    objective: str = typer.Option(D.objective, "--objective",
                                  help="sop (ALBERT), nsp (BERT), none (masked LM alone), a comma-separated list "
                                       "of them (sop,nsp: the paper's 2 x 2), or all: the three in turn, side by "
                                       "side."),
    corpus: str = typer.Option(D.corpus, "--corpus", help="bbc-news, or a text file of documents separated by "
                               "blank lines."),
    teacher: str = typer.Option(D.teacher, "--teacher", "-t", help="Teacher alias, checkpoint directory or "
                                "hub id: its tokenizer, its shape, and (--init teacher) its weights."),
    init: str = typer.Option(D.init, "--init", help="teacher (as compress run albert builds its student) or "
                             "scratch (random weights)."),
    embedding_size: int = typer.Option(D.embedding_size, "--embedding-size", help="Embedding size E."),
    sharing: str = typer.Option(D.sharing, "--sharing", help="Blocks shared across layers: all, attention, ffn, none."),
    groups: int = typer.Option(D.groups, "--groups", help="Number of layer groups, sharing inside each."),
    max_pairs: int = typer.Option(D.max_pairs, "--max-pairs", help="Training segment pairs, at most."),
    sentences_per_segment: int = typer.Option(D.sentences_per_segment, "--sentences-per-segment",
                                              help="Consecutive sentences in each segment of a pair (longer "
                                                   "segments hold more cues to their order; raise --max-length "
                                                   "with it)."),
    max_length: int = typer.Option(D.max_length, "--max-length", help="Tokens per pair, at most."),
    epochs: int = typer.Option(D.epochs, "--epochs", help="Passes over the pairs."),
    batch_size: int = typer.Option(D.batch_size, "--batch-size", help="Training batch size."),
    lr: float = typer.Option(D.lr, "--lr", help="Peak learning rate (AdamW, linear warm-up and decay)."),
    mlm_weight: float = typer.Option(D.mlm_weight, "--mlm-weight", help="Weight of the masked-LM loss against "
                                     "the sentence loss (at 1, masked LM swamps SOP on a CPU budget)."),
    precision: str = typer.Option(D.precision, "--precision", help="auto (bf16 autocast where the device "
                                  "computes it natively, else fp32), fp32, bf16 or fp16 (CUDA)."),
    seed: int = typer.Option(D.seed, "--seed", help="Seed of the document split, pairs, masks and training."),
    downstream_datasets: str = typer.Option("", "--downstream", help="Comma-separated datasets (mr, bbc-news, a "
                                            "file): each encoder then starts an ALBERT student on each, and its "
                                            "test accuracy joins the table (the downstream half of Table 5)."),
    downstream_epochs: int | None = typer.Option(DD.epochs, "--downstream-epochs", help="Epochs of each downstream "
                                                 "run (default: compress run albert's)."),
    out: str = typer.Option(DD.out, "--out", help="Where the downstream runs are written (and reused)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print the record as JSON."),
) -> None:
    """Pre-train an ALBERT-shaped encoder with masked LM and a sentence objective (cached), and measure it on
    held-out documents: masked-LM accuracy, and its sentence head on SOP and on NSP pairs."""
    started = time.perf_counter()
    objectives = list(OBJECTIVES) if objective == "all" else [o.strip() for o in objective.split(",")]
    configs = [PretrainConfig(objective=name, corpus=corpus, teacher=teacher, init=init,
                              embedding_size=embedding_size, sharing=sharing, groups=groups, max_pairs=max_pairs,
                              sentences_per_segment=sentences_per_segment, max_length=max_length, epochs=epochs,
                              batch_size=batch_size, lr=lr, mlm_weight=mlm_weight, precision=precision, seed=seed)
               for name in objectives]
    later = DownstreamConfig(datasets=tuple(d.strip() for d in downstream_datasets.split(",") if d.strip()),
                             out=out, epochs=downstream_epochs, device=device)
    # The options were checked as the configs were made (no torch yet); what needs the teacher or data is next.
    from compress.pretrain.downstream import check_downstream, downstream, split_fingerprints
    from compress.pretrain.run import check_pretrain, held_out_interval
    from compress.pretrain.run import pretrain as run_pretrain

    for config in configs:  # the check phase: every refusal before anything is fetched or trained
        check_pretrain(config, device)
    check_downstream(configs[0], later)
    splits = split_fingerprints(later)  # a dataset that cannot be read fails before any pre-training
    results = [run_pretrain(config, device=device, show_progress=not as_json) for config in configs]
    tasks = [downstream(config, r, later, splits, show_progress=not as_json) for config, r in zip(configs, results)]
    baseline = downstream(configs[0], None, later, splits, show_progress=not as_json) if later.datasets else []
    if as_json:
        printed = [{**r.record, "directory": str(r.directory), "cache_hit": r.cache_hit, "downstream": rows,
                    "downstream_without_pretraining": baseline, "held_out_intervals": _bounds(r.record)}
                   for r, rows in zip(results, tasks)]
        print_json(printed if len(printed) > 1 else printed[0])
        return
    table = Table(title=f"pre-trained on {escape(corpus)}, measured on held-out documents (accuracy, 95% interval "
                  "over the held-out pairs); ALBERT paper's Table 5 (ALBERT-base, its corpus) beside",
                  title_justify="left")
    for column in ("objective", "masked LM", "NSP", "SOP", "paper: MLM", "NSP", "SOP",
                   *(f"{escape(Path(d).name)}: test (retention)" for d in later.datasets)):
        table.add_column(column, justify="left" if column == "objective" else "right")
    for r, rows in zip(results, tasks):
        held, paper = r.record["held_out"], PAPER_TABLE5[r.record["objective"]]
        table.add_row(r.record["objective"], f"{held['mlm_accuracy']:.1%}",
                      *(_interval_cell(held_out_interval(r.record, task)) for task in ("nsp", "sop")),
                      *(f"{v:.1f}%" for v in paper),
                      *map(_test_cell, rows))
    if baseline:
        table.add_row("not pre-trained", *["-"] * 6, *map(_test_cell, baseline))
    console.print(table)
    used = results[0].record["config"]
    console.print(f"every encoder has E = {embedding_size}, sharing {sharing}, {groups} group(s): "
                  f"{results[0].record['params'] / 1e6:.1f}M parameters; {used['sentences_per_segment']} "
                  f"sentence(s) a segment, {results[0].record['pairs']['train']} training pairs, {used['epochs']} "
                  f"epoch(s), masked LM weighted {used['mlm_weight']:g}, trained in {used['precision']}; "
                  f"{results[0].record['pairs']['held_out_sop']} held-out pairs per task", soft_wrap=True)
    if later.datasets:
        console.print(f"downstream runs (compress run albert --init-from ENCODER, same shape; 'not pre-trained': "
                      f"the student built from the teacher, as compress run albert builds it): {escape(out)}",
                      soft_wrap=True)
    for r in results:
        reused = "cached" if r.cache_hit else f"trained in {r.record['seconds']:.0f} s"
        console.print(f"{r.record['objective']}: {escape(str(r.encoder_dir))} ({reused})", soft_wrap=True)
    console.print(f"this command took {_minutes(time.perf_counter() - started)} in all")
    if any(r.record["objective"] == "sop" and held_out_interval(r.record, "sop").low <= 0.5 for r in results):
        console.print("SOP stayed within its interval of chance. At a CPU budget a strictly shared encoder started "
                      "from the teacher does not learn sentence order (docs/tutorial.md, section 5); the teacher's "
                      "own shape does: --embedding-size H --sharing none (H = 384 for minilm).", soft_wrap=True)
    console.print("start a student from one: compress run albert --init-from ENCODER")


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def _bounds(record: dict) -> dict[str, list[float]]:
    """The 95% interval of each held-out sentence task, as [low, high] (for --json)."""
    from compress.pretrain.run import held_out_interval

    intervals = {task: held_out_interval(record, task) for task in ("nsp", "sop")}
    return {task: [i.low, i.high] for task, i in intervals.items()}


def _interval_cell(interval: Interval) -> str:
    return f"{interval.estimate:.1%} ({interval.low:.1%} to {interval.high:.1%})"


def _test_cell(row: dict) -> str:
    return f"{row['accuracy']:.1%} ({row['retention']:.1%})"
