"""Post-training weight-only int4: weights and embedding tables in 4 bits, one scale per group of input channels
(ONNX Runtime, or OpenVINO through NNCF's weight compression); activations stay fp32. Not compared by default, and
searched by default only for size: on the CPUs measured it saves bytes, not time."""

from compress.methods.quantization.face import quantization
from compress.methods.quantization.options import GroupedOptions

METHOD = quantization(
    name="int4", rank=112, dtype="int4", backends=("onnxruntime", "openvino"), label="int4 weights",
    options=GroupedOptions,
    in_compare_default=False, searched_for=("size",),
    revision=2,   # 2: the heads in 4 bits on ONNX Runtime too
    summary="post-training weight-only int4: weights and embeddings in 4 bits, one scale per group of input "
            "channels (ONNX Runtime, OpenVINO)",
    why="Weight-only quantization cuts bytes, not parameters: every weight is still there, stored in 4 bits with "
        "one fp32 scale per group of input channels ({size:.2f}x fewer bytes than {against}; the scales add "
        "32 / group_size bits a weight), and unpacked to compute. Activations stay fp32, so it saves memory "
        "and download size more than time: ONNX Runtime's 4-bit matmul is no faster than its int8 one on a CPU "
        "with int8 units (VNNI).",
)
