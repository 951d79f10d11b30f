"""What the comparison report shows, read leniently from comparison.json into small frozen dataclasses.

:class:`~compress.reports.records.Comparison` is the strict shape this version writes. The report cannot read
through it: a comparison may be edited by hand or come from an older compress (schema 1, without pipelines;
rows with ``layers`` instead of ``sections``), so beyond the fields :func:`validate_comparison` requires, any
field may be missing and any number may be null (not measured). This module is the one place that knows
that: it validates, then turns the JSON into the dataclasses below, where everything that may be missing is
Optional (None: missing, null, NaN, infinite or not a number). The renderers in
:mod:`compress.reports.comparison_markdown`, :mod:`compress.reports.comparison_html` (through the rows of
:mod:`compress.reports.comparison_rows`) and :mod:`compress.reports.plots` draw from these alone; they show None as
"–" and leave it out of the plots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from compress.errors import CompressError
from compress.registry import Section
from compress.reports.layers_kept import layer_cells
from compress.reports.records import COMPARISON_SCHEMA, READABLE_COMPARISON_SCHEMAS
from compress.task_metrics import METRICS

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

REQUIRED_METHOD_FIELDS = ("params", "size_bytes", "flops", "accuracy", "retention", "latency_ms_p50",
                          "throughput", "speedup")
MISSING = "–"

# A row written before methods had sections carries ``layers``, the per-layer picture of a pruned model; it
# becomes this section, with the cells the comparison drew for it then.
LAYER_HEADERS = ["layer of the source", "heads kept", "", "FFN neurons kept", ""]
LAYER_ALIGN = ["left", "right", "left", "right", "left"]


# --- validation --------------------------------------------------------------------------------

def _validate_method(index: int, method: object) -> None:
    if not isinstance(method, dict):
        raise CompressError(f"Entry {index} of the comparison's methods is not an object.")
    name = method.get("method")
    if not isinstance(name, str) or not name:
        raise CompressError(f"Entry {index} of the comparison's methods has no 'method' name.")
    for key in REQUIRED_METHOD_FIELDS:
        if key not in method:
            raise CompressError(f"Method '{name}' in the comparison lacks the required field '{key}' "
                                f"(it may be null, but the key must be present).")
        value = method[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise CompressError(f"Method '{name}' has a non-numeric {key} ({value!r}); "
                                f"expected a number or null.")


def validate_comparison(data: object) -> None:
    """Raise :class:`CompressError` unless ``data`` is a comparison of a readable schema with complete methods."""
    if not isinstance(data, dict):
        raise CompressError("The comparison is not a JSON object; expected a dict with schema_version and methods.")
    if "schema_version" not in data:
        raise CompressError(f"The comparison has no schema_version; expected schema_version {COMPARISON_SCHEMA}.")
    version = data["schema_version"]
    if version not in READABLE_COMPARISON_SCHEMAS or isinstance(version, bool):
        raise CompressError(f"The comparison has schema_version {version!r}, but this version of compress "
                            f"reads schema_version {' or '.join(map(str, READABLE_COMPARISON_SCHEMAS))}; run "
                            "`compress compare` again.")
    methods = data.get("methods")
    if not isinstance(methods, list) or not methods:
        raise CompressError("The comparison has no methods; run at least one method before rendering it.")
    for index, method in enumerate(methods):
        _validate_method(index, method)


# --- lenient conversions -----------------------------------------------------------------------

def number(value: object) -> float | None:
    """``value`` as a finite float, or None when it is null, NaN, infinite or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _as_given(value: object) -> int | float | None:
    """A finite number as written (an int stays an int, so ``48`` is shown as 48, not 48.0), or None."""
    return value if number(value) is not None else None  # type: ignore[return-value]


def _text(value: object) -> str | None:
    """A field the report shows only when it is set: None when missing, null or empty."""
    return str(value) if value else None


def _object(value: object) -> dict[str, object]:
    """A JSON object, or an empty one for anything else (a hand-edited field of the wrong shape is left out)."""
    return value if isinstance(value, dict) else {}


def _intervals(value: object) -> dict[str, ShownInterval]:
    """A metric -> interval object's well-formed intervals."""
    return {str(k): found for k, v in _object(value).items() if (found := ShownInterval.read(v)) is not None}


def _strings(value: object, what: str) -> list[str]:
    """A list of table cells or sentences as text; a null cell is "–", like any value not measured."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise CompressError(f"{what} is not a list ({value!r}); expected a list of strings.")
    return [MISSING if item is None else str(item) for item in value]


def _numbers(value: object) -> tuple[float, ...]:
    """A list of numbers (per-round latencies); the numbers of it that are finite, or () for anything else."""
    return tuple(x for x in map(number, value) if x is not None) if isinstance(value, list) else ()


# --- what the report shows ---------------------------------------------------------------------

@dataclass(frozen=True)
class ShownInterval:
    """An estimate and its confidence interval (fractions), as comparison.json (schema 3) keeps them."""

    estimate: float
    low: float
    high: float
    p: float | None = None    # a difference's p-value of "no difference" (None: not recorded)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @classmethod
    def read(cls, value: object, p: object = None) -> ShownInterval | None:
        """The interval ``value`` holds, or None when it is missing or not a well-formed interval."""
        data = _object(value)
        estimate, low, high = (number(data.get(key)) for key in ("estimate", "low", "high"))
        if estimate is None or low is None or high is None or not low <= high:
            return None
        return cls(estimate, low, high, number(p))

    def negated(self) -> ShownInterval:
        return ShownInterval(-self.estimate, -self.high, -self.low, self.p)


@dataclass(frozen=True)
class ShownSeed:
    seed: int | float | None
    accuracy: float | None
    retention: float | None


class _Measures(TypedDict):
    """What :meth:`ShownModel._measures` reads of every row: the fields of :class:`ShownModel` but its breakdown."""

    params: float | None
    size_bytes: float | None
    flops: float | None
    accuracy: float | None
    latency_ms_p50: float | None
    throughput: float | None
    accuracy_interval: ShownInterval | None
    latency_passes: tuple[tuple[float, ...], ...]
    scores: dict[str, float]
    score_intervals: dict[str, ShownInterval]


@dataclass(frozen=True, kw_only=True)
class ShownModel:
    """The numbers every row of the report has, teacher included; None where not measured."""

    params: float | None = None
    size_bytes: float | None = None
    flops: float | None = None
    accuracy: float | None = None                     # a fraction
    latency_ms_p50: float | None = None
    throughput: float | None = None
    params_by_component: dict[str, float | None] | None = None   # None: no breakdown recorded
    accuracy_interval: ShownInterval | None = None   # schema 3: over the test sentences (and seeds)
    latency_passes: tuple[tuple[float, ...], ...] = ()   # batch-1 latency in each round of each pass, ms; a
                                                         # schema 3 record before passes: its rounds as one
    scores: dict[str, float] = field(default_factory=dict)   # the metric and those shown beside it, by name
    score_intervals: dict[str, ShownInterval] = field(default_factory=dict)   # of each of scores (none: older)

    @property
    def latency_rounds(self) -> tuple[float, ...]:
        """Every round, pass after pass: round r of two models was timed together."""
        return tuple(ms for rounds in self.latency_passes for ms in rounds)

    @staticmethod
    def _measures(data: dict[str, object]) -> _Measures:
        passes = data.get("latency_passes_ms")
        rounds = tuple(_numbers(p) for p in passes) if isinstance(passes, list) else \
            tuple(r for r in [_numbers(data.get("latency_rounds_ms"))] if r)
        return _Measures(
            params=number(data.get("params")), size_bytes=number(data.get("size_bytes")),
            flops=number(data.get("flops")), accuracy=number(data.get("accuracy")),
            latency_ms_p50=number(data.get("latency_ms_p50")), throughput=number(data.get("throughput")),
            accuracy_interval=ShownInterval.read(data.get("accuracy_interval")), latency_passes=rounds,
            scores={str(k): x for k, v in _object(data.get("scores")).items() if (x := number(v)) is not None},
            score_intervals=_intervals(data.get("score_intervals")))

    @staticmethod
    def _components(data: dict[str, object]) -> dict[str, float | None] | None:
        parts = data.get("params_by_component")
        return {str(k): number(v) for k, v in parts.items()} if isinstance(parts, dict) else None


@dataclass(frozen=True, kw_only=True)
class ShownTeacher(ShownModel):
    name: str | None = None     # None: not recorded (shown as "?")

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ShownTeacher:
        name = data.get("name")
        return cls(**cls._measures(data), params_by_component=cls._components(data),
                   name=None if name is None else str(name))


@dataclass(frozen=True, kw_only=True)
class ShownMethod(ShownModel):
    """One method's row of the report and its own part of it."""

    method: str                         # the run's name, required: distilbert, distilbert+int8
    label: str | None = None            # the long name (``DistilBERT → dynamic int8``)
    kind: str | None = None             # distillation, quantization, pruning, pipeline
    backend: str | None = None
    dtype: str | None = None
    run_dir: str | None = None
    note: str | None = None             # why this CPU runs it badly (the row is flagged ⚠)
    runtime_note: str | None = None     # which runtime its speeds are of, where another was faster for one of them
    explanation: str | None = None
    retention: float | None = None      # accuracy as a fraction of the teacher's
    speedup: float | None = None
    steps: tuple[str, ...] = ()         # a pipeline's rows from its first step to this one (schema 2)
    sections: tuple[Section, ...] = ()  # its own part of the report, under its explanation
    retention_interval: ShownInterval | None = None     # schema 3
    retention_intervals: dict[str, ShownInterval] = field(default_factory=dict)   # of each of scores (none: older)
    speedup_iqr: tuple[float, float] | None = None      # schema 3: the per-round ratios' quartiles
    speedup_passes: tuple[float, ...] = ()              # each pass's speed-up (timed in passes)
    per_seed: tuple[ShownSeed, ...] = ()                # schema 3: one entry per run (per seed)
    held_out_retention: ShownInterval | None = None     # on the training sentences held out (--hold-out)
    recipe: str | None = None                           # the recipe its training followed

    @property
    def name(self) -> str:
        """The name the results table gives it: the label, or the run's name without one."""
        return self.label or self.method

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ShownMethod:
        method = str(data["method"])
        steps = data.get("steps")
        return cls(**cls._measures(data), params_by_component=cls._components(data), method=method,
                   label=_text(data.get("label")), kind=_text(data.get("kind")), backend=_text(data.get("backend")),
                   dtype=_text(data.get("dtype")), run_dir=_text(data.get("run_dir")), note=_text(data.get("note")),
                   runtime_note=_text(data.get("runtime_note")),
                   explanation=_text(data.get("explanation")), retention=number(data.get("retention")),
                   speedup=number(data.get("speedup")),
                   steps=tuple(str(step) for step in steps) if isinstance(steps, list) else (),
                   sections=_sections(method, data),
                   retention_interval=ShownInterval.read(data.get("retention_interval")),
                   retention_intervals=_intervals(data.get("retention_intervals")),
                   speedup_iqr=iqr if len(iqr := _numbers(data.get("speedup_iqr"))) == 2 else None,
                   speedup_passes=_numbers(data.get("speedup_passes")),
                   held_out_retention=ShownInterval.read(data.get("held_out_retention")),
                   recipe=_text(data.get("recipe")),
                   per_seed=tuple(ShownSeed(_as_given(r.get("seed")), number(r.get("accuracy")),
                                            number(r.get("retention")))
                                  for r in map(_object, data.get("per_seed") or []) if r))


def _sections(method: str, data: dict[str, object]) -> tuple[Section, ...]:
    """A row's ``sections``; for a row written before sections existed, its ``layers`` as one section."""
    raw = data.get("sections")
    if raw is None:
        return _layers_section(method, data.get("layers"))
    if not isinstance(raw, list):
        raise CompressError(f"Method '{method}' in the comparison has sections that are not a list ({raw!r}).")
    sections = []
    for index, entry in enumerate(raw):
        what = f"Section {index} of method '{method}' in the comparison"
        if not isinstance(entry, dict):
            raise CompressError(f"{what} is not an object.")
        rows = entry.get("rows")
        if rows is not None and not isinstance(rows, list):
            raise CompressError(f"{what} has rows that are not a list ({rows!r}).")
        sections.append(Section(
            name=str(entry.get("name") or f"section-{index + 1}"), title=_text(entry.get("title")),
            lines=_strings(entry.get("lines"), f"{what}: lines"), headers=_strings(entry.get("headers"),
                                                                                    f"{what}: headers"),
            rows=[_strings(row, f"{what}: row {i}") for i, row in enumerate(rows or [])],
            align=_strings(entry.get("align"), f"{what}: align")))
    return tuple(sections)


def _layers_section(method: str, layers: object) -> tuple[Section, ...]:
    """The per-layer picture an older comparison kept under ``layers``, as the section that replaced it."""
    if not layers:
        return ()
    try:
        rows = [[f"{row['layer']}" + (" (dropped)" if row["dropped"] else ""), *layer_cells(row)]
                for row in layers]  # type: ignore[attr-defined]
    except (KeyError, TypeError) as error:
        raise CompressError(f"Method '{method}' in the comparison has a 'layers' table this compress cannot "
                            f"read ({error!r}); run `compress compare` again.") from None
    return (Section("layers", headers=list(LAYER_HEADERS), rows=rows, align=list(LAYER_ALIGN)),)


@dataclass(frozen=True, kw_only=True)
class ShownDataset:
    name: str | None = None
    fingerprint: str | None = None
    sizes: dict[str, int | float | str] = field(default_factory=dict)   # split -> examples, as written
    test_classes: dict[str, float] = field(default_factory=dict)        # label name -> test rows (none: not recorded)

    @property
    def test_size(self) -> int | float | None:
        test = self.sizes.get("test")
        return test if isinstance(test, (int, float)) else None

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ShownDataset:
        sizes = _object(data.get("sizes"))
        return cls(name=_text(data.get("name")), fingerprint=_text(data.get("fingerprint")),
                   sizes={k: v if isinstance(v, (int, float)) else str(v) for k, v in sizes.items()},
                   test_classes={str(k): x for k, v in _object(data.get("test_classes")).items()
                                 if (x := number(v)) is not None})


@dataclass(frozen=True, kw_only=True)
class ShownContext:
    """How the comparison was measured: the line under the title, the plots' titles, the ties on the front."""

    seq_len: int | float | None = None
    threads: int | float | None = None
    cpu: str | None = None                          # the CPU's model name
    gpu: str | None = None                          # the GPU every model was timed on (None: timed on the CPU)
    other_cpus: float | None = None                 # CPUs other processes kept busy while speed was measured
    created: str | None = None
    accuracy_standard_error: float | None = None    # a fraction: smaller accuracy differences are ties (schema < 3)
    seeds: tuple[int | float, ...] = ()             # schema 3: the seeds every seeded run was trained with
    rounds: int | float | None = None               # schema 3: the rounds of batch-1 latency (in each pass)
    passes: int | float | None = None               # passes loading every model afresh (speedup "passes")
    precision: str | None = None                    # what the runs trained in (None: recorded before it was)
    time: dict[str, float] = field(default_factory=dict)   # seconds by phase (comparison.json's ``time``)
    speedup: str | None = None          # how speed-ups were computed (speed.speedup; None: per-round medians)
                                        # "passes": with their range over independent passes
    metric: str = "accuracy"            # what every accuracy, retention and difference is of (comparison.metric)
    batch_size: int | float | None = None   # the large batch throughput was timed at (speed.batch_size)
    batch_shape: str | None = None      # how its batches were shaped (speed.batch_shape; None: made before shapes)
    padding: float | None = None        # padding's share of the positions they computed

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ShownContext:
        return cls(seq_len=_as_given(data.get("seq_len")), threads=_as_given(data.get("threads")),
                   cpu=_text(_object(_object(data.get("manifest")).get("cpu")).get("model")),
                   gpu=_text(_object(data.get("speed")).get("gpu")),
                   other_cpus=number(_object(data.get("speed")).get("other_cpus")),
                   created=_text(data.get("created")),
                   accuracy_standard_error=number(data.get("accuracy_standard_error")),
                   seeds=tuple(x for x in map(_as_given, data.get("seeds") or []) if x is not None)
                   if isinstance(data.get("seeds"), list) else (),
                   rounds=_as_given(_object(data.get("speed")).get("rounds")),
                   passes=_as_given(_object(data.get("speed")).get("passes"))
                   if _object(data.get("speed")).get("speedup") == "passes" else None,
                   precision=_text(data.get("precision")),
                   speedup=_text(_object(data.get("speed")).get("speedup")),
                   metric=_text(data.get("metric")) or "accuracy",
                   batch_size=_as_given(_object(data.get("speed")).get("batch_size")),
                   batch_shape=_text(_object(data.get("speed")).get("batch_shape")),
                   padding=number(_object(data.get("speed")).get("padding")),
                   time={k: seconds for k, v in _object(data.get("time")).items()
                         if (seconds := number(v)) is not None})


@dataclass(frozen=True, kw_only=True)
class ShownComparison:
    """Everything the report draws, teacher first then each method in table order."""

    schema_version: int
    teacher: ShownTeacher | None
    methods: tuple[ShownMethod, ...]
    dataset: ShownDataset
    context: ShownContext
    differences: dict[tuple[str, str], ShownInterval] = field(default_factory=dict)   # (a, b): a's minus b's

    @property
    def has_intervals(self) -> bool:
        """Whether every model has its accuracy interval and its latency rounds, and every two models (the
        teacher among them) their paired difference (schema 3): the report then judges differences by intervals,
        not by a tie rule."""
        names, models = zip(*self.models()) if self.models() else ((), ())
        return bool(models) and all(m.accuracy_interval and m.latency_rounds for m in models) and \
            all(self.difference(a, b) is not None for i, a in enumerate(names) for b in names[i + 1:])

    def difference(self, a: str, b: str) -> ShownInterval | None:
        """The accuracy of ``a`` minus that of ``b``, with its paired interval, when recorded."""
        if (a, b) in self.differences:
            return self.differences[(a, b)]
        found = self.differences.get((b, a))
        return found.negated() if found is not None else None

    def models(self) -> list[tuple[str, ShownModel]]:
        """(short name, numbers) of the teacher, if any, and each method: the points the plots and the front use."""
        teacher: list[tuple[str, ShownModel]] = [("teacher", self.teacher)] if self.teacher is not None else []
        return teacher + [(m.method, m) for m in self.methods]

    def pipelines(self) -> list[ShownMethod]:
        """The methods that are pipelines (two or more steps), in table order."""
        return [m for m in self.methods if len(m.steps) > 1]


def read_comparison(data: JSONObject | ShownComparison) -> ShownComparison:
    """Validate ``data`` (a parsed comparison.json) as :func:`validate_comparison` does, then read what the
    report shows of it; a :class:`ShownComparison` passes through unchanged."""
    if isinstance(data, ShownComparison):
        return data
    validate_comparison(data)
    teacher = data.get("teacher")
    return ShownComparison(
        schema_version=data["schema_version"],
        teacher=ShownTeacher.from_json(teacher) if isinstance(teacher, dict) else None,
        methods=tuple(ShownMethod.from_json(m) for m in data["methods"]),
        dataset=ShownDataset.from_json(_object(data.get("dataset"))),
        context=ShownContext.from_json(data),
        differences=_differences(data.get("differences")))


def _differences(value: object) -> dict[tuple[str, str], ShownInterval]:
    """The paired accuracy differences a comparison recorded (schema 3), each well-formed one by its pair."""
    found = {}
    for entry in map(_object, value if isinstance(value, list) else []):
        interval = ShownInterval.read(entry.get("accuracy"), entry.get("p"))
        if isinstance(entry.get("a"), str) and isinstance(entry.get("b"), str) and interval is not None:
            found[(entry["a"], entry["b"])] = interval
    return found


def metric_title(comparison: ShownComparison) -> str:
    """The name of what the comparison's accuracy column, retention and differences are of (``accuracy``)."""
    known = METRICS.get(comparison.context.metric)
    return known.title if known is not None else comparison.context.metric


def in_metric(text: str, comparison: ShownComparison) -> str:
    """``text`` with "accuracy" worded as the comparison's metric (``Matthews``) where that is another."""
    if comparison.context.metric == "accuracy":
        return text
    title = metric_title(comparison)
    return text.replace("accuracy (%)", f"{title} (×100)").replace("Accuracy", title[:1].upper() + title[1:]) \
        .replace("accuracies", f"{title} scores").replace("accuracy", title)
