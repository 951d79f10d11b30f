"""The fp32 model exported to ONNX and run by ONNX Runtime or OpenVINO (the baseline the int8 backends are
measured by)."""

from compress.methods.quantization.face import quantization

METHOD = quantization(
    name="onnx", rank=150, dtype="fp32", backends=("onnxruntime", "openvino"), label="ONNX fp32",
    summary="the fp32 model exported to ONNX and run by ONNX Runtime or OpenVINO (computing in fp32)",
    why="Exporting changes no weight: the same fp32 parameters and bytes as the model exported, run by ONNX "
        "Runtime or OpenVINO, whose fused kernels and graph optimizations can make the same arithmetic faster.",
)
