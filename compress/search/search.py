"""`compress search`: the candidate that minimizes an objective (batch-1 latency, batch throughput or size) among those
that keep ``min_retention`` of the teacher's score on held-out sentences, then its verdict on test with every seed.

The held-out sentences are training examples the task holds out (``--select-on held-out``, the default: no model
trains on them or picks an epoch on them), or dev (``--select-on dev``); search.json's ``held_out_*`` numbers are on
them. The schedule (multi-fidelity, like successive halving, but against a bar: the objective is cheap to measure and
the constraint costs training, so it is the constraint that is evaluated in stages; :mod:`.walk`):

1. **shape** (free): every candidate of the space (:mod:`.space`) gets parameters, bytes and FLOPs from its shape.
2. **timed** (seconds each, speed objectives only): candidates are taken in order of their objective, measured on
   their untrained structure where not yet measured (:mod:`.probe`); until then, a candidate's place in the order
   is a fit of the speed of its kind (how its last step runs) against FLOPs, over the structures measured so far
   (the least and the most costly of each kind are measured first).
3. **trained** (minutes): the best candidate by its measured objective is trained on the first seed, step by step
   (a step another candidate shares is trained once: the run cache), every stage stopped as soon as its dev
   score cannot come near the bar any more (``partial``); each step's held-out retention is screened with its paired
   interval (:mod:`.screen`): one whose interval lies below the bar missed it, one whose interval reaches it is kept.
   A candidate is ruled out without training when a step of it, or a candidate it compresses at least as much as
   (:func:`.space.compresses_at_least`), missed the bar, and once ``finalists`` candidates whose held-out retention
   met the bar on its mean are better than everything left (one kept only because its interval reaches the bar does
   not end the walk: it goes on to less compressed candidates until enough meet it, or the budget ends). A
   candidate is not started when the budget left (:mod:`.clock`) cannot hold its training (estimated from training
   steps timed here, then from this search's own runs) and the finals (the reserve, :mod:`.costs`); speed probes
   take at most a tenth of the budget, past which a trained candidate's structure is still timed (once, after its
   training).
4. **final** (:mod:`.finals`): the best kept candidates (those that met the bar on the mean first) and a reference
   pipeline are trained with every seed and compared on test, in one process, by
   :func:`compress.runs.compare.compare` into the same directory (paired intervals of accuracy and retention,
   speed-ups with their spread); the chosen one is the best, by that measurement, of those whose held-out retention
   over every seed meets the bar (where none does, of those whose interval still reaches it, said so).

Held-out sentences select, test judges: the chosen model's held-out score is biased upward by having been selected
on it (the report says so); its test interval in the finals is not.

The search directory is a comparison directory (``runs/seed-S/NAME``): `compress compare --out DIR` and a later
search reuse every run it trained, and it reuses theirs. Ctrl-C keeps every finished run and search.json; the
same command resumes (runs are reused, the budget counts the time already spent); structures' timings are kept
under the cache root and reused by every search of the same task on the same machine (:class:`.probe.Probes`).
What a search reuses from another directory (a run from the run store, a probe) is charged to its budget at what it
cost when it was made: the same search run again with another ``--out`` spends its budget as the first did, so it
makes the same decisions and gives the same answer, in the time reusing takes; a larger ``--budget`` replays that
much and goes on from there.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from compress.bench.batch_shapes import check_batch_shape
from compress.bench.inputs import check_seq_len, speed_seq_len
from compress.bench.machine import cpu_model
from compress.bench.timing import default_threads
from compress.data.batching import choose_max_length, tokenize_task
from compress.data.load import check_dataset, dataset_args, load_task
from compress.distill.schedule import DEFAULT_SCHEDULE, epoch_examples, recipe_does
from compress.errors import CompressError
from compress.models.config import EncoderConfig
from compress.ownership import foreign, mark_comparison
from compress.paths import locked
from compress.registry import Context, StudentMethod
from compress.registry.pipeline import for_throughput, parse
from compress.runs.compare_plan import PRUNING_PIPELINE, CompareConfig, plan_runs, run_config_of
from compress.runs.config import check_copies_chosen
from compress.runs.distillation import check_student
from compress.runs.executors import Executor
from compress.search.clock import Clock, format_seconds
from compress.search.costs import EVAL_SHARE, least_training, prime_steps
from compress.search.finals import run_finals
from compress.search.ledger import SearchRecord, read_record
from compress.search.probe import OBJECTIVES, Probes
from compress.search.report import write_search_report
from compress.search.space import Space, candidates, declared, from_file, narrowed
from compress.search.walk import Walk
from compress.task_metrics import TaskMetric, resolve_metric
from compress.teachers.finetune import FinetuneConfig, finetuned_here
from compress.teachers.registry import DEFAULT_TEACHER, load_tokenizer, teacher_config
from compress.train_config import DEFAULT_SEED
from compress.training import resolve_precision

FINALISTS = 2
SELECT_ON = ("held-out", "dev")


@dataclass
class SearchConfig:
    """One `compress search`: the question (objective, bar), the space, the budget, and how runs train."""

    minimize: str = "latency"
    min_retention: float = 0.97
    select_on: str = "held-out"          # held-out: training sentences no model trains on or picks an epoch on; dev
    selection_size: int | None = None    # sentences held out (default: twice the dev split)
    budget_s: float = 90 * 60
    seeds: list[int] = field(default_factory=lambda: [DEFAULT_SEED, DEFAULT_SEED + 1, DEFAULT_SEED + 2])
    methods: list[str] | None = None     # keep only these methods of the space
    space: str | None = None             # a space file (TOML or JSON)
    against: str | None = PRUNING_PIPELINE   # the reference the finals compare the chosen model with
    finalists: int = FINALISTS
    teacher: str = DEFAULT_TEACHER
    dataset: str = "mr"
    text_column: str | None = None       # how a file's or hub dataset's columns are read (compress.data.load)
    text_pair_column: str | None = None
    label_column: str | None = None
    task: str = "auto"
    dedupe: bool = False
    metric: str | None = None            # what the bar is a share of (None: the task's default, accuracy or Pearson)
    out: str | None = None
    batch_size: int = 32
    device: str = "auto"
    precision: str = "auto"
    recipe: str = DEFAULT_SCHEDULE        # what every candidate's and finalist's distillation learns from, how long
    copies_per_epoch: int | None = None   # augmented copies each epoch of their stages learns from (None: the recipe's)
    threads: int | None = None
    seq_len: int | None = None
    repeats: int = 30
    batch_shape: str = "filled"          # how throughput's batches are shaped (compress.bench.batch_shapes)
    teacher_finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    executor: Executor = field(default_factory=Executor)   # where candidates and finals train (here, or Ray tasks)
    command: str | None = None

    def __post_init__(self) -> None:
        if self.minimize not in OBJECTIVES:
            raise CompressError(f"--minimize takes {', '.join(OBJECTIVES)}; {self.minimize!r} is not an objective "
                                "compress can measure.")
        if not 0 < self.min_retention <= 1:
            raise CompressError(f"--min-retention is a share of the teacher's score in (0, 1], got "
                                f"{self.min_retention}.")
        check_batch_shape(self.batch_shape)
        if self.select_on not in SELECT_ON:
            raise CompressError(f"--select-on takes {' or '.join(SELECT_ON)}, not {self.select_on!r}.")
        if self.selection_size is not None and (self.selection_size < 1 or self.select_on != "held-out"):
            raise CompressError("--selection-size is a number of training sentences (1 or more) to hold out, with "
                                "--select-on held-out.")
        if not self.budget_s > 0:
            raise CompressError("--budget must be a positive time, such as 90m.")
        if self.finalists < 1:
            raise CompressError(f"--finalists must be 1 or more, got {self.finalists}.")
        check_copies_chosen(self.recipe, self.copies_per_epoch, [])   # the recipe's copies: what candidates learn from


def search_space(config: SearchConfig, teacher: EncoderConfig) -> Space:
    """The space the config asks for: a file's narrowed to ``--methods``, or the declared one of ``--methods`` (of the
    methods searched for the objective by default where none are named)."""
    if config.space:
        space = from_file(Path(config.space), teacher)
        return narrowed(space, config.methods) if config.methods else space
    return declared(teacher, config.methods, config.minimize)


def check_out(out: Path) -> None:
    """Refuse an ``out`` compress may not write in, before any work: a file, or a directory that is not a
    comparison or search of ours."""
    if out.exists() and not out.is_dir():
        raise CompressError(f"--out {out} is a file, not a directory; choose another --out.")
    if out.is_dir() and any(out.iterdir()) and (reason := foreign(out, "comparison")) is not None:
        raise CompressError(f"--out {out.resolve()} is not a search or comparison compress wrote: it {reason}; choose "
                            "a new or empty directory.")


SEARCH_FILES = ["search.json", "search.md", "search.html", "search.png", "probes.json", "runs"]


def search(config: SearchConfig, progress: Callable[[str], None] | None = None,
           show_progress: bool = True) -> tuple[Path, SearchRecord]:
    """Search (see the module docstring); return the search directory and its record (search.json)."""
    start = time.perf_counter()
    say = progress or (lambda message: None)
    teacher_shape = teacher_config(config.teacher)
    check_seq_len(config.seq_len, teacher_shape.max_positions)
    space = search_space(config, teacher_shape)
    if config.minimize == "throughput" and config.against:   # the reference runs as fast as the candidates can
        config = replace(config, against=str(for_throughput(parse(config.against), config.batch_shape)))
    compare_config = _compare_config(config, [config.against] if config.against else [])
    if config.against:
        plan_runs([config.against])   # a reference that is not a pipeline fails here
    check_dataset(**dataset_args(config))
    out = Path(config.out or f"runs/search-{Path(config.teacher).name}-{Path(config.dataset).stem}")
    check_out(out)
    task = load_task(**dataset_args(config))
    metric = resolve_metric(config.metric, regression=task.regression, classes=task.num_labels)   # before any work
    held_out = 0 if config.select_on == "dev" else config.selection_size or 2 * len(task.splits["dev"])
    task = task.hold_out(held_out)   # a size that would leave a label without training sentences fails here
    compare_config = replace(compare_config, hold_out=held_out)
    tokenizer = load_tokenizer(config.teacher)
    positions = teacher_shape.max_positions
    max_length = config.teacher_finetune.max_length or min(choose_max_length(task, tokenizer), positions)
    data = tokenize_task(task, tokenizer, max_length=max_length)
    seq_len = config.seq_len or speed_seq_len(data)
    threads = config.threads or default_threads()
    context = Context(data=data, task=task, tokenizer=tokenizer)
    found = candidates(space, teacher_shape.replace(num_labels=task.num_labels), context)
    if config.minimize == "throughput":   # each runs on the runtime fastest in the batches it is searched for
        found = [replace(c, pipeline=for_throughput(c.pipeline, config.batch_shape)) for c in found]
    if not found:
        raise CompressError("the space holds no candidate (no method, or no pipeline its steps allow).")
    for planned in plan_runs(sorted({str(c.pipeline.steps[0]) for c in found})):   # every student's own checks
        if isinstance(planned.method, StudentMethod):
            check_student(run_config_of(compare_config, planned, "teacher"), planned.method)
    probes = Probes(data, seq_len, threads, config.repeats, config.batch_shape)
    precision = resolve_precision(config.precision, config.device)
    teacher = teacher_shape.replace(num_labels=task.num_labels)
    primed_at = time.perf_counter()
    kinds = prime_steps(found, teacher, probes, precision, config.batch_size)
    primed_s = time.perf_counter() - primed_at
    least = least_training(found, teacher, probes, precision, config.batch_size, partial(
        epoch_examples, config.recipe, len(task.splits["train"]), config.copies_per_epoch))
    finetune = config.teacher_finetune.train
    teacher_s = 0.0 if finetuned_here(config.teacher, task, config.teacher_finetune, config.metric) else \
        probes.finetune_seconds(teacher, finetune.batch_size) * finetune.epochs * EVAL_SHARE * \
        math.ceil(len(task.splits["train"]) / finetune.batch_size)
    if least is not None and least[0] + teacher_s > config.budget_s:
        first = f"fine-tuning the teacher (about {format_seconds(teacher_s)}: it is not cached yet) and " \
            if teacher_s else ""
        raise CompressError(f"--budget {format_seconds(config.budget_s)} cannot hold {first}one full training of the "
                            f"cheapest candidate that trains ({least[1]}: about {format_seconds(least[0])}), from "
                            f"training steps timed here; give at least --budget "
                            f"{math.ceil((least[0] + teacher_s) / 60)}m.")
    say(f"training steps of {kinds} kinds timed (the fewest, median and most FLOPs of each; the others interpolated)")
    with locked(out, wait=False, what=f"the search in {out}"):
        check_out(out)
        out.mkdir(parents=True, exist_ok=True)
        mark_comparison(out, SEARCH_FILES)
        probes.writable = True
        previous = read_record(out)
        record = _record(config, space, threads, seq_len, previous, metric)
        clock = Clock(record.seconds, record.spent_s, start, record.reused_s)
        clock.seconds["step timing"] += primed_s   # timed before the walk: on its budget as the walk's timings are
        walk = Walk(config, space, found, probes, record, clock, out, task, say, show_progress, precision, teacher,
                    compare_config)
        walk.least_training_s = least[0] if least is not None else None
        try:
            with config.executor.session():   # one connection to a Ray cluster for every run the search makes
                walk.run()
                run_finals(walk)
            if probes.interpolated:
                record.notes.append(f"{len(probes.interpolated)} training-step times were interpolated in FLOPs "
                                    "between shapes of their kind that were timed, not timed themselves.")
            record.status = "complete"
        except BaseException:   # Ctrl-C, SIGTERM, an error: what finished is kept, and the same command resumes
            record.status = "interrupted"
            raise
        finally:
            walk.save()
            write_search_report(record, out)
    return out, record


def _record(config: SearchConfig, space: Space, threads: int, seq_len: int, previous: SearchRecord | None,
            metric: TaskMetric) -> SearchRecord:
    """A new search.json; resuming ``previous`` (the same question, not complete), with its time spent and what it
    found of each candidate."""
    record = SearchRecord(created=datetime.now(timezone.utc).isoformat(timespec="seconds"), command=config.command,
                          teacher=config.teacher, dataset=config.dataset, minimize=config.minimize,
                          min_retention=config.min_retention, budget_s=config.budget_s, seeds=list(config.seeds),
                          space=space.to_dict(), cpu=cpu_model(), threads=threads, seq_len=seq_len,
                          against=config.against, selection=config.select_on, metric=metric.name,
                          recipe=config.recipe, copies_per_epoch=config.copies_per_epoch,
                          recipe_does=recipe_does(config.recipe))
    # another recipe, or the same name meaning another recipe than when the search began, trains other models: its
    # candidates' evidence is not this search's (their runs are not reused either, what the recipe does being part of
    # a run's key)
    asked = ("teacher", "dataset", "minimize", "min_retention", "space", "seeds", "selection", "metric", "recipe",
             "copies_per_epoch", "recipe_does")
    same = previous is not None and all(getattr(previous, k) == getattr(record, k) for k in asked)
    if same and previous is not None and previous.status != "complete":
        record.spent_s, record.seconds = previous.spent_s, dict(previous.seconds)
        record.candidates = previous.candidates
    return record


def _compare_config(config: SearchConfig, methods: list[str]) -> CompareConfig:
    return CompareConfig(teacher=config.teacher, dataset=config.dataset, text_column=config.text_column,
                         text_pair_column=config.text_pair_column, label_column=config.label_column, task=config.task,
                         dedupe=config.dedupe, metric=config.metric, methods=methods, out=config.out,
                         batch_size=config.batch_size, seeds=list(config.seeds), device=config.device,
                         precision=config.precision, recipe=config.recipe, copies_per_epoch=config.copies_per_epoch,
                         threads=config.threads,
                         seq_len=config.seq_len,
                         repeats=config.repeats, batch_shape=config.batch_shape,
                         teacher_finetune=config.teacher_finetune, executor=config.executor, command=config.command)


