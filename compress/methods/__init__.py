"""The compression methods, one package per family: each holds its face (the :func:`~compress.registry.register`
call, its options and sentences), its verb, its record's details and its report hooks.

A student method (ALBERT, DistilBERT, TinyBERT) trains a new encoder from a teacher; a transform (quantization,
pruning, vocabulary pruning) changes a given model. They are listed by the registry, not here, so the list cannot
drift: ``compress.registry.names("student")`` and ``names("transform")``, or ``compress run --help``. A family's
``__init__`` imports no torch: ``compress --help`` loads every family for its names and options.
"""
