"""bfloat16: every tensor in 16 bits with fp32's exponent range; compared by default only where the CPU
computes in bf16 (elsewhere it runs emulated, slower than fp32)."""

from compress.methods.quantization.face import quantization

METHOD = quantization(
    name="bf16", rank=130, dtype="bf16", backends=("torch", "openvino"), label="bfloat16",
    summary="every tensor in bfloat16 (fast on CPUs with AVX512-BF16 or AMX)",
    why="Half precision cuts bytes and time, not parameters: every tensor keeps its shape in 16 bits "
        "({size:.2f}x fewer bytes than {against}); bf16 keeps fp32's exponent range, so nothing overflows, "
        "and it is fast only where the CPU has bf16 units (AVX512-BF16, AMX).",
)
