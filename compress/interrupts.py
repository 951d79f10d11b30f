"""Ctrl-C and SIGTERM as exceptions that unwind the stack, so temporary directories are removed.

Python turns SIGINT into ``KeyboardInterrupt``, which typer catches and turns into a return value;
SIGTERM it does not catch at all, and the process dies where it stands. :func:`install` makes both
raise :class:`Interrupted` instead: every ``with atomic_dir(...)`` on the way up removes its temporary
directory, and the CLI ends with one line and the shell's exit code (128 + the signal number).

A handler runs wherever the main thread happens to be, and where an exception cannot propagate (a weakref
callback, a ``__del__``) Python prints "Exception ignored in ..." and goes on. The signal would be lost, with
further ones already ignored, and the run would carry on to its end (seen once in CI: SIGTERM inside the
import system's module-lock callback). :func:`install` also catches that case and sends the signal again.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any


class Interrupted(BaseException):
    """A SIGINT or SIGTERM arrived; ``exit_code`` is 130 or 143."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum
        self.what = "interrupted" if signum == signal.SIGINT else "terminated"


def raise_if_interrupted(error: BaseException) -> None:
    """Raise the :class:`Interrupted` (or ``KeyboardInterrupt``) that ``error`` was raised from, if any: a library
    that catches it and raises its own error instead (``datasets`` wraps one arriving while it reads a file) must
    not turn Ctrl-C into a bad-input message, with further signals already ignored."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Interrupted | KeyboardInterrupt):
            raise cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__


def ignore_further() -> None:
    """Ignore SIGINT and SIGTERM from now on: a second Ctrl-C must not cut the clean-up (and its one line)
    short, the first one is already unwinding the stack."""
    for other in (signal.SIGINT, signal.SIGTERM):
        signal.signal(other, signal.SIG_IGN)


def _raise(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal module's signature
    ignore_further()
    raise Interrupted(signum)


def _send_again_if_swallowed(unraisable: Any) -> None:
    """``sys.unraisablehook``: an :class:`Interrupted` that Python swallowed is raised again, by the same
    signal sent to the main thread from a short-lived thread, so the handler runs once this frame is left
    (sending it from here would raise inside this hook, where it would be swallowed too). Anything else
    goes to the hook that was there before."""
    exc = unraisable.exc_value
    if not isinstance(exc, Interrupted):
        _previous_hook(unraisable)
        return
    signal.signal(exc.signum, _raise)
    resend = threading.Timer(0.01, signal.pthread_kill, (threading.main_thread().ident, exc.signum))
    resend.daemon = True
    resend.start()


_previous_hook = sys.unraisablehook


def install() -> None:
    """Raise :class:`Interrupted` on SIGINT and SIGTERM (in the main thread, where Python runs handlers),
    also when the first one lands where Python swallows exceptions."""
    global _previous_hook
    if sys.unraisablehook is not _send_again_if_swallowed:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _send_again_if_swallowed
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise)
