"""A student's starting checkpoint (``--init-from DIR``), checked before any work: a directory without an
encoder, or with one of another shape, fails in one sentence before the teacher is fine-tuned (minutes on
MR), for every student method that takes one."""

from __future__ import annotations

from pathlib import Path

from compress.models.config import EncoderConfig


def check_init_from(directory: str, wanted: EncoderConfig) -> None:
    """ValueError unless ``directory`` holds an encoder of the student's shape ``wanted`` (its classes,
    dropout rates and classifier aside: the student keeps its own)."""
    from compress.models.checkpoints import is_checkpoint_dir, read_config

    if not is_checkpoint_dir(Path(directory)):
        raise ValueError(f"--init-from {directory} holds no encoder (no config.json or compress_config.json); give "
                         "the directory compress pretrain or general distillation printed.")
    found = read_config(Path(directory))[0]
    keep = {"num_labels": wanted.num_labels, "hidden_dropout": wanted.hidden_dropout,
            "attention_dropout": wanted.attention_dropout, "classifier_dropout": wanted.classifier_dropout}
    if found.replace(**keep) != wanted:
        raise ValueError(f"--init-from {directory} holds an encoder of another shape (E {found.embedding_size}, "
                         f"sharing {found.sharing}, {found.num_layers} layers of {found.hidden_size}) than this "
                         f"student (E {wanted.embedding_size}, sharing {wanted.sharing}, {wanted.num_layers} layers "
                         f"of {wanted.hidden_size}).")
