"""What a comparison is asked for and the runs it plans, importable without torch: `compress compare` makes its
:class:`CompareConfig` and plans its runs (every method, pipeline and option checked) before the modules that train
and measure load (:mod:`compress.runs.compare`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compress.distill.schedule import DEFAULT_SCHEDULE
from compress.errors import CompressError
from compress.registry import Method, StudentMethod, Transform, all_methods, names
from compress.registry.pipeline import Pipeline, Step, check, for_throughput, parse
from compress.runs.config import RunConfig
from compress.runs.executors import Executor
from compress.teachers.registry import DEFAULT_TEACHER
from compress.train_config import DEFAULT_SEED, FinetuneConfig

if TYPE_CHECKING:
    from compress.reports.records import CompareSettings

# The pipeline with pruning that kept >= 97% of the teacher's accuracy at the most speed on MR (see
# docs/tutorial.md, section 11, for the measurement that chose it).
PRUNING_PIPELINE = "distilbert+prune+int8"


# The relaxed ALBERT beside the strict one, so the comparison shows what sharing trades: 8.0M parameters at about
# 97% of the teacher on MR, against the strict student's 5.9M at about 95% (docs/tutorial.md, section 5).
RELAXED_ALBERT = "albert[rank=48]"


def default_methods() -> list[str]:
    """Every method that runs by default on this machine (each method says: fp16 and bf16 only where the
    CPU computes in them), then each of those students followed by each transform that asks to follow
    students (``distilbert+int8``): the pipelines a user tries first; then the best pipeline with pruning, and
    the relaxed ALBERT alone and followed by those transforms."""
    methods = [m for m in all_methods() if m.in_compare()]
    followers = [t.name for t in methods if isinstance(t, Transform) and t.follows_students]
    pipelines = [f"{s.name}+{t}" for s in methods if s.kind == "student" for t in followers]
    relaxed = [RELAXED_ALBERT, *(f"{RELAXED_ALBERT}+{t}" for t in followers)] \
        if any(m.name == "albert" for m in methods) else []
    return [m.name for m in methods] + pipelines + [PRUNING_PIPELINE] + relaxed


@dataclass
class CompareConfig:
    teacher: str = DEFAULT_TEACHER
    dataset: str = "mr"                 # a name or file; several, separated by commas (compress.runs.across_tasks)
    text_column: str | None = None      # how a file's or hub dataset's columns are read (compress.data.load)
    text_pair_column: str | None = None
    label_column: str | None = None
    task: str = "auto"                  # a file's labels: auto (fractions: a regression), classification, regression
    dedupe: bool = False                # drop dev/test rows whose text occurs in train
    methods: list[str] = field(default_factory=default_methods)   # methods and pipelines
    out: str | None = None
    epochs: int | None = None           # every student's stages (default: each method's recipe)
    batch_size: int = 32
    seeds: list[int] = field(default_factory=lambda: [DEFAULT_SEED])   # every seeded run once per seed
    device: str = "auto"
    precision: str = "auto"             # every run's training precision (auto: bf16 where the device computes it)
    speed_device: str = "cpu"           # where every model is timed: the CPU, or a GPU (cuda)
    hold_out: int = 0                   # training examples held out for a search to select on (TaskData.hold_out)
    metric: str | None = None           # what retention and every interval are of, and what picks each epoch
                                        # (None: the task's default, accuracy or Pearson)
    threads: int | None = None
    seq_len: int | None = None          # speed is measured at this length (default: 95th percentile of test)
    repeats: int = 30
    batch_shape: str = "filled"         # how throughput's batches are shaped (compress.bench.batch_shapes)
    teacher_finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    executor: Executor = field(default_factory=Executor)   # where the runs train: here, or as Ray tasks
    stop_below: float | None = None     # every trained stage stops once its dev accuracy cannot reach this
    recipe: str = DEFAULT_SCHEDULE      # what every distillation stage learns from and how long: fast, default, thorough
    transfer_text: str | None = None    # the user's unlabeled text every distillation stage also learns from
    warmup: float | None = None         # every stage's warm-up share and learning-rate decay (None: each stage's own)
    decay: str | None = None
    copies_per_epoch: int | None = None   # augmented copies each epoch of every stage learns from (None: the recipe's)
    command: str | None = None          # the command line, recorded in comparison.json (the CLI sets it)
    config_file: dict[str, str] | None = None   # the file that declared it (--config): its name and text

    def __post_init__(self) -> None:
        """What the runs' own settings do not check (RunConfig does the rest): the seeds, the timing's repeats, and
        --epochs where no method trains a student."""
        checked_seeds(self.seeds)
        if self.repeats < 1:
            raise CompressError(f"--repeats must be a positive integer, got {self.repeats}.")
        if self.epochs is not None and self.epochs < 1:
            raise CompressError(f"--epochs must be a positive integer, got {self.epochs}.")

    def settings(self) -> CompareSettings:
        """What comparison.json's ``config`` records: the settings, named as the command's options, that make the
        same comparison again (``compress compare --like``; :mod:`compress.runs.declared`)."""
        train = self.teacher_finetune.train
        return {"teacher": self.teacher, "dataset": self.dataset, "text_column": self.text_column,
                "text_pair_column": self.text_pair_column, "label_column": self.label_column, "task": self.task,
                "dedupe": self.dedupe, "methods": list(self.methods),
                "epochs": self.epochs, "batch_size": self.batch_size, "seeds": list(self.seeds),
                "threads": self.threads, "seq_len": self.seq_len, "repeats": self.repeats,
                "batch_shape": self.batch_shape,
                "teacher_epochs": train.epochs, "teacher_lr": train.lr, "teacher_batch_size": train.batch_size,
                "teacher_layer_decay": train.layer_decay,
                "device": self.device, "precision": self.precision, "speed_device": self.speed_device,
                "hold_out": self.hold_out, "metric": self.metric, "recipe": self.recipe,
                "transfer_text": self.transfer_text, "warmup": self.warmup, "decay": self.decay,
                "copies_per_epoch": self.copies_per_epoch}


def chosen_by(methods: list[str], objective: str, batch_shape: str) -> list[str]:
    """``methods`` with each quantization left to choose its backend choosing it by ``objective``: latency (as they
    are) or throughput in batches of ``batch_shape`` (:func:`compress.registry.pipeline.for_throughput`)."""
    if objective not in ("latency", "throughput"):
        raise CompressError(f"--choose-by must be latency or throughput, got {objective!r}.")
    if objective == "latency":
        return list(methods)
    return [str(for_throughput(parse(text), batch_shape)) for text in methods]


@dataclass(frozen=True)
class PlannedRun:
    """One run of a comparison: a pipeline's prefix (``distilbert``, then ``distilbert+int8``), named by
    its text, its last step's method and options, and the run it transforms (None: the teacher)."""

    name: str
    method: Method
    options: dict[str, object]   # its last step's options as the pipeline gives them (compress.registry.pipeline.Step)
    parent: str | None
    steps: tuple[str, ...]   # the names of the runs from its first step to itself


def plan_runs(texts: list[str]) -> list[PlannedRun]:
    """Every run the methods and pipelines ``texts`` need, each once (a step shared by two pipelines is
    one run), parents before children; every name, order and option is checked here, before any work."""
    if not texts:
        raise CompressError(f"no method given; known: {', '.join(names())}.")
    runs: dict[str, PlannedRun] = {}
    for text in texts:
        pipeline = parse(text)
        methods = check(pipeline)
        done: list[Step] = []
        for step, method in zip(pipeline.steps, methods):
            values = method.option_values(dict(step.options))
            method.options(**values)   # the options check their own values (a backend's name, a group size)
            done.append(Step(method.name, values))
            name = str(Pipeline(tuple(done)))
            parent = str(Pipeline(tuple(done[:-1]))) if len(done) > 1 else None
            steps = (*(runs[parent].steps if parent else ()), name)
            runs.setdefault(name, PlannedRun(name, method, done[-1].options, parent, steps))
    return list(runs.values())


MAX_SEEDS = 20


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: a comma-separated list (``13,14,15``), or one count N (the N seeds from the default seed on)."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CompressError(f"--seeds takes seeds separated by commas (13,14,15) or a count (3), not {text!r}.") \
            from None
    seeds = list(range(DEFAULT_SEED, DEFAULT_SEED + values[0])) if len(values) == 1 and "," not in text else values
    return checked_seeds(seeds, repr(text))


def count_note(text: str) -> str | None:
    """One line for a ``--seeds`` count that also reads as a seed (13 or more, from the default seed on), which trains
    that many seeds where one may have been meant; None for a list or a smaller count."""
    if "," in text or not text.strip().isdigit() or int(text) < DEFAULT_SEED:
        return None
    n = int(text)
    return (f"--seeds {n} is a count: {n} seeds, {DEFAULT_SEED} to {DEFAULT_SEED + n - 1}; for seed {n} alone give "
            f"--seed {n} or --seeds {n},")


def checked_seeds(seeds: list[int], given: str | None = None) -> list[int]:
    """``seeds`` when they are 1 to MAX_SEEDS different seeds, none negative; else one sentence (``given``: how they
    were written)."""
    if not 1 <= len(seeds) <= MAX_SEEDS or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise CompressError(f"--seeds must give 1 to {MAX_SEEDS} different seeds, none negative; "
                            f"{given or seeds} does not.")
    return seeds


def seeded(planned: PlannedRun, by_name: dict[str, PlannedRun]) -> bool:
    """Whether the run's result depends on its seed: some step of it trains a student or is a seeded transform."""
    return any(isinstance(m, StudentMethod) or (isinstance(m, Transform) and m.seeded)
               for m in (by_name[name].method for name in planned.steps))


@dataclass(frozen=True)
class SeededRun:
    """One run of a comparison with one seed: ``name`` keys it (``distilbert@14``), ``parent`` its parent's key."""

    planned: PlannedRun
    seed: int
    name: str
    parent: str | None


def plan_seeds(planned: list[PlannedRun], seeds: list[int]) -> list[SeededRun]:
    """Every run once per seed (all of the first seed's first), except a run whose result does not depend on
    the seed: that one is made once, with the first seed, and is the parent of every seed's next step."""
    by_name = {step.name: step for step in planned}

    def seed_of(step: PlannedRun, seed: int) -> int:
        return seed if seeded(step, by_name) else seeds[0]

    runs: dict[str, SeededRun] = {}
    for seed in seeds:
        for step in planned:
            parent = by_name[step.parent] if step.parent else None
            own = seed_of(step, seed)
            runs.setdefault(f"{step.name}@{own}", SeededRun(
                step, own, f"{step.name}@{own}", f"{parent.name}@{seed_of(parent, seed)}" if parent else None))
    return list(runs.values())


def run_config_of(config: CompareConfig, planned: PlannedRun, target: str, directory: Path | None = None,
                seed: int | None = None) -> RunConfig:
    student = planned.method.kind == "student"
    return RunConfig(method=planned.method.name, options=planned.options, teacher=config.teacher,
                     dataset=config.dataset, text_column=config.text_column, text_pair_column=config.text_pair_column,
                     label_column=config.label_column, task=config.task, dedupe=config.dedupe,
                     epochs=config.epochs if student else None,
                     batch_size=config.batch_size, seed=config.seeds[0] if seed is None else seed,
                     device=config.device, precision=config.precision, threads=config.threads,
                     speed_device=config.speed_device, hold_out=config.hold_out, metric=config.metric,
                     teacher_finetune=config.teacher_finetune, target=target, stop_below=config.stop_below,
                     recipe=config.recipe, transfer_text=config.transfer_text, warmup=config.warmup if student else None,
                     decay=config.decay if student else None,
                     # only where it trains (a student, a recovery): a quantization that trains nothing keeps its key
                     copies_per_epoch=config.copies_per_epoch
                     if student or getattr(planned.method, "recovery", None) is not None else None,
                     out=str(directory) if directory else None, overwrite=True)
