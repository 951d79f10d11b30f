"""The methods' own flags (``--embedding-size``, ``--keep-heads``, ...), made from their options dataclasses
(see :mod:`compress.registry`), for every command that takes a method: ``run`` and ``explain``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

import typer

from compress.errors import CompressError
from compress.registry import all_methods, default_of, field_type, flag_of

FLAG_TYPES = (int, float, str, bool)


def method_flags() -> dict[str, tuple[str, type, Any, str]]:
    """Every method option that has a flag: field name -> (flag, type, default, help naming its methods)."""
    found: dict[str, tuple[str, type, Any, dict[str, list[str]]]] = {}
    for method in all_methods():
        for f in fields(method.options):
            flag = flag_of(f.name, f)
            if f.metadata.get("flag", "") is None:
                continue
            kind = field_type(method.options, f.name)
            if kind not in FLAG_TYPES:
                raise TypeError(f"{method.name}.{f.name}: a flag needs int, float, str or bool, or metadata flag=None")
            default = default_of(f)
            if f.name in found:
                other = found[f.name]
                if (other[0], other[1]) != (flag, kind) or (kind is bool and other[2] != default):
                    raise TypeError(f"{method.name}.{f.name} disagrees with another method's {f.name}")
            helps = found.setdefault(f.name, (flag, kind, default, {}))[3]
            helps.setdefault(f.metadata["help"], []).append(method.name)
    return {name: (flag, kind, default, " ".join(f"{', '.join(ms)}: {h}" for h, ms in helps.items()))
            for name, (flag, kind, default, helps) in found.items()}


SET_OPTION = ("set_", list[str] | None, typer.Option(
    None, "--set", help="A method option as KEY=VALUE (repeatable), for any option, flag or not."))


def with_method_flags(body: Callable[..., None], common: list[tuple[str, Any, Any]]) -> Callable[..., None]:
    """A typer command calling ``body`` with its ``common`` settings ((name, type, typer default) each) and every
    method flag, as keyword arguments; its help is ``body``'s docstring."""
    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=t) for n, t, d in common]
    params += _method_parameters({n for n, _, _ in common})

    def command(**kwargs: Any) -> None:
        body(**kwargs)

    command.__doc__ = body.__doc__
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def _method_parameters(taken: set[str]) -> list[inspect.Parameter]:
    """One keyword parameter per method flag, for a command's signature; ``taken`` are the command's own."""
    params = []
    for name, (flag, kind, _, help_text) in method_flags().items():
        if name in taken:
            raise TypeError(f"the method option {name} has the name of a command setting")
        default = typer.Option(False if kind is bool else None, flag, help=help_text)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=bool if kind is bool else kind | None))
    return params


def given_options(flags: Mapping[str, object], set_: list[str] | None) -> dict[str, object]:
    """The method options given on the command line: the flags that were used, then ``--set KEY=VALUE``."""
    options: dict[str, object] = {}
    for name, (_, kind, default, _) in method_flags().items():
        value = flags.get(name)
        if kind is bool and value:
            options[name] = not default
        elif kind is not bool and value is not None:
            options[name] = value
    for item in set_ or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CompressError(f"--set takes KEY=VALUE, not {item!r}.")
        if key.strip() in options:
            raise CompressError(f"{key.strip()} is given twice, by its flag and by --set.")
        options[key.strip()] = value
    return options
