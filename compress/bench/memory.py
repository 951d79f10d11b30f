"""How much resident memory a call adds to this process.

The figure is approximate: resident set size is sampled by a background thread, so a spike
shorter than the sampling interval can be missed. It counts everything the process maps
during the call, whoever allocates it (torch, ONNX Runtime, numpy, Python), which is the
point: it compares backends that do not share an allocator.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

_STATM = Path("/proc/self/statm")


def rss_bytes() -> int:
    """Resident set size of this process now.

    Without ``/proc`` this falls back to ``getrusage``, which only knows the peak so far.
    """
    try:
        resident_pages = int(_STATM.read_text().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return _peak_rss_bytes()


def _peak_rss_bytes() -> int:
    """Peak resident set size so far: kilobytes on Linux, bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class _Sampler(threading.Thread):
    """Reads RSS every ``interval`` seconds until stopped, keeping the largest value."""

    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = rss_bytes()
        self._lock = threading.Lock()  # record() is called from both threads
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.record()
            time.sleep(self.interval)

    def record(self) -> None:
        current = rss_bytes()
        with self._lock:
            self.peak = max(self.peak, current)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.record()


def _return_free_memory() -> None:
    """Hand freed heap memory back to the system (glibc), so a model measured after another one
    cannot reuse what the first freed and appear to need nothing."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def gpu_peak_bytes(fn: Callable[[], object]) -> int:
    """The most GPU memory PyTorch held allocated while ``fn`` ran beyond what it held just before (exact: the
    caching allocator counts every allocation)."""
    import torch

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return max(0, torch.cuda.max_memory_allocated() - before)


def peak_memory_bytes(fn: Callable[[], object], device: str = "cpu", interval: float = 0.001) -> int:
    """Peak growth of resident memory while ``fn`` runs, relative to just before the call; on ``device`` cuda, of
    the GPU memory PyTorch allocates (:func:`gpu_peak_bytes`).

    Memory still held by the return value is included: it is sampled before being dropped.
    Freed heap memory is returned to the system first, so earlier work does not hide this call's.
    Without ``/proc`` only growth beyond the process's earlier peak can be seen.
    """
    if device == "cuda":
        return gpu_peak_bytes(fn)
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval}")
    _return_free_memory()
    baseline = rss_bytes()
    sampler = _Sampler(interval)
    sampler.start()
    try:
        result = fn()
        sampler.record()
        del result
    finally:
        sampler.stop()
    return max(0, sampler.peak - baseline)
