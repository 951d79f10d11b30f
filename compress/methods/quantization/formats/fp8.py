"""float8 (e4m3) weights with one scale per output channel: bytes saved on disk; computed in fp32 on the CPU, in float8
on a GPU with float8 units."""

from compress.methods.quantization.face import quantization

METHOD = quantization(
    name="fp8", rank=145, dtype="fp8", backends=("torch",), label="float8 weights", in_compare_default=False,
    summary="float8 (e4m3) weights and tables, one scale per output channel; widened to fp32 to compute on a CPU, "
            "multiplied in float8 on a GPU that has float8 units",
    why="float8 cuts bytes, not parameters: every weight matrix and table is stored in 8 bits as a float (4 exponent "
        "bits, 3 mantissa bits) with one fp32 scale per row ({size:.2f}x fewer bytes than {against}), so large and "
        "small weights keep the same relative precision, where int8's steps are even. No CPU computes in float8: "
        "there the weights are widened to fp32 when loaded, so it saves bytes on disk and in transit, not time or "
        "memory; a GPU with float8 units (Ada, Hopper) multiplies in it (--speed-device cuda).",
)
