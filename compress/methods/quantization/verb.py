"""Quantization's verb: build the format on every backend asked for (``auto``: each it runs on and is installed),
load each back from disk, time it on the task's own inputs, score it on the dev split, keep the fastest of those
that keep enough of fp32's accuracy, and measure how far it is from fp32 on the test split."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from compress.bench.inputs import INPUT_NAMES, speed_seq_len
from compress.bench.machine import cpu_features, cpu_model, half_available, torch_cpu_capability
from compress.bench.measurement import Predictor, Speed, batch_phrase
from compress.bench.speed import SpeedConfig, measure_all, measure_speed
from compress.bench.timing import default_threads
from compress.data.batching import TokenizedTask
from compress.errors import CompressError
from compress.methods.quantization.details import CpuRecord, QuantDetails, keeping
from compress.methods.quantization.options import QuantOptions
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.predictions import Predictions
from compress.quantize.artefacts import (
    QuantMethod,
    candidate_backends,
    load_artefact,
    needs_calibration,
    read_manifest,
    shape_misfit,
    unavailable,
    write_artefact,
)
from compress.quantize.formats import MatrixBits
from compress.quantize.predictors import TorchPredictor, predict_batches
from compress.quantize.torch_backend import HALF_DTYPES
from compress.registry import Artefact, Context, Transformed
from compress.train_config import DEFAULT_SEED
from compress.training import with_progress

CALIBRATION_EXAMPLES = 256

# Quantized models are scored one test sentence at a time, as a service answering requests runs them,
# and again in padded batches of BATCHED. The two differ for dynamic int8: it takes each activation's
# range over the whole batch, padding and other sentences included, so one sentence's outliers make
# the steps coarser for all. The minilm teacher on MR in int8: 83.0% one at a time, 82.0% in batches
# of 128 (fp32: 82.9% either way).
BATCHED = 128

# What --choose-by compares, in the measurement's words (both are milliseconds of one call: less is faster).
CHOOSE_BY = {"latency": "latency_ms_p50", "throughput": "batch_ms_p50"}
BITS_PLOT = "bits.png"   # bits per matrix: each matrix's sensitivity and width (reports.plots.bits_per_matrix_png)


def calibration_batches(data: TokenizedTask, seed: int) -> list[dict[str, np.ndarray]]:
    """Batches of training examples (shuffled, seeded) for static int8's activation ranges (and NNCF's)."""
    batches = []
    for batch in data.dataloader("train", batch_size=32, shuffle=True, seed=seed):
        batches.append({k: batch[k].numpy() for k in INPUT_NAMES})
        if len(batches) * 32 >= CALIBRATION_EXAMPLES:
            break
    return batches


def usable_backends(method: QuantMethod, backend: str, device: str = "cpu",
                    shape: EncoderConfig | None = None) -> tuple[list[str], dict[str, str]]:
    """The backends to build and, for those left out, why; one clear line when none can run (on ``device``, where
    the model is timed: the CPU or a GPU; for a model of ``shape``, where given)."""
    backends = candidate_backends(method, backend)
    reasons = {b: unavailable(method, b, device) or (shape_misfit(method, b, shape) if shape else None)
               for b in backends}
    usable = [b for b in backends if reasons[b] is None]
    if not usable:
        raise CompressError(f"{method.name} cannot run here: {reasons[backends[0]]}")
    return usable, {b: r for b, r in reasons.items() if r is not None}


def apply(model: Encoder, options: QuantOptions, context: Context, fmt: QuantMethod,
          reference: Encoder | None = None) -> Transformed:
    """``model`` in ``fmt`` on the fastest backend of those ``options.backend`` allows, as an artefact in
    ``context.workdir`` (a new temporary directory when None); ``context.data`` gives the inputs it is timed
    and scored on (and static int8's calibration batches). The fp32 figures (speed, accuracy, agreement) are
    ``reference``'s where given: the model before quantization-aware training changed it."""
    backends, skipped = usable_backends(fmt, options.backend, context.speed_device, model.config)
    data = context.data
    if data is None:
        raise CompressError(f"{fmt.name} needs the task's data to time and score the model (Context.data).")
    workdir = context.workdir or Path(tempfile.mkdtemp(prefix=f"compress-{fmt.name}-"))
    features = cpu_features()
    speed = SpeedConfig(threads=context.threads or default_threads(), device=context.speed_device,
                        batch_shape=options.batch_shape)
    seq_len = speed_seq_len(data)

    def batches(split: str, size: int):
        return data.dataloader(split, batch_size=size)

    def one_at_a_time(predictor: Predictor, split: str, backend: str):
        """Logits and labels of ``split``'s sentences one by one, under a progress bar (the slow part of a run)."""
        what = f"{fmt.name} on {backend}: {split} sentences"
        return predict_batches(predictor, with_progress(batches(split, 1), what, context.show_progress))

    fp32 = TorchPredictor((reference or model).eval(), device=context.speed_device)
    fp32_logits, labels = predict_batches(fp32, batches("test", BATCHED))  # fp32 ignores padding: any size
    fp32_speed = measure_speed(fp32, data, seq_len, speed)
    # The seeded method (static int8) calibrates on its seed's sentences; int8 on OpenVINO (NNCF), not a
    # seeded method, on the default seed's: the same set static int8 uses by default.
    calibrating = any(needs_calibration(fmt, b) for b in backends)
    calibration = calibration_batches(data, context.seed if fmt.calibrated else DEFAULT_SEED) if calibrating else None
    loaded = {}
    for built in backends:
        directory = workdir / f"model-{built}"
        directory.mkdir()
        write_artefact(fmt, built, model, directory, calibration=calibration,
                       label_names=context.task.label_names if context.task is not None else None)
        loaded[built] = load_artefact(directory, speed.threads, device=speed.device)  # measured as written
    # Two passes in alternating order, each backend's fastest kept: a burst of load on a shared machine
    # slows one pass of one backend, not the choice.
    measured = measure_all(loaded, data, seq_len, speed, passes=2 if len(backends) > 1 else 1)
    dev_predictions, fp32_dev = {}, None
    if len(backends) > 1:  # a choice to make: only among backends that keep the accuracy asked for
        fp32_dev = Predictions.of(*predict_batches(fp32, batches("dev", BATCHED))).metrics().primary
        dev_predictions = {b: Predictions.of(*one_at_a_time(p, "dev", b)) for b, p in loaded.items()}
    dev = {b: p.metrics().primary for b, p in dev_predictions.items()}
    key = CHOOSE_BY[options.choose_by]
    chosen = choose({b: m[key] for b, m in measured.items()}, dev, fp32_dev, options.min_retention)
    chosen_dev = dev_predictions[chosen] if chosen in dev_predictions else \
        Predictions.of(*one_at_a_time(loaded[chosen], "dev", chosen))
    for built in backends:
        if built != chosen:
            shutil.rmtree(workdir / f"model-{built}")
    quantized: Predictor = loaded[chosen]
    # Timed again: the sample the choice was made on favours the winner (it won partly by luck).
    student_speed = measure_speed(quantized, data, seq_len, speed)
    logits, _ = one_at_a_time(quantized, "test", chosen)
    batched_logits, _ = predict_batches(quantized, batches("test", BATCHED))
    test = Predictions.of(logits, labels)
    accuracy, fp32_accuracy = test.metrics().primary, Predictions.of(fp32_logits, labels).metrics().primary
    bits = [MatrixBits(**m) for m in read_manifest(workdir / f"model-{chosen}").get("bits", [])] or None
    details = QuantDetails(
        backend=chosen, dtype=fmt.dtype,
        chosen_by=_chosen_by(options, chosen, skipped, dev, fp32_dev, measured[chosen]),
        measured=measured, skipped=skipped, fp32_speed=fp32_speed,
        cpu=CpuRecord(cpu_model(), features, torch_cpu_capability()),
        max_abs_logit_diff=float(np.abs(logits - fp32_logits).max()),
        prediction_agreement=float((logits.argmax(-1) == fp32_logits.argmax(-1)).mean()),
        fp32_accuracy=fp32_accuracy, accuracy_drop_points=100 * (fp32_accuracy - accuracy),
        batched_accuracy=Predictions.of(batched_logits, labels).metrics().primary, batched_size=BATCHED,
        calibration_examples=sum(len(b["input_ids"]) for b in calibration)
        if calibration and needs_calibration(fmt, chosen) else None,
        note=half_available(fmt.dtype, features) if fmt.dtype in HALF_DTYPES else None,
        dev_accuracy=dev, fp32_dev_accuracy=fp32_dev, min_retention=options.min_retention if dev else None,
        inference_precision={b: p.inference_precision for b, p in loaded.items() if hasattr(p, "inference_precision")},
        bits=bits,
    )
    # the fp32 model was timed where the artefact is (a GPU, with --speed-device cuda); it is kept here
    (reference or model).cpu()
    files = {BITS_PLOT: _bits_plot(bits, f"Bits per matrix: at least {fmt.int4_share:.0%} of the weights in 4 bits, "
                                         "the least sensitive first")} if bits else {}
    return Transformed(quantized, details, files=files,
                       artefact=Artefact(workdir / f"model-{chosen}", chosen, fmt.dtype),
                       test=test, dev=chosen_dev, speed={"source": fp32_speed, "student": student_speed})


def _bits_plot(bits: list[MatrixBits], title: str) -> bytes:
    from compress.reports.plots import bits_per_matrix_png  # matplotlib, for bits per matrix only

    return bits_per_matrix_png(bits, title)


def probe(model: Encoder, options: QuantOptions, context: Context,
          fmt: QuantMethod) -> dict[str, Callable[[], Predictor]]:
    """For every backend ``options.backend`` allows, a function that writes ``model`` in ``fmt`` on it into
    ``context.workdir`` and loads it back from its files: what a search times before it trains anything, building only
    the backends it asks for (calibrated formats take their ranges from ``context.data``'s training batches, so they
    run as they will, whatever the weights)."""
    backends, _ = usable_backends(fmt, options.backend, shape=model.config)
    if context.workdir is None:
        raise CompressError(f"{fmt.name}'s probe writes its artefacts into Context.workdir, and it is None.")
    workdir = context.workdir

    def build(backend: str) -> Predictor:
        calibration = None
        if needs_calibration(fmt, backend):
            if context.data is None:
                raise CompressError(f"{fmt.name} calibrates on the task's training batches (Context.data).")
            calibration = calibration_batches(context.data, context.seed if fmt.calibrated else DEFAULT_SEED)
        directory = workdir / f"model-{backend}"
        directory.mkdir(parents=True)
        write_artefact(fmt, backend, model, directory, calibration=calibration)
        return load_artefact(directory, context.threads or default_threads())

    return {backend: functools.partial(build, backend) for backend in backends}


def choose(times: dict[str, float], dev: dict[str, float], fp32_dev: float | None, min_retention: float) -> str:
    """The backend of least time (a batch's milliseconds) among those whose ``dev`` accuracy is at least
    ``min_retention`` of fp32's (all of them when nothing was scored); the most accurate on dev when none is."""
    kept = keeping(list(times), dev, fp32_dev, min_retention)
    return min(kept, key=times.__getitem__) if kept else max(dev, key=dev.__getitem__)


def _chosen_by(options: QuantOptions, chosen: str, skipped: dict[str, str], dev: dict[str, float],
               fp32_dev: float | None, speed: Speed) -> str:
    """Why ``chosen`` was kept (``speed``: its measurement, which says how its large batches were shaped);
    ``fp32_dev`` is None when nothing was scored (one backend to build)."""
    if options.backend != "auto":
        return f"asked for with --backend {options.backend}"
    why = "".join(f"; {b} left out: {reason}" for b, reason in skipped.items())
    if fp32_dev is None:
        return "the only one that runs here" + why
    scores = f"{fp32_dev:.2%}; " + ", ".join(f"{b} {acc:.2%}" for b, acc in dev.items())
    share = f"{options.min_retention:.0%} of fp32's dev accuracy ({scores})"
    if dev[chosen] < options.min_retention * fp32_dev:  # choose() fell back to the most accurate
        return f"the most accurate on dev: none kept {share}" + why
    at = "batch 1" if options.choose_by == "latency" else \
        batch_phrase(options.batch_shape, speed["config"]["batch_size"], speed["seq_len"], speed.get("padding"))
    return f"the fastest at {at} of those keeping {share}" + why
