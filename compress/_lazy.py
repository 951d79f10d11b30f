"""Package re-exports that are imported when first used, not when the package is.

``compress --help`` must not pay for torch, datasets or transformers (seconds of CPU), yet a package's
``__init__`` re-exports its main names (``from compress.models import Encoder``) and importing any of its
submodules runs that ``__init__`` first. A package that calls :func:`exports` keeps the same names, but a
name's submodule is imported only when the name is asked for (PEP 562), so ``compress.models.config``
stays as cheap as its own imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def exports(package: str, names: dict[str, list[str]]) -> tuple[Callable[[str], object], Callable[[], list[str]],
                                                                 list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, whose submodule ``names`` keys (relative, as
    ``"accounting"``) provide the names listed under them."""
    where = {name: f"{package}.{module}" for module, listed in names.items() for name in listed}

    def __getattr__(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(importlib.import_module(package), name, value)  # the next access is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(where) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__, sorted(where)
