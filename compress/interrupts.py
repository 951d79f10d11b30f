"""Ctrl-C and SIGTERM as exceptions that unwind the stack, so temporary directories are removed.

Python turns SIGINT into ``KeyboardInterrupt``, which typer catches and turns into a return value;
SIGTERM it does not catch at all, and the process dies where it stands. :func:`install` makes both
raise :class:`Interrupted` instead: every ``with atomic_dir(...)`` on the way up removes its temporary
directory, and the CLI ends with one line and the shell's exit code (128 + the signal number).
"""

from __future__ import annotations

import signal


class Interrupted(BaseException):
    """A SIGINT or SIGTERM arrived; ``exit_code`` is 130 or 143."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum
        self.what = "interrupted" if signum == signal.SIGINT else "terminated"


def ignore_further() -> None:
    """Ignore SIGINT and SIGTERM from now on: a second Ctrl-C must not cut the clean-up (and its one line)
    short, the first one is already unwinding the stack."""
    for other in (signal.SIGINT, signal.SIGTERM):
        signal.signal(other, signal.SIG_IGN)


def _raise(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal module's signature
    ignore_further()
    raise Interrupted(signum)


def install() -> None:
    """Raise :class:`Interrupted` on SIGINT and SIGTERM (in the main thread, where Python runs handlers)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise)
