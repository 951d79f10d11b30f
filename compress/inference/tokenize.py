"""A run's saved tokenizer, read without transformers where that gives the very same token ids.

A run tokenized with a ``transformers`` tokenizer loaded from the folder beside its model. For a BERT tokenizer
(``BertTokenizer``, ``DistilBertTokenizer``: every teacher compress names, and a pruned vocabulary's renumbered copy,
which prune-vocab saves the same way) transformers 5 builds the pipeline from ``tokenizer_config.json``'s settings and
``tokenizer.json``'s vocabulary; where ``tokenizer.json`` holds exactly that pipeline (the normalizer, pre-tokenizer,
WordPiece settings, the [CLS]/[SEP] template and the added tokens: :func:`light_unavailable` checks each),
``tokenizers.Tokenizer.from_file`` gives the same ids, and answering needs neither transformers nor torch
(:class:`SavedTokenizer`). Any other folder (one without ``tokenizer.json``, another tokenizer class, a pipeline the
settings would change) is read by transformers, as before (:class:`TransformersTokenizer`).

Both are called as the run's evaluation called its tokenizer: truncated to ``max_length`` tokens, special tokens
included (longest first for a pair), not padded (:mod:`compress.data.padding` pads each batch).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from compress.data.padding import PADDED_INPUTS, pad_token_id_of

TOKENIZER_FILE, CONFIG_FILE, SPECIAL_TOKENS_FILE = "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"
# The transformers classes whose pipeline SavedTokenizer reproduces (transformers 5 names the fast ones as aliases).
BERT_CLASSES = ("BertTokenizer", "BertTokenizerFast", "DistilBertTokenizer", "DistilBertTokenizerFast")
SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                  "mask_token": "[MASK]"}   # BertTokenizer's, where tokenizer_config.json names none
_ADDED_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")

Features = list[dict[str, list[int]]]


class TextTokenizer(Protocol):
    """What answering needs of a tokenizer: each text's (and pair's) token ids, unpadded, and the pad token's id."""

    pad_token_id: int

    def features(self, texts: Sequence[str], pairs: Sequence[str] | None, max_length: int) -> Features:
        """``input_ids``, ``attention_mask`` and ``token_type_ids`` of each text, truncated to ``max_length``."""
        ...


@dataclass
class SavedTokenizer:
    """``tokenizer.json`` read by the ``tokenizers`` library, called with the settings transformers calls it with."""

    backend: Any                 # tokenizers.Tokenizer
    pad_token_id: int
    truncation_side: str         # "right" or "left"
    split_special_tokens: bool

    def features(self, texts: Sequence[str], pairs: Sequence[str] | None, max_length: int) -> Features:
        self.backend.no_padding()
        self.backend.enable_truncation(max_length, stride=0, strategy="longest_first", direction=self.truncation_side)
        self.backend.encode_special_tokens = self.split_special_tokens
        inputs = list(zip(texts, pairs, strict=True)) if pairs is not None else list(texts)
        return [{"input_ids": e.ids, "attention_mask": e.attention_mask, "token_type_ids": e.type_ids}
                for e in self.backend.encode_batch(inputs, add_special_tokens=True)]


@dataclass
class TransformersTokenizer:
    """A ``transformers`` tokenizer (a student checkpoint's, or a folder :class:`SavedTokenizer` does not read)."""

    tokenizer: Any

    @property
    def pad_token_id(self) -> int:
        return pad_token_id_of(self.tokenizer)

    def features(self, texts: Sequence[str], pairs: Sequence[str] | None, max_length: int) -> Features:
        encoded = self.tokenizer(list(texts), list(pairs) if pairs is not None else None, truncation=True,
                                 max_length=max_length, return_attention_mask=True, return_token_type_ids=True,
                                 verbose=False)
        return [{k: encoded[k][i] for k in PADDED_INPUTS} for i in range(len(texts))]


def load_tokenizer(directory: Path) -> TextTokenizer:
    """The tokenizer saved beside a model: :class:`SavedTokenizer` where it gives transformers' ids, else
    transformers' own."""
    if light_unavailable(directory) is None:
        return saved_tokenizer(directory)
    from compress.teachers.registry import saved_tokenizer as transformers_tokenizer

    return TransformersTokenizer(transformers_tokenizer(directory))


def saved_tokenizer(directory: Path) -> SavedTokenizer:
    """:class:`SavedTokenizer` of a folder :func:`light_unavailable` passes."""
    from tokenizers import Tokenizer

    config = _config(directory)
    backend = Tokenizer.from_file(str(Path(directory) / TOKENIZER_FILE))
    unk = backend.token_to_id(_token(config, "unk_token"))
    pad = backend.token_to_id(_token(config, "pad_token"))
    side = config.get("truncation_side") or (backend.truncation or {}).get("direction") or "right"
    return SavedTokenizer(backend, pad if pad is not None else unk if unk is not None else 0, str(side).lower(),
                          bool(config.get("split_special_tokens", False)))


def light_unavailable(directory: Path) -> str | None:
    """None when ``tokenizer.json`` read alone tokenizes as transformers tokenizes with the folder's settings, else
    why not: the folder lacks the file, its class is not one of :data:`BERT_CLASSES`, or a piece of the file's
    pipeline is not the one transformers builds from ``tokenizer_config.json``."""
    path = Path(directory) / TOKENIZER_FILE
    if not path.is_file():
        return f"{directory} has no {TOKENIZER_FILE}"
    config = _config(directory)
    if config.get("tokenizer_class") not in BERT_CLASSES:
        return f"its tokenizer class is {config.get('tokenizer_class')}, not a BERT tokenizer"
    if not all(isinstance(config.get(name, ""), str) for name in SPECIAL_TOKENS):
        return "its special tokens are not plain strings"
    saved = _json(path)
    try:
        expected = _bert_pipeline(config, saved)
    except (TypeError, ValueError, OverflowError):
        return "its settings make no BERT pipeline the tokenizers library builds"
    for piece in ("normalizer", "pre_tokenizer", "post_processor"):
        if saved.get(piece) != expected[piece]:
            return f"its {piece} is not the one its settings make"
    model = {k: v for k, v in saved.get("model", {}).items() if k != "vocab"}
    if model != {k: v for k, v in expected["model"].items() if k != "vocab"}:
        return "its WordPiece settings are not the ones its settings make"
    if _added(saved.get("added_tokens", [])) != _expected_added(config, saved.get("added_tokens", [])):
        return "its added tokens are not the ones its settings name"
    return None


def _config(directory: Path) -> dict[str, Any]:
    """``tokenizer_config.json``, with the special tokens of ``special_tokens_map.json`` over it where the config
    lists no added tokens (as transformers reads them); a special token given with settings of its own is kept as
    given (and :func:`light_unavailable` declines it)."""
    config, special = (_json(Path(directory) / name) for name in (CONFIG_FILE, SPECIAL_TOKENS_FILE))
    if "added_tokens_decoder" not in config:
        for name in SPECIAL_TOKENS:
            value = special.get(name)
            if isinstance(value, dict) and not any(value.get(flag) for flag in _ADDED_FLAGS if flag != "special"):
                value = value.get("content")
            config |= {name: value} if value else {}
    return config


def _json(path: Path) -> dict[str, Any]:
    try:
        read = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return read if isinstance(read, dict) else {}


def _token(config: dict[str, Any], name: str) -> str:
    return config.get(name) or SPECIAL_TOKENS[name]


def _bert_pipeline(config: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """The pipeline transformers' BertTokenizer builds from the settings (and the saved vocabulary's [CLS]/[SEP] ids),
    as JSON."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = dict(saved.get("model", {}).get("vocab") or {})
    vocab |= {added["content"]: added["id"] for added in saved.get("added_tokens", [])}
    cls, sep, unk = _token(config, "cls_token"), _token(config, "sep_token"), _token(config, "unk_token")
    built = Tokenizer(WordPiece({unk: 0}, unk_token=unk))
    built.normalizer = normalizers.BertNormalizer(clean_text=True,
                                                  handle_chinese_chars=config.get("tokenize_chinese_chars", True),
                                                  strip_accents=config.get("strip_accents"),
                                                  lowercase=config.get("do_lower_case", True))
    built.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    built.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab.get(cls, 2)), (sep, vocab.get(sep, 3))])
    return json.loads(built.to_str())


def _added(tokens: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {(token["content"], *(bool(token.get(flag, False)) for flag in _ADDED_FLAGS)) for token in tokens}


def _expected_added(config: dict[str, Any], saved: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The added tokens transformers gives the tokenizer: those ``tokenizer_config.json`` lists (where it lists none,
    ``tokenizer.json``'s), and the special tokens it names that are not among them (special, matched as they
    stand)."""
    decoder = config.get("added_tokens_decoder")
    listed = list(decoder.values()) if isinstance(decoder, dict) else saved
    expected, contents = _added(listed), {token["content"] for token in listed}
    for name in SPECIAL_TOKENS:
        if _token(config, name) not in contents:
            expected.add((_token(config, name), False, False, False, False, True))
    return expected
