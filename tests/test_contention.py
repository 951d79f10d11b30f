"""OtherLoad: the CPU time other processes used during a block, from /proc/stat minus our own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compress.bench.contention import OtherLoad, busy_cpu_seconds

STAT = """cpu  1000 20 300 5000 400 10 5 7 0 0
cpu0 500 10 150 2500 200 5 2 3 0 0
intr 12345
"""


def test_busy_seconds_count_every_state_but_idle_and_iowait():
    tick = os.sysconf("SC_CLK_TCK")
    assert busy_cpu_seconds(STAT) == pytest.approx((1000 + 20 + 300 + 10 + 5 + 7) / tick)
    assert busy_cpu_seconds("intr 1\n") is None


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="needs Linux's /proc/stat")
def test_a_process_spinning_beside_us_is_counted():
    def spin_here(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    # it says when it spins, and spins until killed (or until this process is gone: no spinner outlives the test)
    spin = "import os\nparent = os.getppid()\nprint('spinning', flush=True)\nwhile os.getppid() == parent: pass"
    spinner = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout.readline().strip() == "spinning"
        with OtherLoad() as busy:
            spin_here(1.5)
    finally:
        spinner.kill()
        spinner.wait()
    # The spinner took close to one CPU (half of it if the machine has one CPU and we shared it); other tests
    # running beside this one can only add to the figure.
    assert busy.cpus is not None and busy.cpus > 0.3
    assert busy.busy and "CPUs busy on average" in busy.warning()


def test_our_own_cpu_time_is_subtracted(monkeypatch):
    from compress.bench import contention

    readings = iter([(10.0, 4.0, 100.0), (13.0, 6.0, 101.0)])  # machine busy s, own CPU s, wall s

    def reading(index):
        return lambda: current[index]

    current = next(readings)
    monkeypatch.setattr(contention, "_machine_busy", reading(0))
    monkeypatch.setattr(contention, "_own_cpu", reading(1))
    monkeypatch.setattr(contention.time, "monotonic", reading(2))
    with OtherLoad() as load:
        current = next(readings)
    assert load.cpus == pytest.approx(1.0)  # 3 CPU-seconds busy in 1 s, 2 of them ours
    assert load.busy
