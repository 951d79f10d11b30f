"""Conversion between transformers' BERT / ALBERT layouts and :class:`compress.models.Encoder`.

Pure functions of configs and state dicts: one name table per layout serves both directions,
so loading and exporting cannot drift apart. File and hub access live in ``checkpoints.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from compress.errors import CompressError
from compress.models.config import ACTIVATIONS, EncoderConfig

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

_EMBEDDINGS = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.layer_norm": "embeddings.LayerNorm",
}


def bert_names(config: EncoderConfig) -> dict[str, str]:
    """Our module name -> BertForSequenceClassification module name (no ``.weight``/``.bias``)."""
    if config.factorized or config.sharing != "none":
        raise ValueError("only E == H with no sharing has the BERT layout.")
    names = {ours: f"bert.{theirs}" for ours, theirs in _EMBEDDINGS.items()}
    for i in range(config.num_layers):
        layer = f"bert.encoder.layer.{i}"
        names |= {
            f"attention.{i}.query": f"{layer}.attention.self.query",
            f"attention.{i}.key": f"{layer}.attention.self.key",
            f"attention.{i}.value": f"{layer}.attention.self.value",
            f"attention.{i}.output": f"{layer}.attention.output.dense",
            f"attention.{i}.layer_norm": f"{layer}.attention.output.LayerNorm",
            f"ffn.{i}.intermediate": f"{layer}.intermediate.dense",
            f"ffn.{i}.output": f"{layer}.output.dense",
            f"ffn.{i}.layer_norm": f"{layer}.output.LayerNorm",
        }
    return names | {"pooler": "bert.pooler.dense", "classifier": "classifier"}


def albert_names(config: EncoderConfig) -> dict[str, str]:
    """Our module name -> AlbertForSequenceClassification module name (all-shared, one layer per group)."""
    if config.sharing != "all":
        raise ValueError("only all-shared models have the ALBERT layout.")
    names = {ours: f"albert.{theirs}" for ours, theirs in _EMBEDDINGS.items()}
    names["embeddings.projection"] = "albert.encoder.embedding_hidden_mapping_in"
    for g in range(config.groups):
        block = f"albert.encoder.albert_layer_groups.{g}.albert_layers.0"
        names |= {
            f"attention.{g}.query": f"{block}.attention.query",
            f"attention.{g}.key": f"{block}.attention.key",
            f"attention.{g}.value": f"{block}.attention.value",
            f"attention.{g}.output": f"{block}.attention.dense",
            f"attention.{g}.layer_norm": f"{block}.attention.LayerNorm",
            f"ffn.{g}.intermediate": f"{block}.ffn",
            f"ffn.{g}.output": f"{block}.ffn_output",
            f"ffn.{g}.layer_norm": f"{block}.full_layer_layer_norm",
        }
    return names | {"pooler": "albert.pooler", "classifier": "classifier"}


def _names(config: EncoderConfig, layout: str) -> dict[str, str]:
    return bert_names(config) if layout == "bert" else albert_names(config)


def _rename(key: str, names: dict[str, str]) -> str:
    module, _, param = key.rpartition(".")
    return f"{names[module]}.{param}"


def normalize_hf_keys(state_dict: dict[str, torch.Tensor], model_type: str) -> dict[str, torch.Tensor]:
    """Give every key the ``bert.``/``albert.`` prefix of the classification layout and modern
    LayerNorm names (old TF-converted checkpoints say ``gamma``/``beta``)."""
    prefix = f"{model_type}."
    out = {}
    for key, value in state_dict.items():
        if key.endswith(".gamma"):
            key = key[: -len("gamma")] + "weight"
        elif key.endswith(".beta"):
            key = key[: -len("beta")] + "bias"
        if not key.startswith((prefix, "classifier.", "cls.", "predictions.", "sop_classifier.")):
            key = prefix + key
        out[key] = value
    return out


def config_from_hf(hf: JSONObject, num_labels: int | None = None) -> EncoderConfig:
    """An :class:`EncoderConfig` from a transformers ``config.json`` dict of a BERT or ALBERT model."""
    model_type = hf.get("model_type")
    if model_type not in ("bert", "albert"):
        raise CompressError(
            f"model_type {model_type!r} is not supported; compress loads BERT and ALBERT checkpoints."
        )
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise CompressError("only absolute position embeddings are supported.")
    act = hf.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise CompressError(f"hidden_act {act!r} is not supported; use one of {', '.join(ACTIVATIONS)}.")
    labels = num_labels or len(hf.get("id2label") or {}) or 2
    common = dict(
        vocab_size=hf["vocab_size"], hidden_size=hf["hidden_size"], num_layers=hf["num_hidden_layers"],
        num_heads=hf["num_attention_heads"], ffn_size=hf["intermediate_size"],
        max_positions=hf.get("max_position_embeddings", 512), type_vocab_size=hf.get("type_vocab_size", 2),
        hidden_dropout=hf.get("hidden_dropout_prob", 0.1),
        attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12), activation=act, num_labels=labels,
        initializer_range=hf.get("initializer_range", 0.02), pad_token_id=hf.get("pad_token_id") or 0,
    )
    if model_type == "bert":
        dropout = hf.get("classifier_dropout")
        return EncoderConfig(
            embedding_size=hf["hidden_size"], sharing="none", groups=1,
            classifier_dropout=common["hidden_dropout"] if dropout is None else dropout, **common,
        )
    if hf.get("inner_group_num", 1) != 1:
        raise CompressError("ALBERT checkpoints with inner_group_num > 1 are not supported.")
    return EncoderConfig(
        embedding_size=hf["embedding_size"], sharing="all", groups=hf.get("num_hidden_groups", 1),
        classifier_dropout=hf.get("classifier_dropout_prob", 0.1), **common,
    )


def hf_config(config: EncoderConfig, label_names: list[str] | None = None) -> JSONObject:
    """The transformers config dict for exporting ``config`` (BERT or ALBERT layout)."""
    from transformers import AlbertConfig, BertConfig

    labels = label_names or [f"LABEL_{i}" for i in range(config.num_labels)]
    common = dict(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.ffn_size, hidden_act=config.activation,
        hidden_dropout_prob=config.hidden_dropout, attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_positions, type_vocab_size=config.type_vocab_size,
        layer_norm_eps=config.layer_norm_eps, initializer_range=config.initializer_range,
        pad_token_id=config.pad_token_id,
        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)},
    )
    if config.sharing == "all":
        hf = AlbertConfig(
            embedding_size=config.embedding_size, num_hidden_groups=config.groups, inner_group_num=1,
            classifier_dropout_prob=config.classifier_dropout, **common,
        )
        hf.architectures = ["AlbertForSequenceClassification"]
    else:
        hf = BertConfig(classifier_dropout=config.classifier_dropout, **common)
        hf.architectures = ["BertForSequenceClassification"]
    return hf.to_dict()


def hf_layout(config: EncoderConfig) -> str | None:
    """``"bert"`` or ``"albert"`` when transformers can hold this shape, else ``None`` (pruned or factorized
    matrices, or relaxed sharing: transformers has no per-block shapes, no low-rank layers and no per-layer deltas)."""
    if config.pruned or config.low_rank or config.relaxed:
        return None
    if config.sharing == "none" and not config.factorized:
        return "bert"
    if config.sharing == "all":
        return "albert"
    return None


def to_hf_state_dict(state_dict: dict[str, torch.Tensor], config: EncoderConfig) -> dict[str, torch.Tensor]:
    """Our state dict renamed to the BERT or ALBERT classification layout.

    ALBERT always has an E->H projection; when E == H an exact identity projection is written.
    """
    layout = hf_layout(config)
    if layout is None:
        raise ValueError("this shape has no transformers layout; save it in the compress format.")
    state = dict(state_dict)
    if layout == "albert" and not config.factorized:
        h = config.hidden_size
        state["embeddings.projection.weight"] = torch.eye(h)
        state["embeddings.projection.bias"] = torch.zeros(h)
    names = _names(config, layout)
    return {_rename(k, names): v.contiguous() for k, v in state.items()}


def from_hf_state_dict(
    hf_state: dict[str, torch.Tensor], config: EncoderConfig, model_type: str, expected: list[str]
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename a normalized HF state dict to ours.

    ``expected`` are our state-dict keys for ``config``. Returns (state dict, expected keys the
    checkpoint lacks). An ALBERT checkpoint with E == H must carry an identity projection
    (as our export writes it), since our E == H encoder has none.
    """
    names = _names(config, model_type)
    state = {k: hf_state[_rename(k, names)] for k in expected if _rename(k, names) in hf_state}
    missing = [k for k in expected if k not in state]
    if model_type == "albert" and not config.factorized:
        w = hf_state.get(_rename("embeddings.projection.weight", names))
        b = hf_state.get(_rename("embeddings.projection.bias", names))
        if w is not None and not (torch.equal(w, torch.eye(len(w))) and not b.any()):
            raise CompressError(
                "this ALBERT checkpoint has embedding_size == hidden_size with a non-identity "
                "projection, which compress cannot represent."
            )
    return state, missing
