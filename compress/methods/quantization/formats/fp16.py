"""float16: every tensor in 16 bits; compared by default only where the CPU computes in fp16."""

from compress.methods.quantization.face import quantization

METHOD = quantization(
    name="fp16", rank=140, dtype="fp16", backends=("torch",), label="float16",
    summary="every tensor in float16 (CPUs with AVX512-FP16 or AMX-FP16)",
    why="Half precision cuts bytes and time, not parameters: every tensor in 16 bits ({size:.2f}x fewer bytes "
        "than {against}); fast only where the CPU has fp16 units (AVX512-FP16, AMX-FP16).",
)
