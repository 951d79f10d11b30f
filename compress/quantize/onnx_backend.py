"""ONNX export and ONNX Runtime quantization: fp32, dynamic int8, static int8 calibrated on examples.

* fp32: the encoder traced to ONNX (opset 17, batch and sequence length dynamic), logits out.
* dynamic int8: weights of MatMul/Gather in int8, per output channel (so the embedding table
  shrinks too), activations quantized at run time from their observed range.
* static int8: activation scales fixed in advance from calibration batches of training examples
  (QDQ format), so no range is computed at run time.
* weight-only int4: every MatMul weight and embedding table in 4 bits, one fp32 scale per group of input
  channels (``MatMulNBits``, ``GatherBlockQuantized``), activations in fp32 (quantized to int8 inside the
  4-bit matmul, ONNX Runtime's accuracy level 4).
* bits per matrix: the matrices :mod:`compress.quantize.bit_allocation` gives 4 bits as weight-only int4, every
  other one as dynamic int8, in one graph.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from compress.errors import CompressError
from compress.models.config import INPUT_NAMES
from compress.models.encoder import Encoder
from compress.quantize.bit_allocation import allocate, fisher_diagonal
from compress.quantize.rounding import int8_weight_levels

if TYPE_CHECKING:
    import onnx

    from compress.quantize.formats import MatrixBits

OPSET = 17


def onnxruntime_available() -> str | None:
    """None when onnx and onnxruntime import, else why not (one sentence)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as e:
        return f"ONNX Runtime is not installed ({e.name}); install it with `pip install onnx onnxruntime`."
    return None


def int4_available() -> str | None:
    """None when ONNX Runtime's 4-bit weight quantizer imports (it needs onnx-ir), else why not (one sentence)."""
    if reason := onnxruntime_available():
        return reason
    try:
        import onnx_ir  # noqa: F401
    except ImportError:
        return "ONNX Runtime's 4-bit weight quantizer needs onnx-ir; install it with `pip install onnx-ir`."
    return None


def _require_onnxruntime() -> None:
    reason = onnxruntime_available()
    if reason:
        raise CompressError(reason)


class _Logits(nn.Module):
    """The encoder with positional inputs and the logits as its only output, as ONNX wants it."""

    def __init__(self, model: Encoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, attention_mask, token_type_ids).logits


def export_onnx(model: Encoder, path: Path) -> None:
    """Write ``model`` (fp32, eval mode) to ``path`` as an ONNX graph with dynamic batch and length."""
    _require_onnxruntime()
    wrapped = _Logits(copy.deepcopy(model).float().eval())  # the caller's model is left as it was
    # 16 tokens: few enough that a relaxed ALBERT's deltas are traced as their factors (encoder.merges), so the
    # file holds each parameter once rather than every layer's merged matrix.
    example = torch.ones(2, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES} | {"logits": {0: "batch"}}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer notes about Python values in the graph; they are constants here
        torch.onnx.export(wrapped, (example, example, torch.zeros_like(example)), str(path),
                          input_names=list(INPUT_NAMES), output_names=["logits"], dynamic_axes=axes,
                          opset_version=OPSET, dynamo=False)


def _preprocess(source: Path) -> Path:
    """ONNX Runtime's recommended step before quantizing: shape inference and graph optimization."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    target = source.with_name(source.stem + "-pre.onnx")
    quant_pre_process(str(source), str(target))
    return target


def quantize_dynamic_int8(source: Path, target: Path) -> None:
    """ONNX Runtime dynamic int8 of the fp32 graph at ``source``, one weight scale per output channel, the weights on
    as many levels as this CPU's kernels sum exactly (:func:`int8_weight_levels`).

    Per-channel scales cost no speed here and keep small students accurate: on MR, DistilBERT's
    int8 lost 1.07 points with one scale per tensor and 0.29 with one per channel.
    """
    _require_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    prepared = _preprocess(source)
    quantize_dynamic(str(prepared), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=int8_weight_levels() < 127)
    prepared.unlink()


def quantize_static_int8(source: Path, target: Path, calibration: Iterable[Mapping[str, np.ndarray]]) -> None:
    """ONNX Runtime static int8 (QDQ, per-channel weights) with activation ranges from ``calibration``.

    Activations are unsigned and weights signed (U8S8), the combination ONNX Runtime's x86 kernels
    are fastest at.
    """
    _require_onnxruntime()
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.batches, None)
            return None if batch is None else {k: np.asarray(batch[k], dtype=np.int64) for k in INPUT_NAMES}

    prepared = _preprocess(source)
    quantize_static(str(prepared), str(target), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    op_types_to_quantize=["MatMul", "Gather"], calibrate_method=CalibrationMethod.MinMax,
                    reduce_range=int8_weight_levels() < 127)
    prepared.unlink()


# ONNX Runtime's MatMulNBits computes in fp32 at level 0 and quantizes the activations to int8 per block at level 4.
# One timing of minilm at batch 1, 32 tokens, 2 threads on a 2-core AVX-512 EPYC (interleaved in one process, while
# another job trained): level 0 ran 0.84x fp32's speed, level 4 1.12x, with logits within 1e-4 of each other (dynamic
# int8: 2.04x). int4 saves bytes there, not time; benchmarks/quantization.py times it against the other formats.
INT4_ACCURACY_LEVEL = 4


def quantize_weights_int4(source: Path, target: Path, group_size: int) -> None:
    """ONNX Runtime weight-only int4 of the fp32 graph at ``source``: each linear weight (the pooler's and
    classifier's too) and embedding table in signed 4 bits, symmetric (no zero point), one fp32 scale per
    ``group_size`` input channels (per output channel of a MatMul, per row of a table); biases and layer norms stay
    fp32."""
    import onnx

    model = onnx.load(str(source))
    _read_shared_weights_directly(model.graph)
    _gemm_as_matmul(model.graph)
    _write_int4(model, target, group_size, ())


def _gemm_as_matmul(graph: onnx.GraphProto) -> None:
    """Each ``Gemm`` of an input and a weight (how the exporter writes the heads, which read one vector per sentence)
    rewritten as the ``MatMul`` and ``Add`` it computes, with its weight transposed once, so that the 4-bit quantizer,
    which takes MatMuls only, quantizes the heads as it does every other matrix."""
    from onnx import helper, numpy_helper

    weights = {t.name: t for t in graph.initializer}
    nodes = []
    for node in graph.node:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute} if node.op_type == "Gemm" else {}
        plain = attributes.get("alpha", 1.0) == 1.0 and attributes.get("beta", 1.0) == 1.0 and \
            not attributes.get("transA", 0)
        if node.op_type != "Gemm" or node.input[1] not in weights or not plain:
            nodes.append(node)
            continue
        weight = numpy_helper.to_array(weights[node.input[1]])
        name = f"{node.name}.weight_for_matmul"
        graph.initializer.append(numpy_helper.from_array(
            np.ascontiguousarray(weight.T if attributes.get("transB", 0) else weight), name))
        biased = len(node.input) > 2 and node.input[2] != ""
        product = f"{node.output[0]}_product" if biased else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], name], [product], name=f"{node.name}_MatMul"))
        if biased:
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]], name=f"{node.name}_Add"))
    read = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in read]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept)


def _write_int4(model: onnx.ModelProto, target: Path, group_size: int, keep: Iterable[str]) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    if reason := int4_available():
        raise CompressError(reason)
    config = DefaultWeightOnlyQuantConfig(
        block_size=group_size, is_symmetric=True, accuracy_level=INT4_ACCURACY_LEVEL, bits=4,
        op_types_to_quantize=("MatMul", "Gather"), quant_axes=(("MatMul", 0), ("Gather", 1)))
    quantizer = MatMulNBitsQuantizer(model, algo_config=config, nodes_to_exclude=list(keep))
    # a line per node, and a note that it raises the opset to 21 (int4's); numpy's note on an all-zero group (a
    # padding row), which it divides before it discards the quotient
    with _quiet(), np.errstate(divide="ignore", invalid="ignore"):
        quantizer.process()
    _store_each_initializer_once(quantizer.model.model.graph)
    quantizer.model.save_model_to_file(str(target), use_external_data_format=False)


def quantize_bits_per_matrix(source: Path, target: Path, model: Encoder, int4_share: float, group_size: int,
                             batches: Iterable[Mapping[str, np.ndarray]]) -> list[MatrixBits]:
    """The fp32 graph at ``source`` (exported from ``model``) with each candidate matrix in the width
    :func:`compress.quantize.bit_allocation.allocate` gives it (sensitivities from ``batches`` of training
    sentences): 4-bit ones as :func:`quantize_weights_int4` writes them, the rest as :func:`quantize_dynamic_int8`
    does; returns the allocation."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if reason := int4_available():
        raise CompressError(reason)
    prepared = _preprocess(source)
    graph_model = onnx.load(str(prepared))
    prepared.unlink()
    _read_shared_weights_directly(graph_model.graph)
    readers = weight_readers(graph_model.graph, model)
    tables = {name for name, (op, _) in readers.items() if op == "Gather"}
    choices = allocate(model, fisher_diagonal(model, batches), int4_share, group_size, among=set(readers),
                       tables=tables)
    keep = [node for m in choices if m.bits == 8 for node in readers[m.name][1]]
    halfway = target.with_name(target.stem + "-int4.onnx")
    _write_int4(graph_model, halfway, group_size, keep)
    with _quiet():
        quantize_dynamic(str(halfway), str(target), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=int8_weight_levels() < 127)
    halfway.unlink()
    return choices


def weight_readers(graph: onnx.GraphProto, model: Encoder) -> dict[str, tuple[str, list[str]]]:
    """For each parameter of ``model`` that the graph holds as a MatMul's weight (transposed) or a Gather's table,
    its op type and the nodes that read it; found by value, since the exporter names a transposed weight anew."""
    from onnx import numpy_helper

    def key(array: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float32).tobytes()).hexdigest()

    owners: dict[tuple[str, str], str] = {}
    for name, p in model.named_parameters():
        if p.dim() == 2:
            value = p.detach().float().cpu().numpy()
            owners[("Gather", key(value))] = name
            owners[("MatMul", key(value.T))] = name
    weights = {t.name: t for t in graph.initializer}
    readers: dict[str, tuple[str, list[str]]] = {}
    for node in graph.node:
        at = {"MatMul": 1, "Gather": 0}.get(node.op_type)
        if at is None or node.input[at] not in weights:
            continue
        owner = owners.get((node.op_type, key(numpy_helper.to_array(weights[node.input[at]]))))
        if owner is not None:
            readers.setdefault(owner, (node.op_type, []))[1].append(node.name)
    return readers


@contextmanager
def _quiet() -> Iterator[None]:
    """ONNX Runtime's quantizers log a line per node (at INFO, on their logger and on the root one): keep errors."""
    loggers = [logging.getLogger(), logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _read_shared_weights_directly(graph: onnx.GraphProto) -> None:
    """Point the readers of an ``Identity`` of an initializer (how the exporter writes a weight that several layers
    share, as ALBERT's) at the initializer itself, so that the quantizer, which quantizes a MatMul only when its
    weight is an initializer, quantizes every use of a shared weight and no fp32 copy is left behind."""
    weights = {tensor.name for tensor in graph.initializer}
    alias = {node.output[0]: node.input[0] for node in graph.node
             if node.op_type == "Identity" and node.input[0] in weights}
    kept = [node for node in graph.node if not (node.op_type == "Identity" and node.output[0] in alias)]
    for node in kept:
        node.input[:] = [alias.get(name, name) for name in node.input]
    del graph.node[:]
    graph.node.extend(kept)


def _store_each_initializer_once(graph: onnx.GraphProto) -> None:
    """Keep one of the initializers of one name: the quantizer writes a shared weight's 4-bit form (the same
    bytes, the same name) once per MatMul that reads it."""
    seen: set[str] = set()
    unique = [t for t in graph.initializer if not (t.name in seen or seen.add(t.name))]
    del graph.initializer[:]
    graph.initializer.extend(unique)
