"""PyTorch backends: dynamic int8 (``torch.ao``) and half precision (bf16, fp16), saved as safetensors.

Dynamic int8 stores every ``nn.Linear`` weight as int8 with one fp32 scale per tensor and
quantizes activations on the fly, batch by batch; embeddings and layer norms stay fp32. The
artefact holds exactly what the runtime uses: int8 weights, their scales and zero points, fp32
biases and the remaining fp32 tensors, so its size on disk is the deployed size.

Half precision casts every tensor to bf16 (or fp16) and halves the bytes; it is fast only where
the CPU computes in that format natively (AVX512-BF16 or AMX for bf16; AVX512-FP16 or AMX-FP16 for fp16).

float8 (e4m3) stores every linear weight and embedding table in one byte per weight with one fp32 scale per output
channel (per row of a table); biases and layer norms stay fp32. No CPU computes in float8: there the weights are
widened to fp32 when loaded, so float8 saves bytes on disk and in transit, not time or memory at run time. A GPU with
float8 units (compute capability 8.9: Ada, Hopper and later) multiplies in it (:class:`Float8Linear`), the rest of
the model in bf16.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from compress.errors import CompressError
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder, shapes_only

WEIGHTS = "model.safetensors"
HALF_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
_INT8 = ".weight_int8"
_SCALE = ".weight_scale"
_ZERO = ".weight_zero_point"
_FP8 = ".weight_fp8"
FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max   # 448: e4m3 has 4 exponent bits, 3 mantissa bits, no infinities


def _dynamic_quantize(model: nn.Module) -> nn.Module:
    # torch.ao's eager-mode quantization is deprecated in favour of torchao, whose int8 dynamic
    # path is slower than fp32 on CPUs measured here; torch.ao still ships and is the fast one.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


def torch_int8_available() -> str | None:
    """None when PyTorch can run dynamic int8 here, else why not (one sentence)."""
    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    if not engines:
        return "this PyTorch build has no quantized engine (fbgemm, x86, onednn or qnnpack)."
    return None


def quantize_int8(model: Encoder) -> nn.Module:
    """A dynamically quantized copy of ``model`` (int8 Linear weights, fp32 elsewhere)."""
    reason = torch_int8_available()
    if reason:
        raise CompressError(f"PyTorch int8 is unavailable: {reason}")
    return _dynamic_quantize(Encoder.holding(model.config, model.state_dict()).eval())


def _quantized_linears(model: nn.Module) -> dict[str, nn.Module]:
    return {name: m for name, m in model.named_modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)}


def save_int8(quantized: nn.Module, path: Path) -> None:
    """Write a dynamically quantized encoder's tensors (int8 weights + scales) to one safetensors file."""
    linears = _quantized_linears(quantized)
    tensors: dict[str, torch.Tensor] = {}
    for name, module in linears.items():
        weight, bias = module._weight_bias()
        tensors[name + _INT8] = weight.int_repr().contiguous()
        tensors[name + _SCALE] = torch.tensor([weight.q_scale()], dtype=torch.float32)
        tensors[name + _ZERO] = torch.tensor([weight.q_zero_point()], dtype=torch.int64)
        if bias is not None:
            tensors[name + ".bias"] = bias.detach().contiguous()
    for key, value in quantized.state_dict().items():
        if isinstance(value, torch.Tensor) and not value.is_quantized and key.rsplit(".", 1)[0] not in linears:
            tensors[key] = value.detach().contiguous()
    save_file(tensors, str(path))


def load_int8(path: Path, config: EncoderConfig) -> nn.Module:
    """The quantized encoder written by :func:`save_int8` (weights restored bit for bit)."""
    tensors = load_file(str(path))
    model = _dynamic_quantize(Encoder(config).eval())
    linears = _quantized_linears(model)
    state = model.state_dict()  # quantized modules read their own extra keys, so start from the full dict
    state.update({k: v for k, v in tensors.items() if k.rsplit(".", 1)[0] not in linears})
    model.load_state_dict(state)
    for name, module in linears.items():
        weight = torch._make_per_tensor_quantized_tensor(
            tensors[name + _INT8], float(tensors[name + _SCALE]), int(tensors[name + _ZERO]))
        module.set_weight_bias(weight, tensors.get(name + ".bias"))
    return model


def to_half(model: Encoder, dtype: str) -> Encoder:
    """A copy of ``model`` with every tensor in ``dtype`` ("bf16" or "fp16")."""
    return Encoder.holding(model.config, model.state_dict(), dtype=HALF_DTYPES[dtype]).eval()


def save_half(model: Encoder, path: Path) -> None:
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(path))


def load_half(path: Path, config: EncoderConfig, dtype: str) -> Encoder:
    return Encoder.holding(config, load_file(str(path)), dtype=HALF_DTYPES[dtype]).eval()


def _fp8_matrices(model: nn.Module) -> dict[str, nn.Module]:
    """The modules whose weight float8 stores: every linear layer and embedding table (each shared one once)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Embedding))}


def _row_scales(matrix: torch.Tensor) -> torch.Tensor:
    """Each row's float8 scale, ``[rows, 1]``: its largest magnitude over e4m3's (1 for a row of zeros, which stays
    zeros)."""
    largest = matrix.abs().amax(dim=1, keepdim=True)
    return torch.where(largest > 0, largest / FP8_MAX, torch.ones_like(largest))


def to_fp8(model: Encoder) -> dict[str, torch.Tensor]:
    """``model``'s tensors as float8 stores them: each matrix's rows scaled into e4m3's range (s_c = max|w_c| / 448,
    one fp32 scale per row: per output channel of a linear layer, per token of a table) and rounded to e4m3; every
    other tensor fp32."""
    matrices = _fp8_matrices(model)
    tensors: dict[str, torch.Tensor] = {}
    for name, module in matrices.items():
        weight = module.weight.detach().float()
        scale = _row_scales(weight)
        tensors[name + _FP8] = (weight / scale).to(FP8).contiguous()
        tensors[name + _SCALE] = scale.squeeze(1).contiguous()
    weights = {name + ".weight" for name in matrices}
    for key, value in model.state_dict().items():
        if key not in weights and key not in tensors:
            tensors[key] = value.detach().float().contiguous()
    return tensors


def save_fp8(tensors: dict[str, torch.Tensor], path: Path) -> None:
    save_file(tensors, str(path))


class Float8Linear(nn.Module):
    """A linear layer multiplied in float8 (``torch._scaled_mm``; a GPU's float8 units where it has them): the weight as
    float8 stores it (e4m3, one fp32 scale per output channel), and each call's activations scaled the same way, one
    scale per token (max|x_t| / 448), rounded to e4m3; the products accumulate in fp32 and come out in bf16, the bias
    added there. ``torch._scaled_mm`` on a GPU takes matrices whose two sides are multiples of 16 (:func:`fits_fp8`)."""

    def __init__(self, weight_fp8: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight_fp8.shape
        self.register_buffer("weight_fp8", weight_fp8.contiguous())   # [out, in]: its transpose is column-major
        self.register_buffer("scale", scale.float().reshape(1, -1).contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        x_scale = _row_scales(rows)
        y = torch._scaled_mm((rows / x_scale).to(FP8), self.weight_fp8.t(), scale_a=x_scale, scale_b=self.scale,
                             out_dtype=torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


def fits_fp8(module: nn.Module) -> bool:
    """Whether ``module`` is a linear layer :class:`Float8Linear` can take (both sides multiples of 16)."""
    return type(module) is nn.Linear and module.in_features % 16 == 0 and module.out_features % 16 == 0


def fp8_encoder(tensors: dict[str, torch.Tensor], config: EncoderConfig, *, compute: bool = False,
                device: torch.device | str = "cpu") -> Encoder:
    """The encoder :func:`to_fp8`'s ``tensors`` hold, on ``device``: its float8 weights widened to fp32 (each times its
    row's scale), or with ``compute`` (for a GPU with float8 units) in bf16 with every linear layer that fits
    multiplied in float8 from the stored weights themselves (:class:`Float8Linear`; a shared one stays shared)."""
    stored = [key[: -len(_FP8)] for key in tensors if key.endswith(_FP8)]   # the matrices float8 holds
    state = {k: v for k, v in tensors.items() if not k.endswith((_FP8, _SCALE))}
    for name in stored:
        state[name + ".weight"] = tensors[name + _FP8].float() * tensors[name + _SCALE].unsqueeze(1)
    with shapes_only():
        expected = set(Encoder(config).state_dict())
    if expected - set(state):
        missing = sorted(expected - set(state))
        raise CompressError(f"the float8 weights lack {len(missing)} of the model's tensors ({missing[0]}, ...); "
                            "they were not written by this compress.")
    model = Encoder.holding(config, {k: state[k] for k in expected}, device=device,
                            dtype=torch.bfloat16 if compute else torch.float32)
    if compute:
        modules = dict(model.named_modules())
        swapped = {id(modules[name]): Float8Linear(tensors[name + _FP8].to(device), tensors[name + _SCALE].to(device),
                                                   modules[name].bias)
                   for name in stored if fits_fp8(modules[name])}
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if id(child) in swapped:
                    setattr(parent, name, swapped[id(child)])
    return model.eval()


def load_fp8(path: Path, config: EncoderConfig, *, compute: bool = False, device: torch.device | str = "cpu"
             ) -> Encoder:
    """The encoder written by :func:`save_fp8` (see :func:`fp8_encoder`)."""
    try:
        return fp8_encoder(load_file(str(path)), config, compute=compute, device=device)
    except CompressError as error:
        raise CompressError(f"{path}: {error}") from None
