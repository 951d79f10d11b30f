"""The machine, software and code a measurement was taken with, as a JSON-ready manifest; and what this CPU computes
natively (read from /proc/cpuinfo, without torch: `compress compare` asks it for its default set before torch
loads)."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from compress.bench.measurement import CpuInfo, Manifest

if TYPE_CHECKING:
    import torch

_CPUINFO = Path("/proc/cpuinfo")

# Instruction-set extensions that decide which int8/bf16 kernels torch and ONNX Runtime can use.
CPU_FEATURES = (
    "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "amx_bf16", "amx_int8", "amx_tile", "avx_vnni",
)

HALF_NAMES = ("bf16", "fp16")   # the half precisions a CPU may compute natively (half_available)

PACKAGES = ("compress", "torch", "transformers", "onnx", "onnxruntime", "numpy", "scikit-learn", "datasets")


def _cpuinfo_field(name: str) -> str | None:
    """The value of the first ``name : value`` line of /proc/cpuinfo, or None."""
    try:
        lines = _CPUINFO.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None


def cpu_model() -> str:
    """The CPU's marketing name, or ``"unknown"``."""
    return _cpuinfo_field("model name") or platform.processor() or "unknown"


def device_name(device: torch.device | str) -> str:
    """What a record says a device is: the GPU's name on CUDA, the CPU's model otherwise."""
    import torch

    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()


def cpu_features() -> dict[str, bool]:
    """Which of :data:`CPU_FEATURES` the CPU reports; all False when the flags are unknown."""
    flags = set((_cpuinfo_field("flags") or "").split())
    return {feature: feature in flags for feature in CPU_FEATURES}


def half_available(dtype: str, features: dict[str, bool]) -> str | None:
    """None when the CPU computes in ``dtype`` natively, else why not (one sentence)."""
    if dtype == "bf16":
        if features.get("avx512_bf16") or features.get("amx_bf16"):
            return None
        return "this CPU has neither AVX512-BF16 nor AMX, so bf16 runs emulated and slower than fp32."
    if features.get("avx512_fp16") or features.get("amx_fp16"):
        return None
    instead = "bf16 or int8" if half_available("bf16", features) is None else "int8"
    return f"this CPU has neither AVX512-FP16 nor AMX-FP16, so fp16 runs emulated; try {instead}."


def torch_cpu_capability() -> str:
    """The vector instruction set torch dispatches its CPU kernels to, e.g. ``AVX2``."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution, None for those not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _package_dir() -> Path:
    return Path(__file__).resolve().parents[1]


def _git(args: list[str], cwd: Path) -> str | None:
    """Stdout of ``git args`` in ``cwd``, None if git is missing or the command fails."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def git_commit(path: Path | None = None) -> str | None:
    """The commit checked out at ``path`` (default: the compress package), None if not a git checkout."""
    out = _git(["rev-parse", "HEAD"], path or _package_dir())
    return out.strip() if out and out.strip() else None


def git_dirty(path: Path | None = None) -> bool | None:
    """Whether the checkout has changes or untracked files; None if not a git checkout."""
    out = _git(["status", "--porcelain"], path or _package_dir())
    return None if out is None else bool(out.strip())


def manifest(*, threads: int, seed: int | None = None, split_fingerprint: str | None = None) -> Manifest:
    """Everything needed to judge whether two measurements are comparable."""
    return Manifest(
        python=platform.python_version(), platform=platform.platform(),
        cpu=CpuInfo(model=cpu_model(), count=os.cpu_count(), features=cpu_features(),
                    torch_capability=torch_cpu_capability()),
        threads=threads, seed=seed, packages=package_versions(), git={"commit": git_commit(), "dirty": git_dirty()},
        split_fingerprint=split_fingerprint, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
