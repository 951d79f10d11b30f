"""Quantization-aware int8: the model trains with ONNX Runtime's dynamic int8 rounding in its forward pass (weights per
output channel, each matrix's input per tensor, as the runtime computes them), or with PyTorch's (``backend=torch``:
weights per matrix, inputs on 7 bits), distilled from its fp32 self, then is quantized for real on that backend. Not
compared by default: it trains."""

from compress.methods.quantization.face import quantization
from compress.methods.quantization.options import AwareOptions

METHOD = quantization(
    name="qat-int8", rank=111, dtype="int8", backends=("onnxruntime", "torch"), label="quantization-aware int8",
    options=AwareOptions, aware=True, in_compare_default=False,
    summary="quantization-aware int8: trained with int8's rounding in the forward pass (distilled from the fp32 "
            "model), then dynamic int8 on ONNX Runtime (or, backend=torch, on PyTorch)",
    why="Quantization cuts bytes and time, not parameters: every weight is still there, stored in 8 bits instead of "
        "32 ({size:.2f}x fewer bytes than {against}). Training with the rounding in the forward pass lets the "
        "weights move to where int8 loses least (the straight-through estimator passes the gradient through the "
        "rounding), so the int8 model keeps what post-training int8 would lose; the bytes and the speed are "
        "int8's on ONNX Runtime, the graph being the same.",
)
