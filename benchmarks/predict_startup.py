"""How long `compress predict RUN "a text"` takes, as a user waits for it: a whole process, start to answer.

    python benchmarks/predict_startup.py RUN_DIR            # a finished run on ONNX Runtime (int8, say)
    python benchmarks/predict_startup.py                    # makes one first: ONNX Runtime int8 of minilm on MR
    python benchmarks/predict_startup.py RUN_DIR --runs 9 --threads 2

Each timing is one `python -m compress predict RUN_DIR TEXT --threads N` process, from its start to its exit; one
untimed run first warms the operating system's file cache, then the median (and the range) of ``--runs`` runs is
printed, with the CPU and how busy it was (the load average: other work on the machine lengthens every run), and the
median CPU time of a run (user and system), which other work does not lengthen. The
model's threads are fixed (``--threads``, default 2) and the threads numpy's libraries start are fixed to one, so a
machine with more cores times the same work.

Without RUN_DIR it makes `compress run "int8[backend=onnxruntime]" --out DIR` first (the bundled minilm teacher
fine-tuned on MR, which the cache keeps afterwards: about 8 minutes on 2 cores the first time) and says how long that
took. Then
``python -X importtime`` of the same command lists the imports that take longest (cumulative), the start-up's cost.

The goal: at most 1.5 s median on an idle 2-core machine (3.6 s when predict imported torch, transformers and
datasets).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compress.bench.machine import cpu_model

TEXT = "a gripping, funny and beautifully acted film"
GOAL_S = 1.5
SINGLE_THREADED = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def make_run(out: Path) -> Path:
    """`compress run "int8[backend=onnxruntime]" --out OUT` (the fine-tuned minilm on MR), timed."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compress", "run", "int8[backend=onnxruntime]", "--out", str(out)],
                   check=True)
    print(f"made {out} in {time.perf_counter() - start:.0f} s (its fine-tuned teacher is "
          "cached for the next time)")
    return out


def predict_command(run_dir: Path, threads: int) -> list[str]:
    return [sys.executable, "-m", "compress", "predict", str(run_dir), TEXT, "--threads", str(threads)]


def timed_process(command: list[str]) -> tuple[float, float]:
    """Seconds from starting ``command`` to its exit, and the CPU seconds it used (user and system); it must
    succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, **SINGLE_THREADED})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_offenders(command: list[str], top: int) -> list[tuple[float, str]]:
    """The ``top`` imports with the longest cumulative time under ``python -X importtime`` (seconds, module)."""
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], check=True, capture_output=True, text=True,
                          env={**os.environ, **SINGLE_THREADED})
    found = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
            if cumulative.isdigit():
                found.append((int(cumulative) / 1e6, name))
    return sorted(found, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", help="a finished run on ONNX Runtime (default: make one)")
    parser.add_argument("--runs", type=int, default=5, help="timed processes (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="the model's threads (default 2)")
    parser.add_argument("--top", type=int, default=15, help="imports listed by -X importtime (default 15)")
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; {os.cpu_count()} cores; load average before: "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    run_dir = Path(args.run_dir) if args.run_dir else make_run(Path(tempfile.mkdtemp()) / "predict-int8")
    command = predict_command(run_dir, args.threads)
    timed_process(command)   # warm-up: the files into the page cache
    walls, cpus = zip(*(timed_process(command) for _ in range(args.runs)), strict=True)
    median = statistics.median(walls)
    print(f"`compress predict {run_dir} \"{TEXT}\" --threads {args.threads}`: median {median:.2f} s of {args.runs} "
          f"(min {min(walls):.2f}, max {max(walls):.2f}); CPU time median {statistics.median(cpus):.2f} s (what it "
          f"takes on an idle machine, where the start-up has a core to itself); goal at most {GOAL_S} s on an idle "
          f"2-core machine: {'met' if median <= GOAL_S else 'not met'}")
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"slowest imports (python -X importtime, cumulative, top {args.top}):")
    for seconds, name in import_offenders(command, args.top):
        print(f"  {seconds:6.3f} s  {name}")


if __name__ == "__main__":
    main()
