"""What a GPU check found (benchmarks/gpu_check.sh), in a few lines, from the files it wrote.

    python benchmarks/gpu_summary.py gpu-check/
    python benchmarks/gpu_summary.py gpu-check/ --cpu runs/compare-minilm-mr   # the comparison's training time on
                                                                                # the GPU against a CPU's
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

GIB = 2**30


def _json(path: Path) -> Any:
    """The last JSON object a command printed into ``path`` (None when there is none: it failed or did not run)."""
    if not path.is_file():
        return None
    text = path.read_text(errors="replace")
    start = text.find("{\n")
    try:
        return json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None


def _stage(stage: dict[str, Any]) -> str:
    timed = ", ".join(f"{p} {ms:.0f} ms" for p, ms in (stage.get("step_ms") or {}).items())
    parts = [f"{stage.get('seconds', 0):.0f} s", f"{stage.get('examples_per_second', 0):,.0f} examples/s"]
    if "peak_memory_bytes" in stage:
        parts.append(f"GPU memory peak {stage['peak_memory_bytes'] / GIB:.1f} GiB")
    parts.append(f"trained in {stage.get('precision')}" + (f" (auto timed a step: {timed})" if timed else ""))
    return f"  stage {stage.get('stage')}: " + ", ".join(parts)


def teacher_lines(record: dict[str, Any] | None) -> list[str]:
    if record is None:
        return ["teacher fine-tune: no record (see teacher-finetune.json)"]
    dev = " ".join(f"{h['accuracy']:.3f}" for h in record.get("history", []))
    return [f"teacher fine-tune on {record.get('device')}: {record['train_seconds']:.0f} s, "
            f"{record.get('examples_per_second') or 0:,.0f} examples/s, GPU memory peak "
            f"{record.get('peak_memory_bytes', 0) / GIB:.1f} GiB, {record.get('precision')}; dev accuracy by epoch "
            f"{dev}; test {record['test']['accuracy']:.3f}"]


def run_lines(record: dict[str, Any] | None, name: str) -> list[str]:
    if record is None:
        return [f"{name}: no record"]
    lines = [f"{name}: test accuracy {record['student']['accuracy']:.3f} against the teacher's "
             f"{record['teacher']['accuracy']:.3f}, {record['seconds']:.0f} s in all"]
    lines += [_stage(stage) for stage in record.get("stages", [])]
    speed = record.get("speed", {})
    if "teacher" in speed and "student" in speed:
        t, s = speed["teacher"], speed["student"]
        lines.append(f"  timed on {s.get('device', 'the CPU')}: batch 1 {t['latency_ms_p50']:.2f} -> "
                     f"{s['latency_ms_p50']:.2f} ms; batch {s['config']['batch_size']} {t['throughput']:,.0f} -> "
                     f"{s['throughput']:,.0f} examples/s")
    return lines


def speed_lines(table: dict[str, Any] | None) -> list[str]:
    if table is None:
        return ["GPU speed table: none (see gpu-speed.log)"]
    size = table["batch_size"]
    lines = [f"GPU speed table ({table['gpu']}, {table['seq_len']} tokens; ms, and x the teacher's eager fp32):"]
    for row in table["rows"]:
        lines.append(f"  {row['model']:>10} {row['format']:>22}: batch 1 {row['ms_1']:7.2f} ({row['x_1']:5.2f}x), "
                     f"batch {size} {row[f'ms_{size}']:8.2f} ({row[f'x_{size}']:5.2f}x)")
    lines += [f"  not timed: {what}: {why}" for what, why in table.get("not_timed", {}).items()]
    return lines


def training_seconds(metrics: list[Path], name) -> dict[str, float]:
    """Each run's training seconds (its record's ``phases``), by ``name(path)``."""
    return {name(path): (json.loads(path.read_text()).get("phases") or {}).get("training", 0.0) for path in metrics}


def comparison_lines(results: Path, cpu: Path | None) -> list[str]:
    gpu = training_seconds(sorted(results.glob("compare-seed-*.json")),
                           lambda path: path.stem.removeprefix("compare-").replace("-", "/", 2).replace("/", "-", 1))
    if not gpu:
        return ["default comparison: no run finished"]
    lines = [f"default comparison on the GPU: {len(gpu)} runs made, {sum(gpu.values()):.0f} s of training"]
    if cpu is not None:
        cpu_runs = training_seconds(sorted(cpu.glob("runs/*/*/metrics.json")),
                                    lambda path: f"{path.parent.parent.name}/{path.parent.name}")
        both = [name for name in gpu if name in cpu_runs]
        lines.append(f"  the same {len(both)} runs on the CPU: {sum(cpu_runs[n] for n in both):.0f} s of training "
                     f"against {sum(gpu[n] for n in both):.0f} s on the GPU")
        lines += [f"  {name}: CPU {cpu_runs[name]:.0f} s, GPU {gpu[name]:.0f} s" for name in both]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--cpu", type=Path, default=None, help="a comparison directory trained on a CPU")
    args = parser.parse_args()
    r = args.results
    lines = teacher_lines(_json(r / "teacher-finetune.json"))
    lines += run_lines(_json(r / "flagship.json"), "albert from the bert-large-shaped teacher")
    lines += speed_lines(json.loads((r / "gpu-speed.json").read_text()) if (r / "gpu-speed.json").is_file() else None)
    lines += comparison_lines(r, args.cpu)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
