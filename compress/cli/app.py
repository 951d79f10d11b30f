"""The `compress` command line: parses arguments, calls the library, prints with rich.

Every error the library raises as :class:`compress.errors.CompressError` is printed as one
line on stderr with a non-zero exit code; unexpected errors too, unless ``COMPRESS_DEBUG=1``
asks for the traceback.
"""

from __future__ import annotations

import os
import sys

import typer

from compress.cli import compare as compare_cli
from compress.cli import data as data_cli
from compress.cli import explain as explain_cli
from compress.cli import run as run_cli
from compress.cli import teachers as teachers_cli
from compress.cli.common import err_console
from compress.errors import CompressError

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
app.command("run")(run_cli.run)
app.command("explain")(explain_cli.explain)
app.command("compare")(compare_cli.compare)
app.command("report")(compare_cli.report)


def _fail(message: str, code: int) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(code)


def main() -> None:
    """Console-script entry point."""
    try:
        app(standalone_mode=False)
    except CompressError as e:
        _fail(str(e), e.exit_code)
    except typer.Exit as e:  # raised by commands that end early on purpose
        sys.exit(e.exit_code)
    except typer.Abort:
        _fail("aborted.", 130)
    except KeyboardInterrupt:
        _fail("interrupted; nothing half-written was kept.", 130)
    except Exception as e:  # noqa: BLE001 - the last line of defence for the user
        import click

        if isinstance(e, click.exceptions.ClickException):
            _fail(e.format_message(), e.exit_code)
        if os.environ.get("COMPRESS_DEBUG") == "1":
            raise
        _fail(f"unexpected {type(e).__name__}: {e} (set COMPRESS_DEBUG=1 for the traceback).", 1)
