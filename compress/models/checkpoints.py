"""Checkpoint files: read transformers BERT/ALBERT checkpoints, write ours, fetch hub snapshots.

Formats a directory may hold:

* transformers BERT (``BertModel`` / ``BertForSequenceClassification``) or ALBERT weights with
  ``config.json``: ``model.safetensors``, sharded safetensors, or ``pytorch_model.bin`` (read with
  ``weights_only=True``, never a full unpickle);
* the compress format: ``compress_config.json`` + ``model.safetensors`` in our own names, for
  shapes transformers cannot hold (factorized without sharing, partial sharing, pruned
  blocks of their own sizes, ...).

:func:`save_encoder` writes the transformers layout whenever the shape allows it, so a student
leaves compress as an ordinary ``AutoModelForSequenceClassification`` directory.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_file, save_file

from compress.errors import CompressError
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.models.hf_convert import (
    config_from_hf,
    from_hf_state_dict,
    hf_config,
    hf_layout,
    normalize_hf_keys,
    to_hf_state_dict,
)
from compress.paths import as_ordinary_file, atomic_dir

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

COMPRESS_CONFIG = "compress_config.json"
FORMAT_VERSION = 1
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
                   "spiece.model")


@dataclass
class LoadedEncoder:
    """An encoder read from disk, with what the checkpoint did and did not provide."""

    model: Encoder
    source: str                       # "bert", "albert" or "compress"
    missing: list[str] = field(default_factory=list)   # our keys left at their initial values
    label_names: list[str] | None = None


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint directory (single or sharded safetensors, or a weights-only .bin)."""
    directory = Path(directory)
    files = safetensors_files(directory)
    if files:
        state: dict[str, torch.Tensor] = {}
        for path in files:
            try:
                state |= load_file(path)
            except Exception as e:  # noqa: BLE001 - safetensors raises its own error type
                raise _damaged(path, e) from None
        return state
    legacy = directory / "pytorch_model.bin"
    if legacy.is_file():
        return torch.load(legacy, map_location="cpu", weights_only=True)
    raise CompressError(
        f"{directory} holds no model weights (model.safetensors or pytorch_model.bin); "
        "point to a checkpoint directory."
    )


def _damaged(path: Path, error: Exception) -> CompressError:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return CompressError(f"{path} is damaged or incomplete ({reason}); copy or download the checkpoint again.")


def safetensors_files(directory: Path) -> list[Path]:
    """The safetensors files of a checkpoint directory: one file, or the shards its index names."""
    single = directory / "model.safetensors"
    if single.is_file():
        return [single]
    index = directory / "model.safetensors.index.json"
    if not index.is_file():
        return []
    try:
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise _damaged(index, e) from None
    return [directory / shard for shard in shards]


def check_checkpoint(directory: Path) -> Path:
    """Read a checkpoint's config and every safetensors header (not the tensors: milliseconds), so a
    damaged directory fails in one line naming the file before any work starts."""
    from safetensors import safe_open

    directory = Path(directory)
    read_config(directory)
    for path in safetensors_files(directory):
        try:
            with safe_open(str(path), "pt"):
                pass
        except FileNotFoundError:
            raise CompressError(f"{path} is missing; copy or download the checkpoint again.") from None
        except Exception as e:  # noqa: BLE001 - safetensors raises its own error type
            raise _damaged(path, e) from None
    return directory


def weights_digest(directory: Path) -> str:
    """sha256 of the config and weight files of a checkpoint directory (identifies its exact weights).

    Remembered for the process while the files' names, sizes and modification times stay the same,
    so the several steps of one run that key caches on a teacher hash its weights once.
    """
    directory = Path(directory).resolve()
    names = sorted(p.name for p in directory.iterdir()
                   if p.name in ("config.json", COMPRESS_CONFIG) or p.name.endswith((".safetensors", ".bin")))
    stats = tuple((n, st.st_size, st.st_mtime_ns) for n in names for st in [(directory / n).stat()])
    return _digest(directory, stats)


@functools.lru_cache(maxsize=32)
def _digest(directory: Path, stats: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stats:
        digest.update(name.encode())
        with open(directory / name, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
    return digest.hexdigest()


def model_digest(model: torch.nn.Module) -> str:
    """A short sha256 of a model in memory: its config and every tensor of its state (names, dtypes, shapes,
    bytes). It keys the caches of what a model computes when the model has no checkpoint (pruning's reference)."""
    digest = hashlib.sha256(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    for name, tensor in model.state_dict().items():
        values = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{values.dtype}:{tuple(values.shape)}".encode())
        digest.update(values.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()[:20]


def is_checkpoint_dir(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and ((path / "config.json").is_file() or (path / COMPRESS_CONFIG).is_file())


def _metadata(directory: Path) -> tuple[JSONObject, str]:
    """The config file's contents of a checkpoint directory and its format (compress, bert, albert)."""
    ours = directory / COMPRESS_CONFIG
    path = ours if ours.is_file() else directory / "config.json"
    if not path.is_file():
        raise CompressError(f"{directory} has no config.json; point to a BERT or ALBERT checkpoint directory.")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as e:
        raise CompressError(f"{path} is not a readable JSON file ({e}); fix or replace the checkpoint.") from None
    if not isinstance(meta, dict):
        raise CompressError(f"{path} does not hold a JSON object; fix or replace the checkpoint.")
    return meta, "compress" if path == ours else meta.get("model_type", "")


def _config(meta: JSONObject, source: str, num_labels: int | None) -> EncoderConfig:
    if source != "compress":
        return config_from_hf(meta, num_labels)
    config = EncoderConfig.from_dict(meta["encoder"])
    return config.replace(num_labels=num_labels) if num_labels else config


def read_config(directory: Path, num_labels: int | None = None) -> tuple[EncoderConfig, str]:
    """The encoder config of a checkpoint directory and its format, without reading weights."""
    directory = Path(directory)
    meta, source = _metadata(directory)
    path = directory / (COMPRESS_CONFIG if source == "compress" else "config.json")
    try:
        return _config(meta, source, num_labels), source
    except CompressError as e:
        raise CompressError(f"{path}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise CompressError(f"{path} does not describe a BERT or ALBERT encoder ({type(e).__name__}: {e}); "
                            "fix or replace the checkpoint.") from None


def load_encoder(directory: Path, num_labels: int | None = None) -> LoadedEncoder:
    """Load a BERT, ALBERT or compress-format checkpoint directory into an :class:`Encoder`.

    ``num_labels`` sets the classifier size when the checkpoint has no classifier (a bare
    ``BertModel``, such as a pre-trained teacher); the classifier then starts freshly initialised.
    A checkpoint whose classifier has another size keeps its own.
    """
    directory = Path(directory)
    meta, source = _metadata(directory)
    config = read_config(directory)[0]
    weights = read_weights(directory)
    if source == "compress":
        return LoadedEncoder(Encoder.holding(config, weights).eval(), source, [], meta.get("label_names"))

    hf_state = normalize_hf_keys(weights, source)
    classifier = hf_state.get("classifier.weight")
    if classifier is not None:
        config = config.replace(num_labels=classifier.shape[0])
    elif num_labels:
        config = config.replace(num_labels=num_labels)
    model = Encoder(config)
    state, missing = from_hf_state_dict(hf_state, config, source, list(model.state_dict()))
    essential = [k for k in missing if not k.startswith(("pooler.", "classifier."))]
    if essential:
        raise CompressError(
            f"{directory} lacks {len(essential)} weights the encoder needs (first: {essential[0]}); "
            "is it a complete BERT or ALBERT checkpoint?"
        )
    model.load_state_dict(state, strict=False)
    id2label = meta.get("id2label") if classifier is not None else None
    labels = [id2label[k] for k in sorted(id2label, key=int)] if id2label else None
    return LoadedEncoder(model.eval(), source, missing, labels)


def save_encoder(
    model: Encoder,
    out_dir: Path,
    tokenizer: Any | None = None,
    label_names: list[str] | None = None,
) -> str:
    """Write ``model`` to a new directory ``out_dir`` (atomically) and return the layout used; an existing
    non-empty ``out_dir`` is refused, never replaced.

    ``"bert"`` (E == H, no sharing) and ``"albert"`` (all-shared) directories load in
    ``transformers.AutoModelForSequenceClassification``; any other shape is written as
    ``"compress"``: safetensors in our names + ``compress_config.json``.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise CompressError(f"{out_dir} already exists and is not empty; save_encoder writes a new directory and "
                            "replaces nothing.")
    config = model.config
    layout = hf_layout(config) or "compress"
    state = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
    with atomic_dir(out_dir) as tmp:
        if layout == "compress":
            save_file({k: v.contiguous() for k, v in state.items()}, tmp / "model.safetensors")
            meta = {"format": "compress-encoder", "version": FORMAT_VERSION,
                    "encoder": config.to_dict(), "label_names": label_names}
            (tmp / COMPRESS_CONFIG).write_text(json.dumps(meta, indent=2))
        else:
            save_file(to_hf_state_dict(state, config), tmp / "model.safetensors", metadata={"format": "pt"})
            (tmp / "config.json").write_text(json.dumps(hf_config(config, label_names), indent=2))
        as_ordinary_file(tmp / "model.safetensors")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return layout


def fetch_from_hub(repo_id: str) -> Path:
    """A local snapshot of a hub checkpoint (cache first, then the network).

    Fails with one sentence that names the offline alternatives when the hub cannot be reached.
    """
    from huggingface_hub import constants, is_offline_mode, snapshot_download

    patterns = ["config.json", "*.safetensors", "model.safetensors.index.json", *TOKENIZER_FILES]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached; try the network below
        pass
    if is_offline_mode():  # HF_HUB_OFFLINE=1: huggingface_hub would refuse the network with a long message
        raise CompressError(
            f"cannot get {repo_id!r} from the Hugging Face hub: HF_HUB_OFFLINE is set and it is not in the hub "
            f"cache ({constants.HF_HUB_CACHE}); unset HF_HUB_OFFLINE to download it, or use the bundled teacher "
            "'minilm' or a local checkpoint directory (--teacher path/to/dir)."
        )
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as e:  # noqa: BLE001 - any hub failure becomes one sentence
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CompressError(
            f"cannot get {repo_id!r} from the Hugging Face hub ({reason[:120]}); offline, use the "
            "bundled teacher 'minilm' or a local checkpoint directory (--teacher path/to/dir)."
        ) from None
