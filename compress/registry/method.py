"""The registry of compression methods: what a method declares, and how the rest asks for it.

A method family is one package (or module) of :mod:`compress.methods` whose ``__init__`` calls
:func:`register` with a :class:`StudentMethod` (trains a new encoder from a teacher) or a :class:`Transform`
(takes a model and returns a changed one, through one verb: :mod:`compress.registry.contract`). Families
are found, not listed: every package and module of ``compress.methods`` is imported the first time the
registry is asked, so adding a method is adding its package. The method also owns its record (``details``)
and its report (``summary_lines``, ``report_lines``, ``compared_sections``): the runs
(:mod:`compress.runs`), ``compare``, ``explain``, the reports and the CLI ask the registry; none of them
names a method. This package sits below every family and imports none of them.
"""

from __future__ import annotations

import importlib
import pkgutil
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any

from compress.errors import CompressError
from compress.registry.contract import Context, Details, Section, Transformed

if TYPE_CHECKING:
    from compress.data.batching import TokenizedTask
    from compress.data.task import TaskData
    from compress.distill.recipe import Recipe
    from compress.models.config import EncoderConfig
    from compress.models.encoder import Encoder
    from compress.train_config import StageRecord

# The keys a method's ``why`` sentence may use, filled from a run's ratios (the model before / after) and
# ``against``, the model the ratios compare with ("the teacher", or a pipeline's step before).
WHY_KEYS = ("params", "flops", "flops_share", "size", "against")

# The runs and reports above this package call a method's hooks with their own types, which the hooks' annotations
# here leave as Any rather than import (those packages import the registry): ``record`` is a finished run's
# compress.reports.records.RunRecord, ``config`` a run's compress.runs.config.RunConfig, and ``explain`` gives a
# compress.reports.footprint.Explanation (a JSON-ready dict, named here only as a mapping). Option values, given
# (a flag's value, the text of --set or of a pipeline's brackets) or converted to their fields' types, are ``object``
# here: each method's options are of its own types.


@dataclass(frozen=True)
class Preparation:
    """What a student method's ``prepare`` step may use: the run's data, task, teacher (its name, and the fine-tuned
    model), student shape and seed."""

    data: TokenizedTask
    task: TaskData
    teacher: str
    student_shape: EncoderConfig
    device: str
    show_progress: bool
    finetuned: Encoder | None = None
    seed: int = 0


@dataclass
class StageTurn:
    """What a student method's ``restage`` may use before stage ``index`` of its recipe: the run's preparation, the
    records of the stages finished (it may add to the last) and the student as they left it."""

    run: Preparation
    index: int
    done: list[StageRecord]
    student: Encoder


@dataclass(frozen=True, kw_only=True)
class Method:
    """What every method declares.

    rank      where it appears in lists, ``compare`` and errors (students first by convention: < 100).
    family    what kind of compression it is, in words ("distillation", "quantization", ...).
    options   a dataclass; every field has ``metadata={"help": ...}``; optional metadata ``flag``
              (its command-line spelling, default ``--field-name``; None: only through --set or
              a pipeline), ``parse`` (str -> value, for types other than int, float, str, bool) and
              ``search``: the values `compress search` tries, mildest compression first (a tuple, or a
              function of the teacher's shape giving one; the field's default stands for itself) and
              ``added_later`` (an option added after runs were stored: the run store's key leaves it out at its
              default, as those runs ran) and ``zero_is`` (what the default 0 stands for, "the shape's": a count
              given below 1 is refused in one line rather than read as the default).
    why       the run record's sentence, formatted with a run's ratios (keys: WHY_KEYS).
    explain   (teacher name, teacher shape, sequence length, options) -> the JSON-ready data of `compress
              explain`, for the shape those options give.
    topic     the name `compress explain` lists it under (methods explained together share one).
    in_compare  whether `compress compare` runs it by default on this machine.
    searched_for  the objectives (``size``) whose `compress search` space takes it by default where `compare` does
              not (int4: fewer bytes, not more speed).
    run_kind  what its runs are, in metrics.json's ``kind`` and the plots' colours ("distillation", ...).
    details   its own record's class (a :class:`Details`), or None when it records nothing of its own.
    summary_lines      record -> the lines `compress run` prints under the common one (plain text).
    report_lines       record -> its section of report.md (markdown lines).
    compared_sections  record -> its part of a comparison row (the per-layer picture of a pruned model).
    not_before  methods that may not follow it in a pipeline, each with the reason (one sentence).
    revision  raised when a change to the method alone changes what its runs give (int4's heads in 4 bits): the run
              store's key holds it past 1, so that method's stored runs are made again and every other's reused.
    """

    name: str
    rank: int
    family: str
    label: str
    summary: str
    options: type
    why: str
    explain: Callable[[str, EncoderConfig, int, Any], Mapping[str, object]]   # an Explanation
    topic: str = ""
    in_compare: Callable[[], bool] = lambda: True
    searched_for: tuple[str, ...] = ()
    run_kind: str = "distillation"
    details: type[Details] | None = None
    summary_lines: Callable[[Any], list[str]] = lambda record: []   # record: a RunRecord
    report_lines: Callable[[Any], list[str]] = lambda record: []
    compared_sections: Callable[[Any], list[Section]] = lambda record: []
    not_before: dict[str, str] = field(default_factory=dict)
    revision: int = 1

    gives: str = "fp32"   # what it hands to the next step of a pipeline: "fp32" or "quantized"

    kind: typing.ClassVar[str]

    @property
    def explain_topic(self) -> str:
        return self.topic or self.name

    def sentence(self, ratios: dict[str, float], against: str = "the teacher") -> str:
        """Why this method saves what it saves, with ratios of ``against`` / the model it made."""
        return self.why.format(params=ratios["params"], flops=ratios["flops"], flops_share=1 / ratios["flops"],
                               size=ratios["size_bytes"], against=against)

    def option_values(self, values: Mapping[str, object]) -> dict[str, object]:
        """``values`` converted to the options' field types (strings from --set or a pipeline); options
        the method does not take are an error."""
        known = option_fields(self.options)
        unknown = sorted(k for k in values if k not in known)
        if unknown:
            flags = ", ".join(flag_for(k) for k in unknown)
            raise CompressError(f"{flags} do(es) not apply to {self.name}; it takes {', '.join(sorted(known))}.")
        converted = {k: convert(self.options, k, v) for k, v in values.items()}
        for k, v in converted.items():
            zero_is = known[k].metadata.get("zero_is")
            if zero_is is not None and isinstance(v, int) and v < 1:
                raise CompressError(f"{flag_of(k, known[k])} {v}: give 1 or more, or leave it out for {zero_is}.")
        return converted

    def make_options(self, values: Mapping[str, object]) -> Any:
        """The options dataclass from ``values`` (see :meth:`option_values`)."""
        return self.options(**self.option_values(values))

    def as_recorded(self, values: Mapping[str, object]) -> dict[str, object]:
        """Every option of ``values`` (a run's resolved options) but those added after runs were recorded (metadata
        ``added_later``) at their default: how those runs ran, so their records and store keys still match."""
        known = option_fields(self.options)
        return {k: v for k, v in values.items()
                if not (k in known and known[k].metadata.get("added_later") and v == default_of(known[k]))}


@dataclass(frozen=True, kw_only=True)
class StudentMethod(Method):
    """Trains a new encoder from the fine-tuned teacher.

    student_config  (teacher shape, options) -> the student's shape; ValueError when it cannot be.
    build           (teacher, options) -> the student, initialised from the teacher.
    recipe          options -> the distillation recipe.
    prepare         optional; runs after the teacher is fine-tuned and before the student is built,
                    returns the training data and may fill options (a starting checkpoint); the recipe is
                    asked for again after it (a student cut from the teacher learns from the layers it kept).
    copies          optional; options -> the augmented copies the student asks for (``--augment``), or None for
                    the run's recipe's.
    prepared_parts  the recipe's parts that ``prepare`` sets from the data (a cut student's layer map and channels):
                    a finished run's recorded recipe is compared with the method's without them.
    restage         optional; (options, StageTurn) -> the student the next stage trains: the same, or one of another
                    shape (a student cut again while it distils); the recipe is asked for again after it.
    """

    student_config: Callable[[EncoderConfig, Any], EncoderConfig]
    build: Callable[[Encoder, Any], Encoder]
    recipe: Callable[[Any], Recipe]
    prepare: Callable[[Any, Preparation], TokenizedTask] | None = None
    copies: Callable[[Any], int | None] | None = None
    prepared_parts: tuple[str, ...] = ()
    restage: Callable[[Any, StageTurn], Encoder] | None = None

    kind: typing.ClassVar[str] = "student"


@dataclass(frozen=True, kw_only=True)
class Transform(Method):
    """Takes a model (the fine-tuned teacher, an earlier run, or the previous step) and writes a changed one.

    apply   (model, options, context) -> Transformed: the verb (:mod:`compress.registry.contract`); usable
            from Python on any encoder, and what `compress run` calls through :mod:`compress.runs.writer`.
    check   (run config, options) -> None; every check that needs no data, so a pipeline fails before
            its first step trains. The config's ``target`` is 'teacher' for a step whose input does not
            exist yet.
    check_input  optional (options, shape) -> None: the checks against the shape of the model it will be
            given, for a pipeline step whose input is a student not trained yet (its shape is known).
    shape   optional (options, input shape, context) -> the shape of the model it gives, as far as the options
            and the data tell before it runs (an estimate where the model decides: a global ranking of heads, an
            allocation of ranks by energy); None: the shape is unchanged. `compress search` sizes and times
            candidates with it before training them.
    recovery  optional (options, input shape) -> the recipe it trains with (pruning's and low-rank's recovery by
            distillation from the model it was given), so a search can time its training before it runs; None: it
            trains nothing.
    size    optional (options, shape) -> the bytes its model of that shape is stored in (quantization: as the least
            of its backends stores it); None: the fp32 weights, 4 bytes a parameter.
    probe   optional (model, options, context) -> for each runtime its result may run on, a function that makes
            that predictor from ``model`` (a model of the right shape, untrained) without data beyond calibration
            batches: what `compress search` times a candidate with before training it (building only the runtimes
            it asks for); None: the model runs in PyTorch as it is.
    for_throughput  optional (a step's option values, a batch shape) -> the values that have it run as fast as it can
            at batch throughput in batches of that shape (quantization left to choose its backend chooses by
            throughput there); None: how it runs does not depend on the objective.
    takes   what it transforms: "fp32" (an fp32 encoder); ``gives`` what it writes.
    follows_students  whether `compress compare` chains every default student with it by default
            (``distilbert+int8``): the pipelines a user tries first.
    seeded  whether its result depends on the run's seed (it trains, or samples calibration data): a
            comparison with several seeds runs it once per seed, else once (applied to the teacher).
    """

    apply: Callable[[Any, Any, Context], Transformed]
    check: Callable[[Any, Any], None]   # (a RunConfig, options)
    check_input: Callable[[Any, EncoderConfig], None] | None = None
    shape: Callable[[Any, EncoderConfig, Context], EncoderConfig] | None = None
    recovery: Callable[[Any, EncoderConfig], Recipe] | None = None
    size: Callable[[Any, EncoderConfig], int] | None = None
    probe: Callable[[Any, Any, Context], dict[str, Callable[[], Any]]] | None = None
    for_throughput: Callable[[dict[str, object], str], dict[str, object]] | None = None
    takes: str = "fp32"
    follows_students: bool = False
    seeded: bool = True

    kind: typing.ClassVar[str] = "transform"


_REGISTRY: dict[str, Method] = {}
_loaded = False


def register(method: Method) -> Method:
    """Add ``method`` (called by its module when imported)."""
    if not is_dataclass(method.options):
        raise TypeError(f"{method.name}: options must be a dataclass")
    if method.name in _REGISTRY and _REGISTRY[method.name] is not method:
        raise TypeError(f"two methods are called {method.name!r}")
    _REGISTRY[method.name] = method
    return method


def _load() -> None:
    global _loaded
    if _loaded:
        return
    package = importlib.import_module("compress.methods")  # by name: this layer imports no family
    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{module.name}")
    _loaded = True


def details_class(method: str) -> type[Details] | None:
    """The class of ``method``'s details (None for an unknown method or one that records nothing of its own)."""
    _load()
    found = _REGISTRY.get(method)
    return found.details if found is not None else None


def all_methods(kind: str | None = None) -> list[Method]:
    """Every registered method (of ``kind``: "student" or "transform"), in rank order."""
    _load()
    return sorted((m for m in _REGISTRY.values() if kind is None or m.kind == kind), key=lambda m: (m.rank, m.name))


def names(kind: str | None = None) -> list[str]:
    return [m.name for m in all_methods(kind)]


def families(methods: list[Method]) -> str:
    """The families of ``methods``, in their order, as a phrase: "pruning, low-rank factorization or quantization"."""
    found = list(dict.fromkeys(m.family for m in methods))
    return found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}"


def get_method(name: str) -> Method:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise CompressError(f"unknown method {name!r}; known: {', '.join(names())}.") from None


# ---- options: fields, flags and values -------------------------------------------------------------


def option_fields(options: type) -> dict[str, Field]:
    return {f.name: f for f in fields(options)}


def flag_of(name: str, field: Field | None = None) -> str:
    """A field's command-line flag (``--embedding-size``), or its name where it has none."""
    if field is not None and "flag" in field.metadata:
        return field.metadata["flag"] or name
    return "--" + name.replace("_", "-")


def flag_for(name: str) -> str:
    """The flag of option ``name``, whichever method declares it."""
    for method in all_methods():
        found = option_fields(method.options).get(name)
        if found is not None:
            return flag_of(name, found)
    return flag_of(name)


def field_type(options: type, name: str) -> Any:
    """The field's type with ``None`` taken out (``int | None`` -> int)."""
    hint = typing.get_type_hints(options)[name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else hint
    return hint


def optional(options: type, name: str) -> bool:
    hint = typing.get_type_hints(options)[name]
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def convert(options: type, name: str, value: Any) -> Any:
    """``value`` for field ``name``: strings (from --set or a pipeline) become the field's type."""
    if not isinstance(value, str):
        return value
    f = option_fields(options)[name]
    kind = field_type(options, name)
    if optional(options, name) and value.lower() == "none":
        return None
    flag = flag_of(name, f)
    if "parse" in f.metadata:
        try:
            return f.metadata["parse"](value)
        except ValueError as e:
            raise CompressError(f"{flag}: {e}") from None
    if kind is bool:
        if value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise CompressError(f"{flag} takes true or false, not {value!r}.")
    if kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            raise CompressError(f"{flag} takes {'an integer' if kind is int else 'a number'}, not {value!r}.") from None
    if kind is str:
        return value
    raise CompressError(f"{flag} cannot be given as text.")


def format_value(value: Any) -> str:
    """A value as written in a pipeline (the inverse of :func:`convert`)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def default_of(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else None  # type: ignore[misc]


__all__ = ["Method", "Preparation", "StudentMethod", "Transform", "WHY_KEYS", "all_methods", "convert",
           "default_of", "details_class", "families", "field_type", "flag_for", "flag_of", "format_value",
           "get_method", "names", "option_fields", "optional", "register"]
