"""Data augmentation for the students that ask for it (TinyBERT and ALBERT): TinyBERT's Algorithm 1 (Jiao et al. 2020),
word replacement by near neighbours.

For every training text we keep the original and make ``copies`` (N_a) augmented copies. In each
copy we walk over the words left to right; each *replaceable* word is replaced with probability
``replace_prob`` (p_t) by a word drawn uniformly from its ``candidates`` (K) candidates:

* with a masked-LM (``mlm_candidates``): the word is masked in the copy as built so far (earlier
  replacements included, as in the paper) and the K most probable whole words are the candidates;
* without one: the K nearest neighbours of the word's word-piece embedding in the teacher's
  word-embedding matrix, by cosine similarity (:class:`EmbeddingNeighbours`).

Paper defaults: N_a = 20, p_t = 0.4, K = 15. The teacher labels the copies later (its logits are
the targets), so a copy simply carries its source's label.

Choices (where the paper leaves room or needs something we do not have):

* **Words** are the whitespace-separated tokens of the text; the whitespace itself is kept as is.
  Punctuation at either end of a word stays in place and only the *core* between the first and
  last letter/digit is replaced: ``"(good),"`` can become ``"(great),"``.
* **Replaceable** means the core is one word piece under the teacher's tokenizer (after the
  tokenizer's own normalisation, e.g. lowercasing for uncased BERT) and that piece is a whole word:
  not a special token, not ``[unusedN]``, not a ``##`` continuation, and with at least one letter or
  digit. Other words (``"don't"``, ``"moviegoers"`` = ``movie ##go ##ers``) are never changed: the
  paper uses GloVe neighbours for them, which we do not have, and the mean of the pieces' embeddings
  is no substitute (its neighbours are mostly neighbours of the first piece: ``overlong`` -> ``over``).
* **Candidates** never include the word itself (compared case-insensitively), special or unused
  tokens, ``##`` pieces, or pure punctuation. A replacement takes the word's capitalisation
  (``Good`` -> ``Great``, ``GOOD`` -> ``GREAT``).
* **Order and duplicates**: :func:`augment_texts` returns, for each source text in order, the
  original and then its copies 1..N_a. Copies are kept even when equal to the original (likely for
  short texts or small p_t), so the output always has ``len(texts) * (1 + copies)`` entries.
* **Seeds**: copy ``c`` of text ``i`` draws from its own generator seeded by ``(seed, i, c)``, so the
  result does not depend on the other texts, and raising ``copies`` keeps the earlier copies.
* **Pairs**: :func:`augment_dataset` augments ``text`` only and copies ``text_pair`` unchanged, as
  TinyBERT does for sentence-pair tasks; changing both sides independently breaks the relation
  between them (entailment, paraphrase) far more often.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import datasets
import torch

from compress.training import with_progress

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

__all__ = [
    "AugmentConfig",
    "CandidateFn",
    "EmbeddingNeighbours",
    "augment_dataset",
    "augment_texts",
    "mlm_candidates_from_checkpoint",
]

CandidateFn = Callable[[Sequence[Sequence[str]], Sequence[int]], list[list[str]]]
"""A masked-LM candidate source: ``fn(sentences, positions) -> candidates``.

``sentences[b]`` is a text as a list of whitespace-separated words, ``positions[b]`` the index of
the word to mask in it; the answer holds, for each ``b``, replacement words, most probable first.
"""

_UNUSED = re.compile(r"\[unused\d+\]")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class AugmentConfig:
    """TinyBERT augmentation settings (paper defaults).

    copies        N_a, augmented copies per text (0 keeps only the originals).
    replace_prob  p_t, the probability of replacing each replaceable word.
    candidates    K, how many candidates a replacement is drawn from.
    seed          seeds every copy's random generator together with the text and copy index.
    masked_lm     ask the teacher's masked-LM head for candidates when its checkpoint has one (the paper;
                  one forward pass per replaced word: about an hour per copy of MR with BERT-base on
                  2 cores); False: the word-embedding neighbours only (seconds).
    """

    copies: int = 20
    replace_prob: float = 0.4
    candidates: int = 15
    seed: int = 13
    masked_lm: bool = True

    def __post_init__(self) -> None:
        if not _is_int(self.copies) or self.copies < 0:
            raise ValueError(f"copies must be an integer >= 0, got {self.copies!r}.")
        if isinstance(self.replace_prob, bool) or not isinstance(self.replace_prob, (int, float)) or not (
            0.0 <= self.replace_prob <= 1.0
        ):
            raise ValueError(f"replace_prob must be a number between 0 and 1, got {self.replace_prob!r}.")
        if not _is_int(self.candidates) or self.candidates < 1:
            raise ValueError(f"candidates must be an integer >= 1, got {self.candidates!r}.")
        if not _is_int(self.seed):
            raise ValueError(f"seed must be an integer, got {self.seed!r}.")
        if not isinstance(self.masked_lm, bool):
            raise ValueError(f"masked_lm must be true or false, got {self.masked_lm!r}.")

    def to_dict(self) -> JSONObject:
        """JSON-friendly field -> value."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONObject) -> AugmentConfig:
        """Inverse of :meth:`to_dict`; unknown fields are an error."""
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown augmentation field(s): {', '.join(unknown)}.")
        return cls(**data)


def _is_clean_word(token: str, specials: set[str]) -> bool:
    """Whether ``token`` may be used as (or replaced as) a word: no special, unused, ## or punctuation."""
    return (
        bool(token)
        and token not in specials
        and not token.startswith("##")
        and not _UNUSED.fullmatch(token)
        and not any(ch.isspace() for ch in token)
        and any(ch.isalnum() for ch in token)
    )


def _whole_word_mask(tokenizer: Any, size: int) -> torch.Tensor:
    """(size,) bool: True for vocabulary ids that are whole words (see :func:`_is_clean_word`)."""
    specials = set(tokenizer.all_special_tokens)
    mask = torch.zeros(size, dtype=torch.bool)
    for token, index in tokenizer.get_vocab().items():
        if index < size and _is_clean_word(token, specials):
            mask[index] = True
    return mask


def _top_k_cosine(vectors: torch.Tensor, k: int, block: int = 4096) -> torch.Tensor:
    """(N, k) indices of each row's k most cosine-similar other rows, most similar first.

    Exact, in float32, one ``block x block`` similarity tile at a time (two tiles of block^2 floats
    in memory, 128 MiB for 4096, instead of N^2: 2.2 GiB for the 23511 words of BERT's vocabulary).
    Cosine similarity is symmetric, so only tiles on or above the diagonal are computed and each
    off-diagonal tile serves both its row block and (transposed) its column block: half the
    multiplications of the full N x N product. Every row keeps its best k per tile; one final
    top-k over those partial lists gives the answer.
    """
    n = vectors.shape[0]
    if not 0 < k < n:
        raise ValueError(f"need 0 < k < number of vectors ({n}), got k={k}.")
    unit = torch.nn.functional.normalize(vectors.float(), dim=1)
    starts = list(range(0, n, block))
    values: list[list[torch.Tensor]] = [[] for _ in starts]
    indices: list[list[torch.Tensor]] = [[] for _ in starts]
    with torch.inference_mode():
        for bi, i in enumerate(starts):
            rows = unit[i : i + block]
            for bj in range(bi, len(starts)):
                j = starts[bj]
                sim = rows @ unit[j : j + block].T
                if bi == bj:
                    sim.fill_diagonal_(float("-inf"))
                kk = min(k, sim.shape[1])
                top = sim.topk(kk, dim=1)
                values[bi].append(top.values)
                indices[bi].append(top.indices + j)
                if bi != bj:
                    # a contiguous copy of the transposed tile: faster than top-k along dim 0
                    sim = sim.T.contiguous()
                    kk = min(k, sim.shape[1])
                    top = sim.topk(kk, dim=1)
                    values[bj].append(top.values)
                    indices[bj].append(top.indices + i)
        result = torch.empty(n, k, dtype=torch.int64)
        for bi, i in enumerate(starts):
            cand_values = torch.cat(values[bi], dim=1)
            cand_indices = torch.cat(indices[bi], dim=1)
            best = cand_values.topk(k, dim=1).indices
            result[i : i + block] = cand_indices.gather(1, best)
    return result


class EmbeddingNeighbours:
    """The K nearest whole-word vocabulary entries of every whole-word entry, by embedding cosine.

    Built once from the teacher's word-embedding matrix (V x E) and its tokenizer. Only whole
    words take part, as sources and as neighbours: special tokens, ``[unusedN]``, ``##``
    continuations and pure punctuation are left out. The real MiniLM matrix (30522 x 384, 23511
    whole words) takes a few seconds on two CPU threads and little memory (see :func:`_top_k_cosine`).

    Args:
        weight: (V, E) word-embedding matrix; V must cover the tokenizer's ids.
        tokenizer: the teacher's tokenizer (a ``transformers`` BERT tokenizer).
        k: neighbours kept per word (augmentation may use fewer: ``AugmentConfig.candidates <= k``).
        block: tile size of the similarity computation.
    """

    def __init__(self, weight: torch.Tensor, tokenizer: Any, k: int = 15, block: int = 4096) -> None:
        if weight.ndim != 2:
            raise ValueError(f"the word-embedding matrix must be 2-D (V x E), got shape {tuple(weight.shape)}.")
        if not _is_int(k) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}.")
        vocab_size = weight.shape[0]
        largest = max(tokenizer.get_vocab().values())
        if largest >= vocab_size:
            raise ValueError(
                f"the tokenizer has ids up to {largest} but the embedding matrix only {vocab_size} rows; "
                "pass the teacher's own tokenizer."
            )
        self.k = k
        self.tokenizer = tokenizer
        self._word_ids = _whole_word_mask(tokenizer, vocab_size).nonzero().squeeze(1)
        # vocabulary id -> row of the table (-1 for ids that are not whole words)
        self._row = torch.full((vocab_size,), -1, dtype=torch.int64)
        self._row[self._word_ids] = torch.arange(len(self._word_ids))
        table = _top_k_cosine(weight.detach()[self._word_ids], k, block)
        self._table: list[list[int]] = self._word_ids[table].tolist()
        self._tokens: dict[int, list[str]] = {}

    @classmethod
    def from_checkpoint(cls, directory: str | Path, tokenizer: Any, k: int = 15) -> EmbeddingNeighbours:
        """Read ``*embeddings.word_embeddings.weight`` from the checkpoint's safetensors files."""
        from safetensors import safe_open

        files = sorted(Path(directory).glob("*.safetensors"))
        for file in files:
            with safe_open(file, framework="pt") as f:
                for key in f.keys():  # noqa: SIM118 - safe_open has keys(), not iteration
                    if key.endswith("embeddings.word_embeddings.weight"):
                        return cls(f.get_tensor(key), tokenizer, k)
        raise ValueError(
            f"no word-embedding matrix (*embeddings.word_embeddings.weight) in the safetensors files of {directory}; "
            "pass a BERT checkpoint directory."
        )

    def __len__(self) -> int:
        """Number of whole-word vocabulary entries (each has k neighbours)."""
        return len(self._table)

    def __contains__(self, token_id: object) -> bool:
        return _is_int(token_id) and 0 <= token_id < len(self._row) and int(self._row[token_id]) >= 0

    def neighbours(self, token_id: int) -> list[int]:
        """The k nearest whole-word ids of ``token_id``, nearest first; ``[]`` if it is not a whole word."""
        if not _is_int(token_id) or not 0 <= token_id < len(self._row):
            raise ValueError(f"token id must be an integer in 0..{len(self._row) - 1}, got {token_id!r}.")
        row = int(self._row[token_id])
        return list(self._table[row]) if row >= 0 else []

    def neighbour_tokens(self, token_id: int) -> list[str]:
        """:meth:`neighbours` as token strings (cached)."""
        if token_id not in self._tokens:
            self._tokens[token_id] = self.tokenizer.convert_ids_to_tokens(self.neighbours(token_id))
        return self._tokens[token_id]


def _split_word(word: str) -> tuple[str, str, str]:
    """``"(good),"`` -> ``("(", "good", "),")``: punctuation before, core, punctuation after."""
    first = next((i for i, ch in enumerate(word) if ch.isalnum()), None)
    if first is None:
        return word, "", ""
    last = max(i for i, ch in enumerate(word) if ch.isalnum())
    return word[:first], word[first : last + 1], word[last + 1 :]


def _match_case(original: str, replacement: str) -> str:
    if len(original) > 1 and original.isupper():
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def augment_texts(
    texts: Sequence[str],
    tokenizer: Any,
    neighbours: EmbeddingNeighbours,
    config: AugmentConfig = AugmentConfig(),
    mlm_candidates: CandidateFn | None = None,
    show_progress: bool = False,
) -> list[tuple[int, str]]:
    """Every original text and its ``config.copies`` augmented copies, as ``(source index, text)``.

    Order: for each text in order, the original first, then copies 1..N_a (copies equal to the
    original are kept). With ``mlm_candidates`` the candidates of a word come from the masked LM
    (asked once per word position for all copies that replace it), else from ``neighbours``.
    Texts are augmented in blocks, position by position across a block, so that the masked LM is
    asked about a whole block's words at once (one sentence at a time, a BERT-base head took 0.8 s
    per MR sentence on 2 cores); each copy draws from its own seeded generator, so the blocks do not
    change which words are replaced.

    Args:
        texts: the training texts.
        tokenizer: the teacher's tokenizer (decides which words are single word pieces).
        neighbours: the embedding-neighbour table of the same tokenizer; it also decides which
            single pieces are whole words (replaceable), with or without ``mlm_candidates``.
        config: N_a, p_t, K and the seed.
        mlm_candidates: optional masked-LM candidate source (:data:`CandidateFn`).
        show_progress: a progress bar over the blocks while the masked LM is asked (it takes minutes).
    """
    if config.candidates > neighbours.k and mlm_candidates is None:
        raise ValueError(
            f"config.candidates is {config.candidates} but the neighbour table keeps only {neighbours.k} "
            "per word; build EmbeddingNeighbours with a larger k."
        )
    split_texts = [re.split(r"(\s+)", text) for text in texts]
    cores = sorted({_split_word(w)[1] for parts in split_texts for w in parts[0::2]} - {""})
    piece_of: dict[str, int] = {}
    if cores:
        encoded = tokenizer(cores, add_special_tokens=False)["input_ids"]
        piece_of = {core: ids[0] for core, ids in zip(cores, encoded, strict=True) if len(ids) == 1}
    words = _Replaceable(piece_of, neighbours, set(tokenizer.all_special_tokens))
    blocks = [range(start, min(start + _BLOCK, len(texts))) for start in range(0, len(texts), _BLOCK)]
    slow = mlm_candidates is not None   # a bar only for the masked LM: neighbours take seconds
    result: list[tuple[int, str]] = []
    for block in with_progress(blocks, "augmenting (masked-LM candidates)", show_progress and slow):
        copies = _augment_block([split_texts[i] for i in block], block, words, config, mlm_candidates)
        for index, texts_of_one in zip(block, copies, strict=True):
            result.append((index, texts[index]))
            result.extend((index, "".join(copy)) for copy in texts_of_one)
    return result


_BLOCK = 256  # texts augmented together: the masked LM is asked about their words at one position at once
_MLM_BATCH = 64  # rows per forward pass of the masked LM


@dataclass(frozen=True)
class _Replaceable:
    piece_of: dict[str, int]        # a word's core -> its single word piece (words of several pieces stay)
    neighbours: EmbeddingNeighbours
    specials: set[str]


def _augment_block(split_texts: list[list[str]], indices: Sequence[int], words: _Replaceable,
                   config: AugmentConfig, mlm_candidates: CandidateFn | None) -> list[list[list[str]]]:
    """The copies of each text of a block, as word/space lists. Position by position (Algorithm 1 asks
    the masked LM about each copy as built so far), every copy choosing with its own generator."""
    copies = [[list(parts) for _ in range(config.copies)] for parts in split_texts]
    rngs = [[random.Random(f"compress.augment:{config.seed}:{index}:{c}") for c in range(config.copies)]
            for index in indices]
    clean = mlm_candidates is None
    for position in range(0, max((len(parts) for parts in split_texts), default=0), 2):
        word_of: dict[int, tuple[str, str, str, int]] = {}   # text -> (lead, core, trail, piece) at this position
        wanted: list[tuple[int, int]] = []                      # (text, copy) replacing its word here
        for t, parts in enumerate(split_texts):
            if position >= len(parts):
                continue
            lead, core, trail = _split_word(parts[position])
            piece = words.piece_of.get(core)
            if piece is None or piece not in words.neighbours:
                continue
            word_of[t] = (lead, core, trail, piece)
            wanted += [(t, c) for c in range(config.copies) if rngs[t][c].random() < config.replace_prob]
        if not wanted:
            continue
        if clean:
            lists = [words.neighbours.neighbour_tokens(word_of[t][3]) for t, _ in wanted]
        else:
            lists = mlm_candidates([copies[t][c][0::2] for t, c in wanted], [position // 2] * len(wanted))
        for (t, c), candidates in zip(wanted, lists, strict=True):
            lead, core, trail, _ = word_of[t]
            # the table holds whole words only; an MLM callable's answers are checked here
            usable = [w for w in candidates if w.lower() != core.lower()
                      and (clean or _is_clean_word(w, words.specials))][: config.candidates]
            if usable:
                copies[t][c][position] = lead + _match_case(core, rngs[t][c].choice(usable)) + trail
    return copies


def augment_dataset(
    dataset: datasets.Dataset,
    tokenizer: Any,
    neighbours: EmbeddingNeighbours,
    config: AugmentConfig = AugmentConfig(),
    mlm_candidates: CandidateFn | None = None,
    show_progress: bool = False,
) -> datasets.Dataset:
    """A task split with the augmented copies of each example after it, and a ``source_id`` column.

    ``dataset`` has the task columns ``id``, ``text``, optionally ``text_pair``, and ``label``.
    The original keeps its id; copy n of example ``x`` gets id ``x#augn`` (n = 1..N_a). Every row
    gets ``source_id`` (the original's id), and copies carry the source's ``label`` and unchanged
    ``text_pair`` (only ``text`` is augmented; the teacher relabels copies during distillation).
    """
    columns = set(dataset.column_names)
    missing = sorted({"id", "text", "label"} - columns)
    extra = sorted(columns - {"id", "text", "text_pair", "label"})
    if missing or extra:
        raise ValueError(
            "augment_dataset needs a raw task split with columns id, text, [text_pair], label"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unexpected {', '.join(extra)} (augment before tokenizing)" if extra else "")
            + "."
        )
    source = dataset.to_dict()
    pairs = augment_texts(source["text"], tokenizer, neighbours, config, mlm_candidates, show_progress)
    out: dict[str, list] = {name: [] for name in dataset.column_names}
    out["source_id"] = []
    copy_number = 0
    previous = -1
    for index, text in pairs:
        copy_number = copy_number + 1 if index == previous else 0
        previous = index
        source_id = source["id"][index]
        for name in dataset.column_names:
            out[name].append(source[name][index])
        out["id"][-1] = source_id if copy_number == 0 else f"{source_id}#aug{copy_number}"
        out["text"][-1] = text
        out["source_id"].append(source_id)
    if len(set(out["id"])) != len(out["id"]):
        raise ValueError("augmented ids collide with existing ids (an id already ends in '#augN'); rename the ids.")
    features = datasets.Features({**dataset.features, "source_id": datasets.Value("string")})
    return datasets.Dataset.from_dict(out, features=features)


class _MaskedLMCandidates:
    """:data:`CandidateFn` backed by a ``transformers.BertForMaskedLM``: top-k whole words."""

    def __init__(self, model: Any, tokenizer: Any, k: int, device: torch.device) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.k = k
        self.device = device
        vocab_size = model.config.vocab_size
        self.bias = torch.where(_whole_word_mask(tokenizer, vocab_size), 0.0, float("-inf")).to(device)
        self.max_pieces = min(model.config.max_position_embeddings, tokenizer.model_max_length) - 2

    def __call__(self, sentences: Sequence[Sequence[str]], positions: Sequence[int]) -> list[list[str]]:
        tok = self.tokenizer
        texts = []
        for words, position in zip(sentences, positions, strict=True):
            lead, core, trail = _split_word(words[position])
            masked = list(words)
            masked[position] = lead + tok.mask_token + trail
            texts.append(" ".join(masked))
        rows, where = [], []
        for ids in tok(texts, add_special_tokens=False)["input_ids"]:
            at = ids.index(tok.mask_token_id)
            start = max(0, min(at - self.max_pieces // 2, len(ids) - self.max_pieces))
            ids = ids[start : start + self.max_pieces]
            rows.append([tok.cls_token_id, *ids, tok.sep_token_id])
            where.append(at - start + 1)
        top = []
        for start in range(0, len(rows), _MLM_BATCH):
            chunk, at = rows[start : start + _MLM_BATCH], where[start : start + _MLM_BATCH]
            width = max(len(r) for r in chunk)
            input_ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in chunk], device=self.device)
            attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in chunk], device=self.device)
            with torch.inference_mode():  # the vocabulary is scored at the masked positions only
                hidden = self.model.bert(input_ids=input_ids, attention_mask=attention).last_hidden_state
                picked = self.model.cls(hidden[torch.arange(len(chunk), device=self.device),
                                               torch.tensor(at, device=self.device)])
                top += (picked.float() + self.bias).topk(self.k, dim=1).indices.cpu().tolist()
        return [tok.convert_ids_to_tokens(row) for row in top]


def mlm_candidates_from_checkpoint(
    directory: str | Path, tokenizer: Any, k: int = 15, device: str | torch.device = "cpu"
) -> CandidateFn | None:
    """A masked-LM :data:`CandidateFn` when ``directory`` holds MLM-head weights, else ``None``.

    The head is recognised by safetensors keys starting with ``cls.predictions`` (BERT pre-training
    checkpoints have it; sentence-transformers models such as the bundled MiniLM do not). Only
    safetensors are read. The callable returns the ``k`` most probable whole words (no special,
    unused or ``##`` tokens) for the masked word; the word itself may be among them, and
    :func:`augment_texts` drops it.
    """
    from safetensors import safe_open

    path = Path(directory)
    if not path.is_dir():
        raise ValueError(f"{directory} is not a directory; pass a checkpoint directory.")
    if not _is_int(k) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}.")
    has_head = False
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(file, framework="pt") as f:
            if any(key.startswith("cls.predictions") for key in f.keys()):  # noqa: SIM118
                has_head = True
                break
    if not has_head:
        return None
    from transformers import BertForMaskedLM

    device = torch.device(device)
    model = BertForMaskedLM.from_pretrained(path, use_safetensors=True).to(device).eval()
    if max(tokenizer.get_vocab().values()) >= model.config.vocab_size:
        raise ValueError(f"the tokenizer does not match the checkpoint in {directory} (vocabulary too large).")
    return _MaskedLMCandidates(model, tokenizer, k, device)
