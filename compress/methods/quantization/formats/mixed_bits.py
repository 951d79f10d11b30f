"""Post-training bits per matrix: each weight matrix in 4 or 8 bits by how much the loss notices (the Fisher
information on training sentences), at least a share of the weights in 4 bits (ONNX Runtime). Not compared by default,
and searched by default only for size: it saves bytes, not time."""

from compress.methods.quantization.face import quantization
from compress.methods.quantization.options import MixedOptions

METHOD = quantization(
    name="mixed-bits", rank=114, dtype="mixed", backends=("onnxruntime",), label="bits per matrix",
    options=MixedOptions, in_compare_default=False, searched_for=("size",),
    summary="post-training bits per matrix: the least sensitive matrices (Fisher information on training "
            "sentences) in 4 bits, the rest in 8 (ONNX Runtime)",
    why="Not every matrix matters as much: Q-BERT and HAWQ give each layer its bit width by the loss's curvature "
        "there. compress estimates, for every weight matrix and embedding table, what 4 bits and 8 bits would add "
        "to the loss (half the Fisher information times the squared rounding error, summed) and puts in 4 bits the "
        "matrices that lose least per weight until int4_share of the weights are; the rest stay int8 "
        "({size:.2f}x fewer bytes than {against}). The run's report lists every matrix with its two costs and the "
        "width it got.",
)
