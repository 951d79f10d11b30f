"""The compression methods: one module per method, found and listed by :mod:`compress.methods.registry`.

A student method (ALBERT, DistilBERT, TinyBERT, ...) trains a new encoder from a teacher; a transform
(quantization, pruning, ...) changes a given model. The methods are listed by the registry, not here, so
the list cannot drift: ``names("student")`` and ``names("transform")``, or ``compress run --help``.
Pipelines of them (``distilbert+int8``) are parsed by :mod:`compress.methods.pipeline`.
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
