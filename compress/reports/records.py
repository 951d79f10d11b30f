"""The records runs write and reports read, as dataclasses: one place for the shape of ``metrics.json``
and ``comparison.json`` and their schema versions.

metrics.json, schema version 4 (versions 2 and 3 are still read)::

    schema_version, method, kind (the method's: "distillation", "quantization", "pruning"), seconds, seq_len
    dataset   DatasetRecord {name, fingerprint, sizes {train, dev, test}, label_names}
    teacher   ModelRecord {params, classifier_params, params_by_component, flops, size_bytes, accuracy,
              macro_f1, dev_accuracy}
    student   ModelRecord, with layout and config (quantized models: backend and dtype too)
    retention student accuracy / teacher accuracy
    ratios    teacher / student for params, flops, size_bytes
    stages    per training stage: best epoch, best dev metrics, seconds ([] when nothing trained)
    speed     {teacher?, student, source?}: each a compress.bench.speed measurement (latency_ms_p50,
              latency_ms_p90 at batch 1, throughput at batch 32, peak_memory_bytes, seq_len, threads)
    chain     [ChainStep]: every step of the pipeline that made this model, first to last, this run
              included, each as its own run measured it (a run made by one method has one step)
    source    (transforms) what was transformed
    details   the method's own record (a compress.registry.Details of the class the method declares,
              with its own schema_version); schema 3 kept it under ``quantization`` or ``pruning``
    predictions  the SHA-256 of predictions.safetensors, the test logits (compress.predictions); absent in
              records written before runs kept them
    dev_predictions  likewise of dev_predictions.safetensors, the dev logits
    select_predictions  likewise of select_predictions.safetensors, where the task holds training examples out for a
              search to select on (its ``select`` split); absent otherwise
    phases    seconds by phase: training (its stages), making (the rest of the method's own work: quantizing,
              scoring, factorizing), evaluating (dev and test), timing (against its source), saving; absent in
              records written before runs kept them
    teacher_predictions  {test, dev}: the SHA-256 of teacher_predictions.safetensors and
              teacher_dev_predictions.safetensors, the teacher's logits on the same sentences
    retentions  {test, dev}: the retention on each split with its 95% interval over that split's sentences, paired
              with the teacher on the same sentences (compress.runs.paired); the three absent in records written
              before runs kept them, or where the teacher's predictions were not at hand (a transform of such a run)

``params`` counts embeddings + encoder + pooler (as transformers' BertModel does); ``size_bytes``
is measured from the weight files written; ``flops`` are per sequence of ``seq_len`` tokens.

comparison.json, schema version 3 (its ``metric`` and ``scores`` added later, read as accuracy and none where absent;
versions 1, without pipelines, and 2, one seed without intervals, are still
rendered): a :class:`Comparison`; its fields are described there and in :mod:`compress.reports.comparison`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar

from compress.bench.measurement import Manifest, Speed
from compress.errors import CompressError
from compress.registry import Details, Section, details_class
from compress.train_config import FinetuneConfigData, StageRecord

if TYPE_CHECKING:
    from compress.distill.recipe import RecipeData
    from compress.jsontypes import JSONObject
    from compress.models.config import EncoderConfigData

RUN_SCHEMA = 4
READABLE_RUN_SCHEMAS = (2, 3, 4)
LEGACY_DETAILS = ("quantization", "pruning")   # where schema 3 kept what is now ``details``
COMPARISON_SCHEMA = 3
READABLE_COMPARISON_SCHEMAS = (1, 2, 3)

_V = TypeVar("_V")


def _drop_none(data: Mapping[str, _V | None]) -> dict[str, _V]:
    return {k: v for k, v in data.items() if v is not None}


def _known(cls: type, data: Mapping[str, _V]) -> dict[str, _V]:
    """The entries of ``data`` that are fields of ``cls`` (a newer writer's extra keys are ignored)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass
class ModelRecord:
    """One model's size and quality: the teacher, a student, or a quantized model."""

    params: int
    classifier_params: int
    params_by_component: dict[str, int]
    flops: int
    size_bytes: int
    accuracy: float | None                     # None: a regression (its scores hold its correlations)
    macro_f1: float | None
    dev_accuracy: float | None = None          # the teacher's, from its fine-tuning
    layout: str | None = None                  # how the model is saved (bert, albert, onnxruntime-int8, ...)
    config: EncoderConfigData | None = None    # its EncoderConfig
    backend: str | None = None                 # quantized models: the runtime that runs it
    dtype: str | None = None                   # quantized models: the number format
    scores: dict[str, float] | None = None     # every task metric on test (metrics.Metrics.scores; None: older)

    def to_dict(self) -> JSONObject:
        """Its fields but the optional ones it lacks; accuracy and macro-F1 always (null for a regression)."""
        data = asdict(self)
        return _drop_none(data) | {"accuracy": data["accuracy"], "macro_f1": data["macro_f1"]}


@dataclass
class DatasetRecord:
    name: str
    fingerprint: str
    sizes: dict[str, int]
    label_names: list[str] | None = None
    in_train: dict[str, int] | None = None     # dev/test rows whose text also occurs in train (None: none, or older)
    dropped: dict[str, int] | None = None      # dev/test rows --dedupe dropped for that reason
    test_classes: dict[str, int] | None = None   # test rows by label name (None: a regression, or older)
    pairs: bool | None = None                  # True: its examples are text pairs (None: single, or older)

    def to_dict(self) -> JSONObject:
        return _drop_none(asdict(self))


@dataclass
class ChainStep:
    """One step of a pipeline as the run that made it measured it."""

    step: str              # the step as written in a pipeline: distilbert, int8[backend=torch]
    run_dir: str
    params: int
    size_bytes: int
    flops: int
    accuracy: float | None
    macro_f1: float | None
    latency_ms_p50: float
    throughput: float
    scores: dict[str, float] | None = None     # every task metric on test (ModelRecord.scores; None: older)

    @classmethod
    def of(cls, step: str, run_dir: Path | str, model: ModelRecord, speed: Speed) -> ChainStep:
        return cls(step, str(run_dir), model.params, model.size_bytes, model.flops, model.accuracy, model.macro_f1,
                   speed["latency_ms_p50"], speed["throughput"], model.scores)


@dataclass
class SourceRecord:
    """What a transform took: the teacher or an earlier run's model."""

    kind: str              # "teacher" or "run"
    path: str
    parent: str | None     # the run directory transformed, if any
    params: int
    size_bytes: int
    accuracy: float | None
    macro_f1: float | None
    scores: dict[str, float] | None = None     # every task metric on test (ModelRecord.scores; None: older)


def primary(model: ModelRecord | SourceRecord | ChainStep) -> float:
    """A model's score on the task's default metric: accuracy, or a regression's Pearson correlation."""
    return model.accuracy if model.accuracy is not None else (model.scores or {}).get("pearson", 0.0)


def score_text(model: ModelRecord | SourceRecord | ChainStep) -> str:
    """A model's score on the task's default metric, in words: ``accuracy 0.8123`` or ``Pearson 0.7812``."""
    return f"accuracy {model.accuracy:.4f}" if model.accuracy is not None else f"Pearson {primary(model):.4f}"


class SourceRecordData(TypedDict):
    """A :class:`SourceRecord` as ``asdict`` (config.json's ``source``; metrics.json's, read back)."""

    kind: str
    path: str
    parent: str | None
    params: int
    size_bytes: int
    accuracy: float | None
    macro_f1: float | None
    scores: dict[str, float] | None


class RunSettings(TypedDict, total=False):
    """A RunConfig (compress.runs.config) as ``asdict``: config.json's ``run``. Every field of RunConfig is there;
    one recorded before a field existed lacks it (compress.runs.config.result_settings reads it as the default those
    runs ran at), and the settings a run's result depends on are these less a few (result_settings)."""

    method: str
    teacher: str
    dataset: str
    text_column: str | None
    text_pair_column: str | None
    label_column: str | None
    task: str
    dedupe: bool
    options: dict[str, object]        # the methods' options given by flag or --set, by name, as given
    epochs: int | None
    lr: float | None
    layer_map: str | None
    patience: int | None
    stop_below: float | None
    batch_size: int
    seed: int
    device: str
    teacher_finetune: FinetuneConfigData
    target: str
    then: list[str]
    threads: int | None
    out: str | None
    overwrite: bool
    precision: str
    checkpoint_every: int
    speed_device: str
    hold_out: int
    metric: str | None
    recipe: str
    transfer_text: str | None
    transfer_sha256: str | None
    warmup: float | None
    decay: str | None
    copies_per_epoch: int | None


class SavedConfig(TypedDict, total=False):
    """A run directory's config.json: everything needed to run it again, and what its model came from."""

    run: RunSettings                  # the RunConfig, as asdict
    options: dict[str, object]        # the method's options as resolved, as asdict (by name: each method has its own)
    recipe: RecipeData                # what it trained (students, pruning's and low-rank's recovery)
    pipeline: str                     # the whole pipeline, when the run is a step of one
    max_length: int
    source: SourceRecordData          # transforms: the SourceRecord, as asdict
    parent: str | None                # transforms: the run directory transformed
    teacher: str                      # transforms: the teacher's name
    teacher_dir: str                  # students: the fine-tuned teacher's directory
    teacher_config: EncoderConfigData  # students: the teacher's EncoderConfig
    processes: int                    # students: the data-parallel processes that trained it
    teacher_weights: str              # the teacher checkpoint's SHA-256 (teachers.registry.teacher_weights)


@dataclass
class RunRecord:
    """metrics.json: what one run made and measured (see the module docstring)."""

    method: str
    kind: str
    seconds: float
    seq_len: int
    dataset: DatasetRecord
    teacher: ModelRecord
    student: ModelRecord
    retention: float
    ratios: dict[str, float]
    stages: list[StageRecord]
    speed: dict[str, Speed]
    chain: list[ChainStep] = field(default_factory=list)
    source: SourceRecord | None = None
    details: Details | None = None
    predictions: str | None = None   # the SHA-256 of predictions.safetensors (None: made by an older compress)
    dev_predictions: str | None = None   # of dev_predictions.safetensors (None: made before runs kept them)
    select_predictions: str | None = None   # of select_predictions.safetensors: a task with a select split (search)
    phases: dict[str, float] | None = None   # seconds by phase (see above; None: made before runs kept them)
    metric: str | None = None        # --metric: what retention is of (None: the task's default, accuracy or Pearson)
    model_files: dict[str, str] | None = None   # SHA-256 of each file of its model/ or student/ (None: older)
    teacher_predictions: dict[str, str] | None = None   # SHA-256 of the teacher's test and dev predictions
    retentions: dict[str, IntervalRecord] | None = None   # test's and dev's retention, each with its interval
    schema_version: int = RUN_SCHEMA

    def to_dict(self) -> JSONObject:
        data: JSONObject = {"schema_version": self.schema_version, **_drop_none(asdict(self))}
        data |= {"dataset": self.dataset.to_dict(), "teacher": self.teacher.to_dict(),
                 "student": self.student.to_dict()}
        if self.details is not None:
            data["details"] = self.details.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: JSONObject, run_dir: Path | str) -> RunRecord:
        """The record ``data`` holds (schema 2 or 3); one sentence naming what is wrong otherwise."""
        version = data.get("schema_version")
        if version not in READABLE_RUN_SCHEMAS:
            *older, newest = map(str, READABLE_RUN_SCHEMAS)
            raise CompressError(f"{run_dir}/metrics.json has schema version {version}, this compress reads "
                                f"{', '.join(older)} or {newest}; run it again.")
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing = [k for k in required if k not in data]
        if missing:
            raise CompressError(f"{run_dir}/metrics.json lacks {', '.join(missing)}; run it again.")
        try:
            record = cls(**_known(cls, data) | {
                "dataset": DatasetRecord(**_known(DatasetRecord, data["dataset"])),
                "teacher": ModelRecord(**_known(ModelRecord, data["teacher"])),
                "student": ModelRecord(**_known(ModelRecord, data["student"])),
                "chain": [ChainStep(**step) for step in data.get("chain", [])],
                "source": SourceRecord(**data["source"]) if data.get("source") else None,
                "details": _details(data),
            })
        except TypeError as e:
            raise CompressError(f"{run_dir}/metrics.json does not have the shape of a run record ({e}); "
                                "run it again.") from None
        if not record.chain:  # schema 2: the run alone
            record.chain = [ChainStep.of(record.method, run_dir, record.student, record.speed["student"])]
        return record

    @property
    def quantized(self) -> bool:
        """Whether the model is an artefact run by a backend (model/), not an fp32 encoder (student/)."""
        return self.student.backend is not None


def _details(data: JSONObject) -> Details | None:
    """The method's details of a record: ``details`` (schema 4) or the block schema 3 kept them in."""
    found = data.get("details") or next((data[k] for k in LEGACY_DETAILS if data.get(k)), None)
    cls = details_class(data["method"])
    return cls.from_dict(found) if found is not None and cls is not None else None


def read_run_record(run_dir: Path | str) -> RunRecord:
    """A run directory's metrics.json; one sentence when it is missing, unreadable or of another schema."""
    try:
        data = json.loads((Path(run_dir) / "metrics.json").read_text())
    except (OSError, ValueError):
        raise CompressError(f"{run_dir} has no readable metrics.json; is it a complete run directory?") from None
    if not isinstance(data, dict):
        raise CompressError(f"{run_dir}/metrics.json is not a JSON object; run it again.")
    return RunRecord.from_dict(data, run_dir)


# --- comparison.json ---------------------------------------------------------------------------


class SpeedSettings(TypedDict, total=False):
    """How a comparison measured speed: its SpeedConfig, the passes, and the CPUs other processes kept busy
    meanwhile (None off Linux)."""

    threads: int
    device: str               # where every model was timed: "cpu", or "cuda" (absent: the CPU, before GPUs)
    gpu: str                  # on cuda: the GPU's name
    warmup: int               # before passes: untimed calls before a model's timed ones (now round_warmup)
    repeats: int
    batch_size: int
    batch_repeats: int
    passes: int               # independent passes, each loading every model afresh (speedup "passes")
    rounds: int               # rounds of batch-1 latency in each pass ("passes"; before it, in all: schema 3)
    round_warmup: int         # untimed calls before a model's calls in a round
    other_cpus: float | None
    speedup: str              # "passes": latency, speed-up (the median pass's) and its range from the passes'
                              # rounds; "median rounds":
                              # from one process's rounds; absent: speed-up from the rounds, latency from elsewhere


class IntervalRecord(TypedDict):
    """A compress.stats.Interval in JSON: an estimate and its confidence interval, fractions."""

    estimate: float
    low: float
    high: float
    level: float


class IntervalSettings(TypedDict):
    """How a comparison's intervals were computed."""

    level: float
    resamples: int
    method: str               # in words, for the report


@dataclass
class SeedResult:
    """One seed's run of a method: its own score of the comparison's metric (``accuracy``, named so before metrics
    could be chosen) and retention."""

    seed: int
    run_dir: str
    accuracy: float
    macro_f1: float | None
    retention: float


@dataclass
class Difference:
    """The accuracy of model ``a`` minus that of ``b`` (either may be "teacher") on the same test sentences (and
    seeds), with its paired interval."""

    a: str
    b: str
    accuracy: IntervalRecord
    p: float | None = None    # of "no difference", as the interval implies it (None: recorded before it was)


@dataclass(kw_only=True)
class ComparedMeasures:
    """What a comparison shows of every model, the teacher included: its record, and its speed measured
    in the comparison's process."""

    params: int
    params_by_component: dict[str, int]
    size_bytes: int
    accuracy: float                  # the comparison's metric (Comparison.metric; accuracy unless --metric chose)
    macro_f1: float | None
    flops: int
    latency_ms_p50: float
    latency_ms_p90: float
    throughput: float
    peak_memory_bytes: int
    accuracy_interval: IntervalRecord | None = None   # over the test sentences (and a method's seeds)
    latency_passes_ms: list[list[float]] = field(default_factory=list)   # batch-1 latency, each pass's rounds
    batch_passes_ms: list[float] = field(default_factory=list)   # the large batch's median milliseconds, each pass
    scores: dict[str, float] = field(default_factory=dict)   # the metric and those shown beside it (F1 and
                                                            # accuracy, Pearson and Spearman), seeds averaged
    score_intervals: dict[str, IntervalRecord] = field(default_factory=dict)   # each of scores', as accuracy_interval

    @property
    def latency_rounds_ms(self) -> list[float]:
        """Every round of every pass, pass after pass (round r of one model and of another were timed together)."""
        return [ms for rounds in self.latency_passes_ms for ms in rounds]


@dataclass(kw_only=True)
class ComparedTeacher(ComparedMeasures):
    name: str


@dataclass(kw_only=True)
class ComparedModel(ComparedMeasures):
    """One row of a comparison: a method or a pipeline's step."""

    method: str            # the run's name: distilbert, distilbert+int8, albert[sharing=attention]
    label: str
    run_dir: str
    kind: str              # distillation, quantization or pipeline
    steps: list[str]       # the names of the rows from the pipeline's first step to this one
    backend: str
    dtype: str
    retention: float
    speedup: float                          # the median of speedup_passes (before passes: the teacher's median
                                            # round latency / this model's, latency_ms_p50)
    throughput_speedup: float
    explanation: str
    note: str | None       # why this CPU runs it badly (no bf16 units, ...), or None
    runtime_note: str | None = None   # its runtime was fastest at batch 1 or in large batches, not both (Details)
    sections: list[Section] = field(default_factory=list)   # the own part of its last step that has one
    retention_interval: IntervalRecord | None = None
    retention_intervals: dict[str, IntervalRecord] = field(default_factory=dict)   # of each of scores, paired
    speedup_iqr: list[float] | None = None  # [q1, q3] of the per-round ratios
    speedup_passes: list[float] = field(default_factory=list)   # each pass's speed-up: its interval is their range
    per_seed: list[SeedResult] = field(default_factory=list)  # one entry: a run that does not depend on the seed
    # its retention on the training sentences a comparison with --hold-out held out (paired with the teacher's, over
    # them and the seeds), beside test's; None where nothing was held out
    held_out_retention: IntervalRecord | None = None
    recipe: str | None = None   # the recipe its training stages followed (None: it trained nothing, or before recipes)


class CompareSettings(TypedDict, total=False):
    """The settings of a comparison, named as `compress compare`'s options: what CompareConfig.settings gives
    (compress.runs.compare_plan; None where unset), comparison.json's ``config`` (its Nones left out), and what a file
    declares (compress.runs.declared: any of them, of the types its SETTINGS allow, which a command line's text gives
    too: ``dataset`` "a,b", ``methods`` "x,y", ``seeds`` "13-15")."""

    teacher: str
    dataset: str | list[str]
    text_column: str | None
    text_pair_column: str | None
    label_column: str | None
    task: str
    dedupe: bool
    methods: list[str] | str
    out: str
    epochs: int | None
    batch_size: int
    seed: int
    seeds: list[int] | int | str
    threads: int | None
    seq_len: int | None
    repeats: int
    batch_shape: str
    choose_by: str
    teacher_epochs: int
    teacher_lr: float
    teacher_batch_size: int
    teacher_layer_decay: float
    device: str
    speed_device: str
    hold_out: int
    precision: str
    metric: str | None
    executor: str
    address: str
    cpus_per_run: float
    gpus_per_run: float
    recipe: str
    transfer_text: str | None
    warmup: float | None
    decay: str | None
    copies_per_epoch: int | None


@dataclass
class Comparison:
    """comparison.json."""

    created: str
    seq_len: int
    threads: int
    speed: SpeedSettings                  # how speed was measured (SpeedConfig, passes, other_cpus: the CPUs
                                          # other processes kept busy meanwhile, None off Linux)
    dataset: DatasetRecord
    accuracy_standard_error: float        # of the teacher's test accuracy: smaller differences are ties
    manifest: Manifest
    teacher: ComparedTeacher
    methods: list[ComparedModel]
    reused: list[str]                     # the runs found complete and not run again
    command: str | None = None            # the command line that made it (None: called from Python, or older)
    seeds: list[int] = field(default_factory=list)          # the training seeds of every seeded run
    intervals: IntervalSettings | None = None
    differences: list[Difference] = field(default_factory=list)   # every two methods' accuracies, paired
    precision: str | None = None          # what every run asked for, as resolved here (auto: measured per stage)
    time: dict[str, float] | None = None  # seconds by phase of this invocation (comparison_time; None: older)
    config: CompareSettings | None = None  # the settings that make it again (CompareConfig.settings; None: older)
    config_file: dict[str, str] | None = None   # the file that declared it (--config): name and text
    metric: str = "accuracy"              # what every ``accuracy``, interval, retention and difference is of
    schema_version: int = COMPARISON_SCHEMA

    def to_dict(self) -> JSONObject:
        return {"schema_version": self.schema_version, **asdict(self), "dataset": self.dataset.to_dict(),
                "teacher": {"name": self.teacher.name, **asdict(self.teacher)},       # names first, for readers
                "methods": [{"method": m.method, "label": m.label, **asdict(m)} for m in self.methods]}

    @classmethod
    def from_dict(cls, data: JSONObject) -> Comparison:
        """A comparison.json this version writes (schema 3); the renderer reads older and hand-made ones."""
        if data.get("schema_version") != COMPARISON_SCHEMA:
            raise CompressError(f"the comparison has schema version {data.get('schema_version')}, not "
                                f"{COMPARISON_SCHEMA}; run `compress compare` again.")
        return cls(**data | {"dataset": DatasetRecord(**data["dataset"]),
                             "teacher": ComparedTeacher(**data["teacher"]),
                             "methods": [ComparedModel(**m | {"per_seed": [SeedResult(**r) for r in m["per_seed"]]})
                                         for m in data["methods"]],
                             "differences": [Difference(**d) for d in data["differences"]]})
