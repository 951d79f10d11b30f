"""Post-training static int8: weights and activations in int8, activation ranges calibrated in advance."""

from compress.methods.quantization.face import quantization

METHOD = quantization(
    name="static-int8", rank=120, dtype="int8", backends=("onnxruntime",), label="static int8 (calibrated)",
    summary="post-training static int8: int8 weights and activations, ranges calibrated on training examples",
    calibrated=True,
    why="Quantization cuts bytes and time, not parameters: weights and activations are int8, and the "
        "activation ranges were fixed in advance on training examples, so no range is computed at run "
        "time ({size:.2f}x fewer bytes than {against}). Fixed ranges clip outliers, which can cost accuracy.",
)
