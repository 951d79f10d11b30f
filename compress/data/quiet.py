"""Hide the ``datasets`` progress bars for steps too small to deserve one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import datasets


@contextmanager
def quiet_datasets() -> Iterator[None]:
    """Disable ``datasets`` progress bars inside the block, then restore the previous setting."""
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()
