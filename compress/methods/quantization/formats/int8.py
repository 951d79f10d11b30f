"""Post-training dynamic int8: int8 weights, activations quantized on the fly, batch by batch."""

from compress.methods.quantization.face import quantization

METHOD = quantization(
    name="int8", rank=110, dtype="int8", backends=("onnxruntime", "torch"), label="dynamic int8", follows_students=True,
    summary="post-training dynamic int8: int8 weights, activations quantized on the fly",
    why="Quantization cuts bytes and time, not parameters: every weight is still there, stored in 8 bits "
        "instead of 32 ({size:.2f}x fewer bytes than {against}), and int8 matrix products run on the "
        "CPU's integer units (VNNI/AMX). Activations are quantized on the fly, batch by batch.",
)
