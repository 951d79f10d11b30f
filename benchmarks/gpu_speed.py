"""The GPU speed table: the teacher and each student at batch 1 and batch 32 on the GPU, in every runtime and format
compress can run there, against the teacher in fp32 on the same GPU, in one process.

    python benchmarks/gpu_speed.py                                   # bert-large's shape and its students, MR inputs
    python benchmarks/gpu_speed.py --teacher minilm --students albert,distilbert,tinybert --compiled bf16,fp16
    python benchmarks/gpu_speed.py --out gpu-speed.json              # also the table as JSON

Speed depends on a model's shape and format, not on its weights: each model is our encoder in the shape its method
gives the teacher's (``student_config``: the teacher alias's configuration, no weights needed), with random weights,
fed real MR test sentences cut or repeated to ``--seq-len`` tokens (default: the test split's 95th percentile, as
``compress compare`` times), exactly as ``compress run --speed-device cuda`` feeds them (``TorchPredictor`` on cuda:
the token ids copied to the GPU and the logits back in every call, so a call ends when the GPU's work does).

Formats, per model: PyTorch eager in fp32 (TF32 off), fp32 with TF32 matrix products (what ``--device cuda`` trains
in as fp32), bf16 and fp16 (the weights cast, as the bf16 and fp16 methods store them); ``torch.compile`` of the
formats ``--compiled`` names for the models ``--compile-models`` names (one compiled graph per batch shape, its
compile time printed apart and not timed);
ONNX Runtime's CUDA execution provider on the fp32 ONNX export where onnxruntime-gpu is installed (said otherwise).
float8 (``fp8``: weights as the fp8 method stores them, e4m3 with a scale per row) multiplied in float8 by
``torch._scaled_mm`` on a GPU with float8 units (compute capability 8.9 or later; the rest of the model in bf16).
The int8 and int4 formats compress makes are CPU formats (PyTorch's dynamic int8, ONNX Runtime's and OpenVINO's
int8 and int4): none has a GPU path in compress, and the table says so rather than timing them on the CPU.

Each cell is the median of ``--repeats`` calls after ``--warmup`` untimed ones (``compress.bench.timing.time_call``);
every ratio is the teacher's fp32 eager median at the same batch over the cell's, both from this run.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from compress.bench.inputs import speed_batch, speed_seq_len
from compress.bench.machine import cpu_model
from compress.bench.timing import time_call
from compress.data.batching import tokenize_task
from compress.data.load import load_task
from compress.device import fp8_unavailable
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.quantize.predictors import OrtPredictor, Predictor, TorchPredictor, ort_gpu_unavailable
from compress.quantize.torch_backend import fp8_encoder, to_fp8
from compress.registry import get_method
from compress.teachers.registry import load_tokenizer, teacher_config

EAGER = ("fp32", "tf32", "bf16", "fp16")
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CPU_ONLY = {"int8 / int4": "PyTorch's dynamic int8, ONNX Runtime's and OpenVINO's int8 and int4 run on the CPU only"}


def shapes(teacher: str, students: list[str], num_labels: int) -> dict[str, EncoderConfig]:
    """The teacher's shape and each student method's shape of it (its default options)."""
    base = teacher_config(teacher).replace(num_labels=num_labels)
    found = {"teacher": base}
    for name in students:
        method = get_method(name)
        found[name] = method.student_config(base, method.make_options({}))
    return found


def makers(config: EncoderConfig, compiled: list[str], onnx_dir: Path) -> dict[str, Callable[[], Predictor]]:
    """For every format of one shape, a function that builds its predictor on the GPU: one model with random
    weights (seed 0) drawn there, each format a cast copy of it."""
    torch.manual_seed(0)
    with torch.device("cuda"):
        base = Encoder(config).eval()

    def model(dtype: torch.dtype) -> Encoder:
        return copy.deepcopy(base).to(dtype)

    found: dict[str, Callable[[], Predictor]] = {
        f"eager {fmt}": (lambda fmt=fmt: TorchPredictor(model(DTYPES[fmt]), dtype=fmt, device="cuda")) for fmt in EAGER}
    for fmt in compiled:
        found[f"compiled {fmt}"] = lambda fmt=fmt: TorchPredictor(model(DTYPES[fmt]), dtype=fmt, device="cuda",
                                                                  compiled=True)
    if fp8_unavailable() is None:
        found["eager fp8"] = lambda: TorchPredictor(fp8_encoder(to_fp8(base), config, compute=True, device="cuda"),
                                                    dtype="fp8", device="cuda")
    if ort_gpu_unavailable() is None:
        def ort() -> Predictor:
            from compress.quantize.onnx_backend import export_onnx

            path = onnx_dir / f"{abs(hash(config.to_json()))}.onnx"
            if not path.exists():
                export_onnx(model(torch.float32), path)
            return OrtPredictor(path, threads=1, device="cuda")
        found["onnxruntime-cuda fp32"] = ort
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="bert-large", help="a teacher alias (its shape) or checkpoint directory")
    parser.add_argument("--students", default="albert,distilbert,tinybert", help="student methods, comma-separated")
    parser.add_argument("--compiled", default="bf16", help="formats to time under torch.compile too ('' for none)")
    parser.add_argument("--compile-models", default="teacher,albert",
                        help="the models timed compiled (each shape compiles for tens of seconds)")
    parser.add_argument("--seq-len", type=int, default=None, help="tokens per sentence (default: 95th percentile)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None, help="write the table as JSON here too")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: this table times models on a GPU.")
    began = time.perf_counter()
    gpu = torch.cuda.get_device_name()
    print(f"GPU: {gpu}; CPU: {cpu_model()}; torch {torch.__version__}")
    task = load_task("mr")
    data = tokenize_task(task, load_tokenizer("minilm"))
    seq_len = args.seq_len or speed_seq_len(data)
    batches = {1: speed_batch(data, 1, seq_len), args.batch_size: speed_batch(data, args.batch_size, seq_len)}
    compiled = [f for f in args.compiled.split(",") if f]
    rows: list[dict[str, Any]] = []
    base: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="compress-gpu-speed-") as tmp:
        for name, config in shapes(args.teacher, [s for s in args.students.split(",") if s], task.num_labels).items():
            formats = compiled if name in args.compile_models.split(",") else []
            for fmt, make in makers(config, formats, Path(tmp)).items():
                torch.backends.cuda.matmul.allow_tf32 = fmt.endswith("tf32")
                predictor = make()
                row: dict[str, Any] = {"model": name, "format": fmt, "params": sum(
                    p.numel() for p in getattr(predictor, "model", torch.nn.Module()).parameters())}
                for size, batch in batches.items():
                    started = time.perf_counter()
                    predictor(batch)   # a compiled format compiles this shape here
                    torch.cuda.synchronize()
                    row[f"first_call_s_{size}"] = round(time.perf_counter() - started, 2)
                    timing = time_call(lambda batch=batch, run=predictor: run(batch), batch_size=size,
                                       warmup=args.warmup, repeats=args.repeats)
                    row[f"ms_{size}"] = timing.p50_ms
                    if name == "teacher" and fmt == "eager fp32":
                        base[size] = timing.p50_ms
                    row[f"x_{size}"] = base[size] / timing.p50_ms
                rows.append(row)
                print(f"{name:>12} {fmt:>22}: batch 1 {row['ms_1']:7.2f} ms ({row['x_1']:5.2f}x), batch "
                      f"{args.batch_size} {row[f'ms_{args.batch_size}']:8.2f} ms ({row[f'x_{args.batch_size}']:5.2f}x)"
                      f"{'; first calls ' + str(row['first_call_s_1']) + ' s' if fmt.startswith('compiled') else ''}",
                      flush=True)
                del predictor
                torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False
    absent = {what: why for what, why in (("onnxruntime-cuda", ort_gpu_unavailable()),
                                          ("float8", fp8_unavailable())) if why}
    for what, why in {**absent, **CPU_ONLY}.items():
        print(f"not timed on the GPU: {what}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"gpu": gpu, "cpu": cpu_model(), "torch": torch.__version__,
                                        "seq_len": seq_len, "batch_size": args.batch_size, "repeats": args.repeats,
                                        "rows": rows, "not_timed": {**absent, **CPU_ONLY}}, indent=1))
    # The GPU check bounds this script's time; this line says whether the table or the process's exit took it.
    print(f"table done in {time.perf_counter() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()
