"""The teacher's outputs a distillation stage reads, computed once per teacher, tokenized split and selection,
cached on disk and read by every later epoch, seed and run instead of a teacher forward in each step.

A stage that reads only logits uses the logits cache (:mod:`compress.distill.teacher_logits`). A stage that reads
hidden states or attention maps (DistilBERT's cosine term, TinyBERT's intermediate stage, pruning's and low-rank's
recoveries) stores exactly what its loss terms read (:class:`TargetSpec`: the mapped layers' hidden states, the
mapped layers' attention scores or probabilities) with the logits, in one entry
``teacher_targets/<teacher>-<tokenization>-<split>-<selection>/``:

- ``logits.safetensors``: (examples, classes), fp32;
- ``hidden.bf16``: the real tokens of every example in dataset order, (tokens, selected layers, width), bf16;
- ``attention.bf16``: for every example in dataset order, (selected layers, heads, n, n) over its n real tokens, bf16;
- ``layout.json``: the selection, the shapes and the token count of every example, checked against the split.

bf16 is enough for targets (the losses compute in fp32); padding is not stored, and a batch's targets are padded
with zeros, which the losses never read (they mask padded tokens before any arithmetic). The two ``.bf16`` files
are memory-mapped, so a run reads the rows of its batches, not the whole file; their checksums are verified on
first use like every cache entry (:mod:`compress.cache`). The teacher computes them in fp32, in inference mode.

An entry that would not fit (over :data:`MAX_BYTES`, or more than the disk has free but a margin) is not written;
the stage then runs the teacher in each step as before, and says so in one line. On MR with the minilm teacher an
entry is 0.2 GB (DistilBERT's last layer) to 2.1 GB (a recovery that reads all 13 hidden states).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from compress.cache import cached, unreadable
from compress.data.batching import DynamicPaddingCollator, TokenizedTask
from compress.distill.teacher_logits import teacher_logits
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.paths import as_ordinary_file, cache_dir, notice
from compress.training import model_inputs, to_device, with_progress

LOGITS, HIDDEN, ATTENTION, LAYOUT = "logits.safetensors", "hidden.bf16", "attention.bf16", "layout.json"
MAX_BYTES = 8 * 2**30            # an entry larger than this is not written (the stage runs the teacher instead)
FREE_MARGIN = 2 * 2**30          # nor one that would leave less than this free on the cache's disk
INDEX = "target_index"           # the column that tells the collator which stored example a row is


@dataclass(frozen=True)
class TargetSpec:
    """What a stage reads of the teacher besides its logits: ``hidden`` indexes its ``hidden_states`` (0: the
    embedding output), ``layers`` its ``attention`` maps (``attention_scores`` or ``attention_probs``)."""

    hidden: tuple[int, ...] = ()
    attention: str | None = None
    layers: tuple[int, ...] = ()

    @property
    def logits_only(self) -> bool:
        return not self.hidden and self.attention is None

    @property
    def tag(self) -> str:
        """A short, unique name of the selection for the entry's directory."""
        parts = [f"h{'.'.join(map(str, self.hidden))}"] if self.hidden else []
        if self.attention is not None:
            parts.append(f"{self.attention.removeprefix('attention_')}{'.'.join(map(str, self.layers))}")
        return "-".join(parts) or "logits"


@dataclass(frozen=True)
class StoredTargets:
    """A split's stored targets; :meth:`batch` gathers and pads the rows of one batch."""

    spec: TargetSpec
    logits: torch.Tensor                  # (examples, classes)
    token_offsets: torch.Tensor | None    # (examples + 1,): example i's tokens are token_offsets[i]:token_offsets[i+1]
    hidden: torch.Tensor | None           # (tokens, len(spec.hidden), width)
    map_offsets: torch.Tensor | None      # (examples + 1,) into ``attention``
    attention: torch.Tensor | None        # flat: per example (len(spec.layers), heads, n, n)
    heads: int = 0

    @property
    def nbytes(self) -> int:
        """The bytes of every tensor it holds (what moving it to a GPU takes there)."""
        tensors = (self.logits, self.token_offsets, self.hidden, self.map_offsets, self.attention)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def to(self, device: torch.device) -> StoredTargets:
        """The same targets with every tensor on ``device`` (read whole from their files once)."""
        moved = {name: None if t is None else t.to(device) for name, t in (
            ("logits", self.logits), ("token_offsets", self.token_offsets), ("hidden", self.hidden),
            ("map_offsets", self.map_offsets), ("attention", self.attention))}
        return replace(self, **moved)

    def gather(self, index: torch.Tensor, length: int) -> dict[str, torch.Tensor]:
        """What :meth:`batch` gives, computed where the targets are (a GPU: no host round trip) in a few indexing
        operations instead of a loop over the rows: every stored value a row reads is found by its position in the
        flat tensor, and positions past a row's tokens read zero."""
        index = index.to(self.logits.device, torch.long)
        out = {"teacher_logits": self.logits[index].float()}
        if self.hidden is None and self.attention is None:
            return out
        start = self.token_offsets[index]
        tokens = (self.token_offsets[index + 1] - start)[:, None]                    # (B, 1)
        position = torch.arange(length, device=index.device)
        if self.hidden is not None:
            inside = position[None, :] < tokens                                      # (B, length)
            rows = torch.where(inside, start[:, None] + position[None, :], 0)
            hidden = self.hidden[rows].masked_fill(~inside[..., None, None], 0)     # (B, length, K, H)
            out["teacher_hidden"] = hidden.transpose(1, 2).contiguous()
        if self.attention is not None:
            n = tokens[:, :, None, None]                                             # (B, 1, 1, 1)
            maps = torch.arange(len(self.spec.layers) * self.heads, device=index.device)[None, :, None, None]
            row, col = position[None, None, :, None], position[None, None, None, :]
            inside = (row < n) & (col < n)                                           # (B, 1, length, length)
            flat = self.map_offsets[index][:, None, None, None] + (maps * n + row) * n + col
            values = self.attention[torch.where(inside, flat, 0)].masked_fill(~inside, 0)
            out["teacher_attention"] = values.view(len(index), len(self.spec.layers), self.heads, length, length)
        return out

    def batch(self, index: Sequence[int], length: int) -> dict[str, torch.Tensor]:
        """``teacher_logits`` (B, C) and, where stored, ``teacher_hidden`` (B, K, length, H) and
        ``teacher_attention`` (B, L, heads, length, length), zero past each example's tokens. The batch comes first in
        each, as in every tensor of a batch, so a data-parallel process takes its slice of all of them alike."""
        out = {"teacher_logits": self.logits[list(index)].float()}
        if self.hidden is not None:
            hidden = torch.zeros(len(index), len(self.spec.hidden), length, self.hidden.shape[-1], dtype=torch.bfloat16)
            for row, i in enumerate(index):
                start, stop = int(self.token_offsets[i]), int(self.token_offsets[i + 1])
                hidden[row, :, : stop - start] = self.hidden[start:stop].transpose(0, 1)
            out["teacher_hidden"] = hidden
        if self.attention is not None:
            layers = len(self.spec.layers)
            maps = torch.zeros(len(index), layers, self.heads, length, length, dtype=torch.bfloat16)
            for row, i in enumerate(index):
                start, stop = int(self.map_offsets[i]), int(self.map_offsets[i + 1])
                n = int(self.token_offsets[i + 1] - self.token_offsets[i])
                maps[row, :, :, :n, :n] = self.attention[start:stop].view(layers, self.heads, n, n)
            out["teacher_attention"] = maps
        return out


def entry_bytes(spec: TargetSpec, lengths: Sequence[int], width: int, heads: int) -> int:
    """The size of ``spec``'s stored targets for examples of ``lengths`` tokens (two bytes a value)."""
    hidden = sum(lengths) * len(spec.hidden) * width
    maps = sum(n * n for n in lengths) * len(spec.layers) * heads if spec.attention else 0
    return 2 * (hidden + maps)


def _room_for(target: Path, needed: int) -> str | None:
    """Why an entry of ``needed`` bytes is not written under ``target``, or None when it fits."""
    if needed > MAX_BYTES:
        return f"it would take {needed / 2**30:.1f} GB, over the {MAX_BYTES / 2**30:.0f} GB limit"
    root = target.parent
    while not root.exists():
        root = root.parent
    free = shutil.disk_usage(root).free
    if needed + FREE_MARGIN > free:
        return f"it would take {needed / 2**30:.1f} GB of the {free / 2**30:.1f} GB free"
    return None


def _as_bits(values: torch.Tensor) -> np.ndarray:
    return values.to(torch.bfloat16).contiguous().view(torch.int16).numpy().view(np.uint16)


def _mapped(path: Path, count: int) -> torch.Tensor:
    """The file's ``count`` bf16 values, memory-mapped (pages are read as rows are used; writes stay private)."""
    if path.stat().st_size != 2 * count:
        raise ValueError(f"{path.name} holds {path.stat().st_size} bytes, not {2 * count}")
    return torch.from_file(str(path), shared=False, size=count, dtype=torch.bfloat16)


def stored_targets(teacher: Encoder, data: TokenizedTask, split: str, teacher_fingerprint: str, spec: TargetSpec,
                   device: torch.device, show_progress: bool = True) -> StoredTargets | None:
    """The teacher's targets on ``split`` as ``spec`` selects them, computed once and cached; None when the entry
    would not fit on disk (said in one line: the caller then runs the teacher in each step)."""
    if spec.logits_only:
        return StoredTargets(spec, teacher_logits(teacher, data, split, teacher_fingerprint, device, show_progress),
                             None, None, None, None)
    config = teacher.config
    if spec.attention and config.heads is not None and len(set(config.heads)) > 1:
        return None   # a pruned teacher's maps differ in shape by layer: not stored (no recipe reads them)
    examples = data.split(split)
    lengths = [len(ids) for ids in examples["input_ids"]]
    width, heads = config.hidden_size, config.heads[0] if config.heads else config.num_heads
    target = cache_dir() / "teacher_targets" / f"{teacher_fingerprint}-{data.split_key(split)}-{spec.tag}"
    layout = {"format": 1, "examples": len(lengths), "lengths": lengths, "hidden": list(spec.hidden),
              "attention": spec.attention, "layers": list(spec.layers), "width": width, "heads": heads}
    token_offsets = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.long)
    map_offsets = torch.tensor([0, *np.cumsum([n * n * len(spec.layers) * heads for n in lengths])], dtype=torch.long)

    def build(tmp: Path) -> None:
        hidden = np.memmap(tmp / HIDDEN, np.uint16, "w+", shape=(int(token_offsets[-1]), len(spec.hidden), width)) \
            if spec.hidden else None
        maps = np.memmap(tmp / ATTENTION, np.uint16, "w+", shape=(int(map_offsets[-1]),)) if spec.attention else None
        logits = torch.zeros(len(lengths), config.num_labels)
        teacher.eval()
        with torch.inference_mode():
            for batch in with_progress(data.eval_batches(split), f"teacher targets ({split})", show_progress):
                out = teacher(**model_inputs(to_device(batch, device)), output_hidden_states=bool(spec.hidden),
                              output_attentions=spec.attention is not None)
                logits[batch["index"]] = out.logits.float().cpu()
                chosen = torch.stack([out.hidden_states[k] for k in spec.hidden], 2).cpu() if spec.hidden else None
                chosen_maps = torch.stack([getattr(out, spec.attention)[k] for k in spec.layers], 1).cpu() \
                    if spec.attention else None
                for row, i in enumerate(batch["index"].tolist()):
                    n = lengths[i]
                    if hidden is not None:
                        hidden[int(token_offsets[i]):int(token_offsets[i + 1])] = _as_bits(chosen[row, :n])
                    if maps is not None:
                        maps[int(map_offsets[i]):int(map_offsets[i + 1])] = \
                            _as_bits(chosen_maps[row, :, :, :n, :n]).reshape(-1)
        for array in (hidden, maps):
            if array is not None:
                array.flush()
        save_file({"logits": logits.contiguous()}, tmp / LOGITS)
        as_ordinary_file(tmp / LOGITS)
        (tmp / LAYOUT).write_text(json.dumps(layout))

    def load(directory: Path) -> StoredTargets:
        try:
            stored_layout = json.loads((directory / LAYOUT).read_text())
            logits = load_file(directory / LOGITS)["logits"]
        except (OSError, ValueError, KeyError, SafetensorError) as e:
            raise unreadable(e) from e
        if stored_layout != layout:
            raise ValueError("its layout differs from this split's and selection's")
        return StoredTargets(
            spec, logits, token_offsets,
            _mapped(directory / HIDDEN, int(token_offsets[-1]) * len(spec.hidden) * width).view(
                -1, len(spec.hidden), width) if spec.hidden else None,
            map_offsets, _mapped(directory / ATTENTION, int(map_offsets[-1])) if spec.attention else None, heads)

    if not target.exists():
        problem = _room_for(target, entry_bytes(spec, lengths, width, heads))
        if problem is not None:
            notice(f"the teacher's outputs on {split} are not cached ({problem}); the teacher runs in every step.")
            return None
    return cached(target, "teacher targets", build, load)[0]


def zero_targets(spec: TargetSpec, teacher: EncoderConfig,
                 batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Stored targets of the right shapes for ``batch``, all zero: what a step reads, for timing one untrained."""
    size, length = batch["input_ids"].shape
    out = {"teacher_logits": torch.zeros(size, teacher.num_labels)}
    if spec.hidden:
        out["teacher_hidden"] = torch.zeros(size, len(spec.hidden), length, teacher.hidden_size, dtype=torch.bfloat16)
    if spec.attention:
        out["teacher_attention"] = torch.zeros(size, len(spec.layers), teacher.num_heads, length, length,
                                               dtype=torch.bfloat16)
    return out


def with_target_index(data: TokenizedTask, split: str):
    """The split with an :data:`INDEX` column (each row's position), by which the collator finds its targets."""
    examples = data.split(split)
    return examples.add_column(INDEX, list(range(len(examples))))


# A stage's stored targets are moved to the GPU it trains on when they take at most this share of the memory free
# there; the batches then carry only the rows' indices (:class:`IndexCollator`) and the targets are gathered on the
# GPU (:meth:`StoredTargets.gather`), instead of gathered on the host and copied over in every step.
RESIDENT_SHARE = 0.5


def resident_targets(targets: StoredTargets, device: torch.device) -> StoredTargets | None:
    """``targets`` moved to ``device`` when it is a GPU with room for them (:data:`RESIDENT_SHARE`), else None."""
    if device.type != "cuda" or targets.nbytes > RESIDENT_SHARE * torch.cuda.mem_get_info(device)[0]:
        return None
    return targets.to(device)


@dataclass(frozen=True)
class IndexCollator:
    """Pads as ``base`` does and adds the rows' positions in the stored targets (:data:`INDEX`), by which
    :meth:`StoredTargets.gather` finds their targets where the targets are."""

    base: DynamicPaddingCollator

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        return self.base(features) | {INDEX: torch.tensor([int(f[INDEX]) for f in features], dtype=torch.long)}


@dataclass(frozen=True)
class TargetsCollator:
    """Pads as ``base`` does and adds the rows' stored targets (see :meth:`StoredTargets.batch`)."""

    base: DynamicPaddingCollator
    targets: StoredTargets

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.base(features)
        return batch | self.targets.batch([int(f[INDEX]) for f in features], batch["input_ids"].shape[1])
