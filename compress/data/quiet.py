"""Hide the ``datasets`` progress bars for steps too small to deserve one, and its logs where we speak."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import datasets


@contextmanager
def quiet_datasets(logs: bool = False) -> Iterator[None]:
    """Disable ``datasets`` progress bars inside the block, then restore the previous setting.

    Args:
        logs: also silence ``datasets``' own log messages (errors included) inside the block: for a
            step whose failures compress reports itself in one line, such as reading a user's file.
    """
    was_enabled = datasets.is_progress_bar_enabled()
    verbosity = datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    if logs:
        datasets.logging.set_verbosity(datasets.logging.CRITICAL + 1)
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()
        if logs:
            datasets.logging.set_verbosity(verbosity)
