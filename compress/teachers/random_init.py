"""A teacher of a known shape with random weights: a BERT checkpoint drawn from an alias's configuration.

Where the hub cannot be reached, ``bert-large`` can still be trained and distilled at its real size (the flagship
``compress run albert --teacher bert-large``, on a GPU): its configuration is known (:data:`TEACHERS`), so the
weights are drawn as transformers initialises a new BERT (normal, standard deviation 0.02; LayerNorms at one and
zero) and saved with the bundled ``minilm``'s tokenizer, whose vocabulary is BERT's uncased one (30,522 tokens). It
learns MR from scratch, so its accuracy says nothing of the real bert-large; its time, memory and examples per
second are the real ones."""

from __future__ import annotations

from pathlib import Path

from compress.errors import CompressError
from compress.paths import atomic_dir
from compress.teachers.registry import TEACHERS, load_tokenizer

POSITIONS = 512   # BERT's position table


def random_teacher(out: Path, like: str, seed: int = 0) -> Path:
    """Write a BERT checkpoint shaped as the teacher alias ``like`` with random weights (seeded) into ``out``,
    which must not exist yet; the directory appears complete or not at all."""
    import torch
    from transformers import BertConfig, BertModel

    spec = TEACHERS.get(like)
    if spec is None:
        raise CompressError(f"unknown teacher alias {like!r} to take the shape of; use one of {', '.join(TEACHERS)}.")
    out = Path(out).expanduser()
    if out.exists():
        raise CompressError(f"{out} exists already; give a new directory (nothing is written over).")
    if not out.parent.is_dir():
        raise CompressError(f"{out.parent} is not a directory; create it first.")
    c = spec.config
    tokenizer = load_tokenizer("minilm")
    if len(tokenizer) != c.vocab_size:
        raise CompressError(f"the bundled tokenizer has {len(tokenizer)} tokens and {like} {c.vocab_size}.")
    config = BertConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
                        num_attention_heads=c.num_heads, intermediate_size=c.ffn_size,
                        max_position_embeddings=POSITIONS)
    torch.manual_seed(seed)
    with atomic_dir(out) as tmp:
        BertModel(config).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return out
