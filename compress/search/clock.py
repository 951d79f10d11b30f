"""The search's budget clock: the seconds a search has spent, by what they went to (search.json's ``seconds``), over
this invocation and the ones before it (a resumed search), with the work it reused from other searches and
comparisons charged at what it cost when it was done, so a search replayed from reused work decides as the first did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

# What the search's wall time went to; the rest is its own work: enumerating the space, fitting, deciding, writing
# the ledger and the report.
TIME_CATEGORIES = ("teacher", "training", "evaluation and timing", "speed probes", "step timing", "finals")


def format_seconds(seconds: float) -> str:
    minutes = seconds / 60
    return f"{seconds:.0f} s" if seconds < 120 else f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


class Clock:
    """The budget spent, by what it went to, over this invocation and the ones before it (a resumed search): wall
    time, plus what the work this search reused from others cost when it was done (:meth:`charge`)."""

    def __init__(self, before: dict[str, float], spent_before: float, start: float, reused_before: float = 0.0) -> None:
        self.start, self.before = start, spent_before
        self.seconds = {name: before.get(name, 0.0) for name in TIME_CATEGORIES}
        self.reused = reused_before   # of the budget spent: work reused, charged at its first cost

    def charge(self, category: str, seconds: float) -> None:
        """Put work another search (or comparison) did, and this one reuses, on the budget at what it cost then."""
        self.seconds[category] += seconds
        self.reused += seconds
        self.before += seconds

    def charge_all(self, charged: Mapping[str, float]) -> None:
        """:meth:`charge` each category's seconds (the timings :class:`compress.search.probe.Probes` read from
        another search)."""
        for category, seconds in charged.items():
            self.charge(category, seconds)

    @contextmanager
    def on(self, category: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[category] += time.perf_counter() - start

    @property
    def spent(self) -> float:
        return self.before + time.perf_counter() - self.start
