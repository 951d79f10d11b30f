"""The flagship path at full size: `compress run albert` on a BERT-large-shaped teacher, on CPU.

    python benchmarks/flagship_size.py                 # L24 H1024 (334M parameters), 96 sentences, 1 epoch each
    python benchmarks/flagship_size.py --layers 2 --hidden 256 --heads 4 --ffn 512   # a one-minute try

Without hub access the real bert-large cannot be fetched, so this builds a random-weight BERT
checkpoint in the `transformers` layout (with minilm's tokenizer) and drives the real CLI on it in
two processes, so that each phase's peak memory is its own: `compress teachers finetune` (the
teacher, one epoch) and `compress run albert` (the cached teacher, the ALBERT student built from it,
one distillation epoch, the speed of both measured). It prints, per phase, the wall time, the
time per training step and the peak resident memory (the process's maximum RSS). The accuracy of a
random teacher means nothing; what this shows is that nothing on the path assumes a small model.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compress.bench.machine import cpu_model

WORDS = {"pos": ["a warm, funny and moving film", "beautifully acted and smart", "the best of the year"],
         "neg": ["a dull and lifeless mess", "far too long and never funny", "the worst script in years"]}


def write_teacher(directory: Path, args: argparse.Namespace) -> int:
    """A random-weight BERT (``BertModel``) saved as transformers saves it; returns its parameter count."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from compress.teachers.registry import resolve_teacher_dir

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(resolve_teacher_dir("minilm"))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=args.ffn)
    model = BertModel(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


def write_data(path: Path, copies: int) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows((f"{text} ({i})", label) for i in range(copies) for label, texts in WORDS.items()
                         for text in texts)


def phase(args: list[str], env: dict[str, str], logs: Path) -> tuple[float, float, dict]:
    """Wall seconds, peak RSS in GB (of this process alone) and the JSON printed, for one `compress` process."""
    start = time.perf_counter()
    with open(logs / "stdout", "w") as out, open(logs / "stderr", "w") as err:
        child = subprocess.Popen([sys.executable, "-m", "compress", *args, "--json"], env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"compress {' '.join(args)} failed:\n{(logs / 'stderr').read_text()}")
    return seconds, usage.ru_maxrss / 2**20, json.loads((logs / "stdout").read_text())  # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--ffn", type=int, default=4096)
    parser.add_argument("--copies", type=int, default=16, help="sentences per label = 3 x copies")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="flagship-") as scratch:
        root = args.dir or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        teacher, data = root / "teacher", root / "data.csv"
        params = write_teacher(teacher, args)
        write_data(data, args.copies)
        env = {**os.environ, "COMPRESS_CACHE": str(root / "cache"), "OMP_NUM_THREADS": str(args.threads)}
        common = ["--teacher", str(teacher), "--dataset", str(data)]
        print(f"CPU: {cpu_model()}, {args.threads} threads; teacher L{args.layers} H{args.hidden} "
              f"({params / 1e6:.0f}M parameters), random weights")

        t_wall, t_peak, t_record = phase(["teachers", "finetune", *common, "--epochs", "1",
                                          "--batch-size", str(args.batch_size)], env, root)
        s_wall, s_peak, run = phase(["run", "albert", *common, "--epochs", "1", "--batch-size", str(args.batch_size),
                                     "--teacher-epochs", "1", "--teacher-batch-size", str(args.batch_size),
                                     "--threads", str(args.threads), "--out", str(root / "run")], env, root)
        train = run["dataset"]["sizes"]["train"]
        steps = math.ceil(train / args.batch_size)
        distil = run["stages"][0]["seconds"]
        print(f"teacher fine-tuning: {t_record['train_seconds']:.0f} s for {steps} steps of {args.batch_size} "
              f"({t_record['train_seconds'] / steps:.1f} s/step), process {t_wall:.0f} s, peak RSS {t_peak:.1f} GB")
        print(f"ALBERT student ({run['student']['params'] / 1e6:.1f}M parameters): {distil:.0f} s for {steps} steps "
              f"({distil / steps:.1f} s/step), process {s_wall:.0f} s, peak RSS {s_peak:.1f} GB")
        print(f"batch-1 latency: teacher {run['speed']['teacher']['latency_ms_p50']:.0f} ms, "
              f"student {run['speed']['student']['latency_ms_p50']:.0f} ms")


if __name__ == "__main__":
    main()
