"""Post-training int8: int8 weights; activations quantized on the fly (ONNX Runtime, PyTorch) or with ranges
calibrated on training sentences (OpenVINO, by NNCF)."""

from compress.methods.quantization.face import quantization

METHOD = quantization(
    name="int8", rank=110, dtype="int8", backends=("onnxruntime", "torch", "openvino"), label="int8",
    follows_students=True,
    summary="post-training int8: int8 weights, activations quantized on the fly (OpenVINO: calibrated ranges)",
    why="Quantization cuts bytes and time, not parameters: every weight is still there, stored in 8 bits "
        "instead of 32 ({size:.2f}x fewer bytes than {against}), and int8 matrix products run on the "
        "CPU's integer units (VNNI/AMX). Activations are quantized on the fly, batch by batch (ONNX Runtime, "
        "PyTorch), or with ranges NNCF fixed in advance on training sentences (OpenVINO).",
)
