"""Time one training step in fp32 and under bf16 autocast (the two --precision settings the CPU trains in).

    python benchmarks/training_precision.py                 # the ALBERT student of minilm, 2 threads
    python benchmarks/training_precision.py --student teacher --threads 1

A step is what ``compress.training.train_stage`` does per batch: forward under ``torch.autocast`` (or
not), cross-entropy, backward, gradient clipping, fused AdamW. Batch 32 of 64 real MR tokens; warm-up
steps, then the median of ``--repeats`` steps for each precision, the two alternating step by step so
that both see the same machine. Prints the CPU, since the answer depends on it: bf16 pays on CPUs with
AVX-512 BF16 or AMX, and costs conversions elsewhere.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from compress.bench.machine import cpu_features, cpu_model
from compress.bench.timing import fixed_threads
from compress.data.batching import tokenize_task
from compress.data.load import load_task
from compress.models.checkpoints import load_encoder
from compress.students.albert import AlbertOptions, build_albert
from compress.teachers.finetune import hard_label_loss
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir
from compress.training import PRECISIONS, TrainConfig, _optimizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--student", choices=("albert", "teacher"), default="albert")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    directory = resolve_teacher_dir(args.teacher)
    task = load_task("mr")
    teacher = load_encoder(directory, num_labels=task.num_labels).model
    model = build_albert(teacher, AlbertOptions()) if args.student == "albert" else teacher
    data = tokenize_task(task, load_tokenizer(str(directory)), max_length=args.seq_len)
    batch = next(iter(data.dataloader("train", batch_size=args.batch_size, shuffle=False)))
    optimizer = _optimizer(model, [], TrainConfig())
    model.train()

    def step(precision: str) -> float:
        dtype = PRECISIONS[precision]
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss, _ = hard_label_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return time.perf_counter() - start

    print(f"CPU: {cpu_model()}; AVX-512 BF16: {bool(cpu_features().get('avx512_bf16'))}; AMX: "
          f"{bool(cpu_features().get('amx_bf16'))}; torch {torch.__version__}; {args.threads} threads; "
          f"{args.student} of {args.teacher}, batch {args.batch_size} x {tuple(batch['input_ids'].shape)[1]} tokens")
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    with fixed_threads(args.threads):
        for i in range(args.repeats + 3):
            for precision in (("fp32", "bf16") if i % 2 == 0 else ("bf16", "fp32")):
                elapsed = step(precision)
                if i >= 3:   # warm-up steps
                    times[precision].append(elapsed)
    fp32, bf16 = (statistics.median(times[p]) * 1000 for p in ("fp32", "bf16"))
    print(f"median step: fp32 {fp32:.0f} ms, bf16 autocast {bf16:.0f} ms -> bf16 is {fp32 / bf16:.2f}x fp32's speed")


if __name__ == "__main__":
    main()
