"""The `compress` command line: parses arguments, calls the library, prints with rich.

Every error the library raises as :class:`compress.errors.CompressError` is printed as one
line on stderr with a non-zero exit code; unexpected errors too, unless ``COMPRESS_DEBUG=1``
asks for the traceback.

Start-up is kept short, and safe to interrupt: this module imports nothing but the signal handling, so
:func:`main` installs it before anything else is imported (a Ctrl-C during the imports is one line and
exit 130, not a traceback); the commands import the library (torch, datasets, transformers) only when they
run, so ``--help`` and usage errors answer in a fraction of a second.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

from compress import interrupts

if TYPE_CHECKING:
    import typer


@cache
def build_app() -> typer.Typer:
    """The typer application with every command (imports typer, rich and the command modules)."""
    import typer

    from compress.cli import cache as cache_cli
    from compress.cli import compare as compare_cli
    from compress.cli import data as data_cli
    from compress.cli import explain as explain_cli
    from compress.cli import export as export_cli
    from compress.cli import predict as predict_cli
    from compress.cli import pretrain as pretrain_cli
    from compress.cli import run as run_cli
    from compress.cli import search as search_cli
    from compress.cli import teachers as teachers_cli

    app = typer.Typer(
        name="compress",
        help="Build compressed students of a BERT-family teacher and compare them.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.add_typer(teachers_cli.app, name="teachers")
    # `compress teacher finetune` reads better for the one-teacher commands; both names work.
    app.add_typer(teachers_cli.app, name="teacher", hidden=True)
    app.add_typer(data_cli.app, name="data")
    app.add_typer(cache_cli.app, name="cache")
    app.command("run")(run_cli.run)
    app.command("explain")(explain_cli.explain)
    app.command("compare")(compare_cli.compare)
    app.command("search")(search_cli.search)
    app.command("predict")(predict_cli.predict)
    app.command("export")(export_cli.export)
    app.command("pretrain")(pretrain_cli.pretrain)
    app.command("report")(compare_cli.report)
    app.command("results")(compare_cli.results)
    _as_sentences(app)
    return app


def _as_sentences(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its groups) its docstring as help with each paragraph on one line, so
    the terminal wraps whole sentences at its own width: typer keeps a docstring's line breaks, which then cut a
    sentence mid-line wherever the source was wrapped."""
    import inspect

    def joined(doc: str) -> str:
        return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(doc).split("\n\n"))

    for info in app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = joined(info.callback.__doc__)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            _as_sentences(group.typer_instance)


def __getattr__(name: str) -> Any:
    """``compress.cli.app.app``, built when first asked for."""
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fail(message: str, code: int) -> None:
    try:
        from rich.markup import escape

        from compress.cli.common import err_console
    except Exception:  # noqa: BLE001 - a Ctrl-C cut an import of rich short: the line still goes out, plain
        print(f"error: {message}", file=sys.stderr)
        sys.exit(code)
    err_console.print(f"[bold red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True)
    sys.exit(code)


def _interrupted(what: str) -> str:
    from compress.paths import committed

    kept = committed()
    if not kept:
        return f"{what}; nothing was written."
    return f"{what}; kept what was complete before it ({', '.join(map(str, kept))}), nothing half-written."


def _usage(e: typer.TyperException) -> str:
    """A usage error in one line: what was wrong, and where the help is."""
    ctx = getattr(e, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return f"{e.format_message()}{where}"


def main() -> None:
    """Console-script entry point: one line on stderr for every error, with its exit code.

    0 done; 1 a check that ran and failed (``teachers verify``) or an unexpected error; 2 bad input
    (usage, values, files); 130 Ctrl-C; 143 SIGTERM.
    """
    try:
        interrupts.install()  # first: a Ctrl-C from here on is one line, even during the imports below
        _main()
    except interrupts.Interrupted as e:
        # The handler now ignores further signals, so the line below cannot be cut short by a second Ctrl-C.
        _fail(_interrupted(e.what), e.exit_code)
    except KeyboardInterrupt:  # Python's own handler, before ours was in place
        interrupts.ignore_further()
        _fail(_interrupted("interrupted"), 130)


def _main() -> None:
    import typer

    from compress.errors import CompressError

    try:
        code = build_app()(standalone_mode=False)
    except CompressError as e:
        _fail(str(e), e.exit_code)
    except typer.Exit as e:  # raised by commands that end early on purpose
        sys.exit(e.exit_code)
    except typer.Abort:
        _fail("aborted.", 130)
    except typer.TyperException as e:  # typer's own click: usage errors (exit 2) and the like
        if not e.format_message():  # a group called without its command: the help was its answer
            sys.exit(getattr(e, "exit_code", 2))
        _fail(_usage(e), getattr(e, "exit_code", 2))
    except Exception as e:  # noqa: BLE001 - the last line of defence for the user
        if os.environ.get("COMPRESS_DEBUG") == "1":
            raise
        from compress.paths import is_disk_full

        if is_disk_full(e):   # a write outside the atomic helpers, which name what they were writing
            where = f" while writing {e.filename}" if isinstance(e, OSError) and e.filename else ""
            _fail(f"no space left on the disk (or in the quota){where}; free some space (`compress cache prune`) "
                  "or write elsewhere.", 1)
        _fail(f"unexpected {type(e).__name__}: {e} (set COMPRESS_DEBUG=1 for the traceback).", 1)
    # Without standalone mode typer returns the code of a `typer.Exit` a command raised.
    if isinstance(code, int) and code:
        sys.exit(code)
