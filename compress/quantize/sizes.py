"""Bytes of a quantized model's tensors computed from its shape alone, backend by backend, as each stores them.

`compress explain` needs sizes for teachers whose weights are not on this machine (bert-large), so
they are counted, not measured; what each backend stores was read off the artefacts compress writes
(tests/test_explain_numbers.py compares these counts with real artefacts, so the two cannot drift):

* PyTorch dynamic int8 (``torch.ao``): every ``nn.Linear`` weight in int8 with one fp32 scale and one
  int64 zero point per matrix; biases, embedding tables and layer norms stay fp32.
* ONNX Runtime dynamic int8: every linear weight in int8 with one fp32 scale and one int8 zero point
  per output channel; every embedding table (a ``Gather``) in uint8 with one scale and zero point per
  table; biases and layer norms stay fp32.
* ONNX Runtime static int8 (QDQ, asked to quantize MatMul and Gather): as dynamic, except that the
  pooler and classifier, exported as ``Gemm``, stay fp32; the activations' scales and zero points (a
  few bytes each) are left out.
* OpenVINO int8 (NNCF, transformer preset): every linear weight (on 7 bits: NNCF's overflow fix) and every
  embedding table in int8 with one fp32 scale per output channel (per row of a table), no zero point;
  biases and layer norms stay fp32; the activations' ranges and SmoothQuant's per-channel factors (a few
  bytes a channel) are left out.
* ONNX Runtime weight-only int4 (``MatMulNBits``, ``GatherBlockQuantized``): every linear weight, the pooler's
  and classifier's too (exported as ``Gemm``, rewritten as ``MatMul`` and ``Add`` for it), in signed 4 bits, two to a
  byte, one fp32 scale per group of ``group_size`` input channels of each output channel (the input channels padded up
  to whole groups), no zero point; every embedding table in 4 bits with one fp32 scale per group of ``group_size``
  columns of each row; biases and layer norms stay fp32.
* OpenVINO weight-only int4 (NNCF's weight compression, all layers): every linear weight, the heads' too, and every
  embedding table in signed 4 bits, two to a byte, one fp16 scale per group of ``group_size`` input channels of each
  output channel (per group of columns of each row of a table); biases and layer norms stay fp32.
* ONNX Runtime bits per matrix: as its dynamic int8, except the matrices the allocation gives 4 bits (at least
  ``int4_share`` of the weights of every linear weight but the heads' and every embedding table), stored as its
  weight-only int4 stores them; counted from the shape as if exactly that share of those bytes were in 4 bits (the
  allocation moves whole matrices, so the model written is that size or smaller).
* PyTorch float8 (e4m3): every linear weight and embedding table in one byte per weight with one fp32 scale per
  row (per output channel, per token); biases and layer norms stay fp32.
* half precision: every tensor in 2 bytes (PyTorch: bf16 or fp16; OpenVINO's bf16: stored as fp16, widened
  when compiled); fp32 (PyTorch, ONNX, OpenVINO IR): 4 bytes.

The files add their own structure (the ONNX graph, the safetensors header) on top of these bytes.
"""

from __future__ import annotations

from torch import nn

from compress.models.accounting import meta_encoder
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.quantize.formats import GROUP_SIZES

FP32 = 4
SCALE = 4                 # one fp32 scale
HALF = 2                  # one fp16 scale (OpenVINO's int4)
TORCH_ZERO_POINT = 8      # torch.ao's zero point, saved as int64
ORT_ZERO_POINT = 1        # ONNX Runtime's zero point, int8 or uint8
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

# The heads run on one vector per sequence; the ONNX export writes them as Gemm, not MatMul.
GEMM_MODULES = ("pooler", "classifier")

# How each backend turns a weight into its stored form, in the terms of the lists above.
SCHEMES: dict[tuple[str, str, bool], str] = {
    ("int8", "torch", False):
        "PyTorch (torch.ao) dynamic int8: each linear weight matrix W -> round(W / s) in int8, one scale per "
        "matrix, s = max|W| / 127.5; embedding tables, biases and layer norms stay fp32; activations are "
        "quantized on the fly, batch by batch, and the int8 products rescaled to fp32",
    ("int8", "onnxruntime", False):
        "ONNX Runtime dynamic int8: each linear weight -> round(w / s_c) in int8, one scale per output "
        "channel c, s_c = max|w_c| / 127; each embedding table -> round(w / s) + z in uint8, one scale and "
        "zero point per table, s = (max w - min w) / 255 over a range that holds 0; biases and layer norms stay "
        "fp32; activations are quantized on the fly, batch by batch, and the int8 products rescaled to fp32",
    ("int8", "onnxruntime", True):
        "ONNX Runtime static int8 (QDQ): weights as in its dynamic int8 (int8 per output channel, embedding "
        "tables uint8 per table) except the pooler and classifier, which stay fp32; activations in uint8 with "
        "scales fixed in advance from calibration batches of training examples",
    ("int4", "onnxruntime", False):
        "ONNX Runtime weight-only int4: each linear weight -> round(w / s_g) in 4 bits (-8 to 7), one scale per "
        "group g of group_size input channels of each output channel, s_g = max|w_g| / 8; each embedding table "
        "alike, one scale per group of group_size columns of each row; the pooler and classifier in 4 bits as well "
        "(their Gemm rewritten as MatMul and Add); biases and layer norms stay fp32; activations stay fp32 (quantized "
        "to int8 inside the 4-bit matmul)",
    ("int4", "openvino", False):
        "OpenVINO weight-only int4 (NNCF, every layer): each linear weight, the pooler's and classifier's too, -> "
        "round(w / s_g) in 4 bits, one fp16 scale per group g of group_size input channels of each output channel; "
        "each embedding table alike, per group of group_size columns of each row; biases and layer norms stay fp32; "
        "activations in fp32",
    ("mixed", "onnxruntime", False):
        "ONNX Runtime bits per matrix: each matrix's expected loss at 4 and at 8 bits from the Fisher information on "
        "training sentences (1/2 sum F (w - q(w))^2); the least sensitive, at least int4_share of the weights, in "
        "ONNX Runtime's weight-only int4 (one scale per group of group_size input channels), every other one in its "
        "dynamic int8 (one scale per output channel; tables in uint8 per table); biases and layer norms stay fp32",
    ("fp8", "torch", False):
        "float8 e4m3: each linear weight and embedding table -> w / s_c rounded to e4m3 (4 exponent bits, 3 mantissa "
        "bits, at most 448), one fp32 scale per row c (output channel, token), s_c = max|w_c| / 448; biases and "
        "layer norms stay fp32; widened to fp32 when loaded (no CPU computes in float8), so it saves bytes on disk, "
        "not time or memory at run time",
    ("bf16", "torch", False): "bf16: every tensor stored in 16 bits (8 exponent bits, like fp32, 7 mantissa bits)",
    ("fp16", "torch", False): "fp16: every tensor stored in 16 bits (5 exponent bits, 10 mantissa bits)",
    ("fp32", "onnxruntime", False): "ONNX fp32: the same fp32 tensors, exported to an ONNX graph",
    ("int8", "openvino", False):
        "OpenVINO int8 (NNCF, transformer preset, overflow fix): each linear weight -> round(w / s_c) in int8 on "
        "7 bits (-63 to 64), one scale per output channel c (7 bits keep CPUs without VNNI from "
        "saturating); each embedding table -> int8 on 8 bits, one scale per row; biases and layer norms stay "
        "fp32; activation ranges fixed in advance on training sentences (SmoothQuant first moves each input "
        "channel's range from the activations into the weights)",
    ("bf16", "openvino", False):
        "OpenVINO bf16: every tensor stored in 16 bits (as fp16 on disk), computed in bf16 where the CPU has bf16 "
        "units",
    ("fp32", "openvino", False): "OpenVINO fp32: the same fp32 tensors in OpenVINO's IR, computed in f32",
}


def scheme(dtype: str, backend: str, calibrated: bool = False) -> str:
    """The sentence saying how ``backend`` stores weights in ``dtype``."""
    return SCHEMES[(dtype, backend, calibrated)]


def _meta_encoder(config: EncoderConfig) -> Encoder:
    return meta_encoder(config)   # shapes only, no initialisers: a search sizes thousands of candidates


def _own_elements(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False))


def _int8_module_bytes(name: str, module: nn.Module, backend: str, calibrated: bool) -> int:
    """Bytes of one module's own parameters under int8 on ``backend``."""
    if isinstance(module, nn.Linear):
        weight = module.weight.numel()
        bias = module.bias.numel() * FP32 if module.bias is not None else 0
        if backend == "torch":
            return weight + SCALE + TORCH_ZERO_POINT + bias
        if backend == "openvino":
            return weight + module.out_features * SCALE + bias
        if calibrated and name in GEMM_MODULES:
            return weight * FP32 + bias
        return weight + module.out_features * (SCALE + ORT_ZERO_POINT) + bias
    if isinstance(module, nn.Embedding) and backend == "onnxruntime":
        return module.weight.numel() + SCALE + ORT_ZERO_POINT
    if isinstance(module, nn.Embedding) and backend == "openvino":
        return module.weight.numel() + module.num_embeddings * SCALE
    return _own_elements(module) * FP32


def _int4_module_bytes(module: nn.Module, group_size: int) -> int:
    """Bytes of one module's own parameters under ONNX Runtime's weight-only int4 with ``group_size``."""
    if isinstance(module, nn.Linear):
        groups = -(-module.in_features // group_size)
        bias = module.bias.numel() * FP32 if module.bias is not None else 0
        return module.out_features * groups * (group_size // 2 + SCALE) + bias
    if isinstance(module, nn.Embedding):
        rows, columns = module.weight.shape
        return -(-rows * columns // 2) + rows * -(-columns // group_size) * SCALE
    return _own_elements(module) * FP32


def ov_int4_misfit(config: EncoderConfig, group_size: int) -> str | None:
    """Why OpenVINO's int4 cannot store a model of this shape in groups of ``group_size`` (NNCF needs every matrix's
    input channels, every table's columns, to be a multiple of it), or None."""
    widths = sorted({module.weight.shape[1] for module in _meta_encoder(config).modules()
                     if isinstance(module, (nn.Linear, nn.Embedding)) and module.weight.shape[1] % group_size})
    if not widths:
        return None
    every = {module.weight.shape[1] for module in _meta_encoder(config).modules()
             if isinstance(module, (nn.Linear, nn.Embedding))}
    fitting = [size for size in GROUP_SIZES if all(width % size == 0 for width in every)]
    remedy = f"--group-size {' or '.join(map(str, fitting))} divides every one" if fitting else \
        f"no group size of {', '.join(map(str, GROUP_SIZES))} divides them all"
    return (f"int4 on OpenVINO groups every matrix's input channels by group_size {group_size}, and this model has "
            f"matrices {', '.join(map(str, widths))} wide; {remedy}, and ONNX Runtime pads instead.")


def _ov_int4_module_bytes(module: nn.Module, group_size: int) -> int:
    """Bytes of one module's own parameters under OpenVINO's int4 weight compression with ``group_size``: 4-bit
    weights and one fp16 scale per group, for every linear layer and table."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        rows, columns = module.weight.shape   # a Linear's rows are its output channels, a table's its tokens
        rest = sum(p.numel() for n, p in module.named_parameters(recurse=False) if n != "weight")
        return -(-rows * columns // 2) + rows * -(-columns // group_size) * HALF + rest * FP32
    return _own_elements(module) * FP32


def _fp8_module_bytes(module: nn.Module) -> int:
    """Bytes of one module's own parameters under float8: a matrix's weights one byte each plus a scale per row."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        return module.weight.numel() + module.weight.shape[0] * SCALE + \
            sum(p.numel() for n, p in module.named_parameters(recurse=False) if n != "weight") * FP32
    return _own_elements(module) * FP32


def fp32_elements(config: EncoderConfig, backend: str, calibrated: bool = False) -> int:
    """Parameters that int8 on ``backend`` leaves in fp32 (biases, layer norms, and what it does not quantize)."""
    model = _meta_encoder(config)
    quantized = 0
    for name, module in model.named_modules():
        kept_fp32 = backend == "onnxruntime" and calibrated and name in GEMM_MODULES
        linear = isinstance(module, nn.Linear) and not kept_fp32
        if linear or (isinstance(module, nn.Embedding) and backend in ("onnxruntime", "openvino")):
            quantized += module.weight.numel()
    return sum(p.numel() for p in model.parameters()) - quantized


def allocated_bytes(config: EncoderConfig, four_bit: set[str], group_size: int) -> int:
    """Bytes of ONNX Runtime's bits per matrix once allocated: the modules whose weight is named in ``four_bit``
    (``attention.0.query.weight``) as its weight-only int4 stores them, every other as its dynamic int8 does."""
    return sum(_int4_module_bytes(module, group_size) if f"{name}.weight" in four_bit else
               _int8_module_bytes(name, module, "onnxruntime", False)
               for name, module in _meta_encoder(config).named_modules())


def stored_bytes(config: EncoderConfig, dtype: str, backend: str, calibrated: bool = False,
                 group_size: int | None = None, int4_share: float | None = None) -> int:
    """Bytes of the tensors the ``backend`` artefact of a ``dtype`` model of this shape stores (weights, scales,
    zero points; no file structure). A module shared by several layers is stored once. ``group_size``: int4's
    weights per scale; ``int4_share``: the share of the matrices bits per matrix puts in 4 bits."""
    model = _meta_encoder(config)
    if dtype == "mixed" and backend == "onnxruntime" and group_size and int4_share is not None:
        int8 = stored_bytes(config, "int8", backend)
        every = {f"{name}.weight" for name, module in model.named_modules()
                 if isinstance(module, (nn.Linear, nn.Embedding)) and name not in GEMM_MODULES}
        return round(int8 - int4_share * (int8 - allocated_bytes(config, every, group_size)))
    if dtype in DTYPE_BYTES:
        return sum(p.numel() for p in model.parameters()) * DTYPE_BYTES[dtype]
    if dtype == "fp8" and backend == "torch":
        return sum(_fp8_module_bytes(module) for module in model.modules())
    if dtype == "int4" and backend == "onnxruntime" and group_size:
        return sum(_int4_module_bytes(module, group_size) for module in model.modules())
    if dtype == "int4" and backend == "openvino" and group_size:
        return sum(_ov_int4_module_bytes(module, group_size) for module in model.modules())
    if dtype != "int8" or backend not in ("torch", "onnxruntime", "openvino"):
        raise ValueError(f"no size model for {dtype} on {backend}")
    return sum(_int8_module_bytes(name, module, backend, calibrated) for name, module in model.named_modules())
