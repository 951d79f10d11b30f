"""What the quantization methods share: their explanation, and how one is declared.

Each quantization method is a tiny module of ``formats/`` (``int8.py``, ``bf16.py``, ...) calling
:func:`quantization` with its format and options (:mod:`compress.methods.quantization.options`); the verb is
:mod:`compress.methods.quantization.verb`, quantization-aware training :mod:`compress.methods.quantization.aware`,
the engine :mod:`compress.quantize` (backends, artefacts). This module imports neither of those two at its top: the
registry loads it for ``compress --help``, and they load torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from compress.errors import CompressError
from compress.methods.quantization.details import QuantDetails
from compress.methods.quantization.options import AwareOptions, QuantOptions, relaxed_refusal, with_options
from compress.methods.quantization.report import report_lines, summary_lines
from compress.models.config import EncoderConfig
from compress.quantize.formats import QuantMethod
from compress.registry import Context, Transform, Transformed, all_methods, register

if TYPE_CHECKING:
    from compress.bench.measurement import Predictor
    from compress.reports.footprint import Explanation

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.


@dataclass(frozen=True, kw_only=True)
class Quantization(Transform):
    """A quantization transform: its format (dtype, backends) is what the engine needs."""

    format: QuantMethod


# What stays fp32 under int8, by (backend, calibrated), in the words of compress.quantize.sizes.
_KEPT_FP32 = {("torch", False): "the embedding tables, biases and layer norms",
              ("onnxruntime", False): "biases and layer norms",
              ("openvino", False): "biases and layer norms",
              ("onnxruntime", True): "the pooler, classifier, biases and layer norms"}

# Speed figures measured by the project, labelled with where and how: speed is never computed from a shape.
# One run of benchmarks/quantization.py (docs/tutorial.md, section on quantization), x = faster than PyTorch fp32.
_MEASURED_ON = ("benchmarks/quantization.py on the minilm teacher, MR inputs, sequence length 64, 2 threads, one "
                "AVX-512 EPYC (docs/tutorial.md); not a measurement of this CPU")
_MEASURED_SPEED = {
    "int8": "ONNX Runtime dynamic int8 ran 3.77x and PyTorch int8 2.40x faster than PyTorch fp32 at batch 1 "
            "(ONNX Runtime 2.29-3.98x over six runs)",
    "static-int8": "ONNX Runtime static int8 ran 3.30x faster than PyTorch fp32 at batch 1",
    "onnx": "ONNX Runtime fp32 ran 1.52x faster than PyTorch fp32 at batch 1",
}


def explain(fmt: QuantMethod, name: str, tc: EncoderConfig, seq_len: int, options: Any = None) -> Explanation:
    """Bytes of ``fmt`` on the teacher's shape, counted as the backend the run uses stores them
    (:mod:`compress.quantize.sizes`); the student column is the backend ``--backend`` names, for ``auto``
    the one tried first. Speed is left to the run, which measures it on this CPU."""
    from compress.quantize.artefacts import candidate_backends
    from compress.quantize.sizes import fp32_elements, scheme, stored_bytes
    from compress.reports.footprint import footprint, side_by_side

    asked = getattr(options, "backend", "auto")
    fmt = with_options(fmt, options)
    backends = candidate_backends(fmt, asked)
    teacher = footprint(tc, seq_len)
    student = replace(teacher, size_bytes=stored_bytes(tc, fmt.dtype, backends[0], fmt.calibrated, fmt.group_size,
                                                       fmt.int4_share))
    formula = [scheme(fmt.dtype, b, fmt.calibrated) for b in backends]
    notes = ["Quantization changes bytes and time, not parameters or FLOPs: the same multiplications "
             "run on narrower numbers."]
    if fmt.dtype == "int8":
        total = teacher.size_bytes // 4
        for b in backends:
            size = stored_bytes(tc, "int8", b, fmt.calibrated)
            notes.append(f"{b}: {teacher.size_bytes / size:.2f}x fewer bytes than fp32, not 4x: "
                         f"{_KEPT_FP32[(b, fmt.calibrated)]} stay fp32 "
                         f"({fp32_elements(tc, b, fmt.calibrated) / total:.1%} of the parameters), plus the scales.")
    if len(backends) > 1:
        listed = ", ".join(backends[:-1]) + f" and {backends[-1]}"
        notes.append(f"--backend auto (the default) builds each of {listed} that is installed, times each on this "
                     "CPU and keeps the fastest at batch 1 (--choose-by throughput: at batch 32) of those that keep "
                     f"--min-retention ({QuantOptions().min_retention:.0%}) of fp32's dev accuracy; the student "
                     f"column shows {backends[0]}'s bytes.")
    if fmt.dtype == "mixed":
        notes.append(f"Bits per matrix: the size is an upper bound, counted as if exactly int4_share "
                     f"({fmt.int4_share:g}) of the weights were in 4 bits; the run gives whole matrices 4 bits, the "
                     "least sensitive first, until at least that share is, and its report lists each matrix's "
                     "sensitivity and width.")
    notes.append("Bytes are those of the stored tensors (weights, scales, zero points), counted from the shape as "
                 "each backend stores them; the file adds its structure (ONNX graph, safetensors header), under 1% "
                 "at minilm's size; OpenVINO's graph is its own file, the .xml: 0.56 MB beside minilm's int8 "
                 "weights, 2.4% of the model's bytes.")
    notes.append(_speed_note(fmt))
    out = side_by_side("quantize", name, teacher, student, formula, notes)
    out["backend"] = backends[0]
    out["precisions"] = {"fp32": teacher.size_bytes} | {
        f"{m.name} ({b})": stored_bytes(tc, m.format.dtype, b, m.format.calibrated, m.format.group_size,
                                        m.format.int4_share)
        for m in all_methods("transform") if isinstance(m, Quantization) and m.format.dtype != "fp32"
        for b in m.format.backends}
    out["lines"] = ["size by precision: " + ", ".join(f"{k} {v / 1e6:,.1f} MB" for k, v in out["precisions"].items())]
    return out


def _speed_note(fmt: QuantMethod) -> str:
    """What is known about speed: measured by the run on this CPU; for half precision, whether this CPU has
    the units (read now); otherwise one labelled measurement from the project's benchmark."""
    from compress.bench.machine import HALF_NAMES, cpu_features, half_available

    run = f"Speed is not computed from a shape: `compress run {fmt.name}` times it on this CPU."
    if fmt.dtype in HALF_NAMES:
        reason = half_available(fmt.dtype, cpu_features())
        here = reason[0].upper() + reason[1:] if reason else f"This CPU computes in {fmt.dtype} natively."
        return f"{run} {here}"
    if fmt.name in _MEASURED_SPEED:
        return f"{run} For scale only: {_MEASURED_SPEED[fmt.name]} in {_MEASURED_ON}."
    return run


def quantization(*, name: str, rank: int, dtype: str, backends: tuple[str, ...], label: str, summary: str,
                 why: str, calibrated: bool = False, follows_students: bool = False,
                 options: type[QuantOptions] = QuantOptions, in_compare_default: bool = True,
                 searched_for: tuple[str, ...] = (), aware: bool = False, revision: int = 1) -> Quantization:
    """Declare and register one quantization method. A half-precision one is compared by default only
    where the CPU computes in its format (elsewhere it runs emulated, slower than fp32); a weight-only one takes
    :class:`~.options.GroupedOptions` (its format's group size is their default); an ``aware`` one trains with the
    rounding in its forward pass before it is quantized (:class:`~.options.AwareOptions`)."""
    defaults = options()
    fmt = QuantMethod(name, dtype, backends, summary, calibrated, group_size=getattr(defaults, "group_size", None),
                      int4_share=getattr(defaults, "int4_share", None))

    def in_compare() -> bool:
        from compress.bench.machine import HALF_NAMES, cpu_features, half_available

        return in_compare_default and (dtype not in HALF_NAMES or half_available(dtype, cpu_features()) is None)

    def check(config: Any, options: QuantOptions) -> None:
        """Every check that needs no data, so a pipeline fails before its first step trains."""
        from compress.bench.batch_shapes import check_batch_shape
        from compress.methods.quantization.verb import usable_backends

        if config.epochs or config.lr or config.layer_map or config.patience:
            raise CompressError(f"{name} trains with --recovery-epochs and --recovery-lr; --epochs, --lr, --layer-map "
                                "and --patience do not apply." if aware else
                                f"{name} trains nothing: student options, --epochs, --lr, --layer-map "
                                "and --patience do not apply.")
        usable_backends(fmt, options.backend, getattr(config, "speed_device", "cpu"))
        check_batch_shape(options.batch_shape)

    def resolved(options: QuantOptions) -> QuantOptions:
        """An aware format trains for one backend's rounding: ``auto`` is its first (there is no choosing after)."""
        return replace(options, backend=backends[0]) if aware and options.backend == "auto" else options

    def apply(model: Any, options: QuantOptions, context: Context) -> Transformed:
        if aware:
            from compress.methods.quantization.aware import apply as train_then_quantize

            return train_then_quantize(model, resolved(options), context, with_options(fmt, options))
        from compress.methods.quantization.verb import apply as quantize

        return quantize(model, options, context, with_options(fmt, options))

    def check_input(options: QuantOptions, shape: EncoderConfig) -> None:
        if shape.relaxed:
            raise CompressError(relaxed_refusal(name))

    def recovery(options: AwareOptions, shape: EncoderConfig) -> Any:
        from compress.methods.quantization.aware import aware_recipe

        return aware_recipe(name, options, shape.num_layers)

    def probe(model: Any, options: QuantOptions, context: Context) -> dict[str, Callable[[], Predictor]]:   # by backend
        from compress.methods.quantization.verb import probe as built

        return built(model, resolved(options), context, with_options(fmt, options))

    def for_throughput(values: dict[str, object], batch_shape: str) -> dict[str, object]:
        """A step left to choose its backend (auto) chooses by throughput at ``batch_shape``; one whose backend is
        named, or that has one backend (or trains for one), runs as it is."""
        options = method.make_options(values)
        if aware or len(backends) < 2 or options.backend != "auto" or "choose_by" in values:
            return values
        return values | {"choose_by": "throughput"} | ({"batch_shape": batch_shape} if batch_shape != "filled" else {})

    def size(options: QuantOptions, shape: EncoderConfig) -> int:
        from compress.methods.quantization.verb import usable_backends
        from compress.quantize.sizes import stored_bytes

        chosen = with_options(fmt, options)
        return min(stored_bytes(shape, dtype, b, calibrated, chosen.group_size, chosen.int4_share)
                   for b in usable_backends(chosen, resolved(options).backend, shape=shape)[0])

    def explain_this(teacher: str, tc: EncoderConfig, seq_len: int, options: Any = None) -> Explanation:
        return explain(fmt, teacher, tc, seq_len, resolved(options or defaults))

    method = register(Quantization(
        name=name, rank=rank, family="quantization", label=label, summary=summary, options=options,
        why=why, explain=explain_this, topic="quantize", in_compare=in_compare, searched_for=searched_for,
        format=fmt, takes="fp32",
        gives="quantized", follows_students=follows_students, seeded=calibrated or aware, run_kind="quantization",
        details=QuantDetails, summary_lines=summary_lines, report_lines=report_lines, check=check, apply=apply,
        probe=probe, size=size, for_throughput=for_throughput, recovery=recovery if aware else None,
        check_input=check_input if aware else None,
        revision=revision,
    ))
    return method



def quant_format(name: str) -> QuantMethod:
    """The format of the quantization method ``name`` (for the engine's tests and benchmarks)."""
    found = {m.name: m.format for m in all_methods("transform") if isinstance(m, Quantization)}
    try:
        return found[name]
    except KeyError:
        raise CompressError(f"unknown quantization method {name!r}; known: {', '.join(found)}.") from None
