"""Quantization-aware int4: the model trains with ONNX Runtime's weight-only int4 rounding in its forward pass (every
weight, the heads' too, and every table in 4 bits per group of input channels, the matrices' inputs in int8 per group,
as its 4-bit matmul computes them), distilled from its fp32 self, then is quantized for real. Not compared by default
(it trains); searched for size, beside int4: the same bytes, kept where training keeps more."""

from compress.methods.quantization.face import quantization
from compress.methods.quantization.options import AwareGroupedOptions

METHOD = quantization(
    name="qat-int4", rank=113, dtype="int4", backends=("onnxruntime",), label="quantization-aware int4 weights",
    options=AwareGroupedOptions, aware=True, in_compare_default=False, searched_for=("size",),
    revision=2,   # 2: the heads in 4 bits on ONNX Runtime too
    summary="quantization-aware int4 weights: trained with int4's rounding in the forward pass (distilled from the "
            "fp32 model), then ONNX Runtime weight-only int4",
    why="Weight-only quantization cuts bytes, not parameters: every weight is still there, stored in 4 bits with one "
        "fp32 scale per group of input channels ({size:.2f}x fewer bytes than {against}). Four bits round coarsely; "
        "training with the rounding in the forward pass lets the weights move to where it loses least, so the int4 "
        "model keeps more than post-training int4 does, at the same bytes.",
)
