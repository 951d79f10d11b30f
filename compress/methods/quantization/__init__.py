"""Quantization: the same model in fewer bits (dynamic and static int8, bf16, fp16) or run by another runtime
(ONNX Runtime or OpenVINO fp32). Each format is a module of ``formats/`` declaring one method; they share their
options, explanation and verb (:mod:`~compress.methods.quantization.options`,
:mod:`~compress.methods.quantization.face`, :mod:`~compress.methods.quantization.verb`)."""

import importlib
import pkgutil

from compress.methods.quantization import formats
from compress.methods.quantization.face import Quantization, quant_format
from compress.methods.quantization.options import QuantOptions

for _module in pkgutil.iter_modules(formats.__path__):  # found, not listed: a new format is a new module
    importlib.import_module(f"{formats.__name__}.{_module.name}")

__all__ = ["QuantOptions", "Quantization", "quant_format"]
