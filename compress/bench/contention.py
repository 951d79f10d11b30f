"""How busy the rest of the machine was while we measured: CPU time of every other process, from /proc/stat.

A timing taken while another job runs is inflated, and not by the same factor for every model: a fixed
per-call delay weighs more on a 2 ms model than on a 20 ms one, so speed-up ratios shrink. The measurement
cannot be made immune to that, but it can say so. :class:`OtherLoad` reads the machine's busy CPU time
(/proc/stat) and this process's own CPU time at the start and end of a block; the difference, divided by
the wall time, is the average number of CPUs that *other* processes kept busy.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

_STAT = Path("/proc/stat")

# Above this many CPUs' worth of other work, on average over the measurement, timings are flagged.
BUSY_THRESHOLD = 0.25


def busy_cpu_seconds(stat: str) -> float | None:
    """CPU seconds spent on anything but idling, summed over the CPUs, from /proc/stat's text (None if
    it has no ``cpu`` line). Counted: user, nice, system, irq, softirq, steal; not idle or iowait."""
    for line in stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in (fields[1:9] + ["0"] * 8)[:8])
            return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    return None


def _machine_busy() -> float | None:
    try:
        return busy_cpu_seconds(_STAT.read_text())
    except OSError:  # not Linux
        return None


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class OtherLoad:
    """``with OtherLoad() as load: ...`` then ``load.cpus``: the average number of CPUs that other processes
    kept busy during the block (None where /proc/stat cannot be read)."""

    cpus: float | None = None

    def __enter__(self) -> OtherLoad:
        self._start = (_machine_busy(), _own_cpu(), time.monotonic())
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        busy, own, wall = _machine_busy(), _own_cpu(), time.monotonic()
        busy0, own0, wall0 = self._start
        if busy is None or busy0 is None or wall <= wall0:
            return
        self.cpus = max(0.0, ((busy - busy0) - (own - own0)) / (wall - wall0))

    @property
    def busy(self) -> bool:
        return self.cpus is not None and self.cpus > BUSY_THRESHOLD

    def warning(self) -> str:
        return (f"other processes kept {self.cpus:.1f} CPUs busy on average while speed was measured: latencies "
                "are inflated and speed-ups understated; measure again on a quiet machine (rerunning the same "
                "command reuses the finished runs).")
