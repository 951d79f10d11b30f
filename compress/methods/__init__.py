"""The compression methods: one module per method, found and listed by :mod:`compress.methods.registry`.

A student method (``albert``, ``distilbert``, ``tinybert``) trains a new encoder from a teacher; a
transform (``int8``, ``static-int8``, ``bf16``, ``fp16``, ``onnx``) changes a given model. Pipelines of
them (``distilbert+int8``) are parsed by :mod:`compress.methods.pipeline`.
"""

from compress.methods.registry import (
    Method,
    Preparation,
    StudentMethod,
    Transform,
    all_methods,
    get_method,
    names,
    register,
)

__all__ = ["Method", "Preparation", "StudentMethod", "Transform", "all_methods", "get_method", "names", "register"]
