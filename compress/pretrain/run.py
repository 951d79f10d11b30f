"""`compress pretrain`: masked-LM pre-training of an ALBERT-shaped encoder with a sentence objective.

Objectives (Lan et al. 2020, section 4.6): ``sop``, sentence-order prediction (two consecutive segments of
one document, swapped with probability 1/2); ``nsp``, BERT's next-sentence prediction (the second segment
from another document with probability 1/2); ``none``, masked LM alone. The pairs come from
:mod:`compress.data.corpus`. Documents are split into training and held-out ones before any pair is
made, and the held-out documents measure, for every model whatever it trained on, masked-LM accuracy
and the accuracy of its sentence head on SOP pairs and on NSP pairs (label 1 = swapped / not next), as
the paper's Table 5 does.

The encoder starts from the teacher as `compress run albert` builds its student (``init="teacher"``) or
from random weights (``"scratch"``). The result is cached by teacher weights, corpus and settings; its
``encoder/`` starts a task run: ``compress run albert --init-from DIR``.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

import datasets
import torch
from safetensors.torch import save_file
from torch import nn

from compress.cache import cached
from compress.data.batching import collator_for, make_dataloader, tokenize_dataset
from compress.data.corpus import Document, check_corpus, load_corpus, make_nsp_pairs, make_sop_pairs
from compress.data.quiet import quiet_datasets
from compress.device import resolve_device
from compress.errors import CompressError
from compress.models.checkpoints import save_encoder, weights_digest
from compress.models.encoder import Encoder
from compress.paths import cache_dir
from compress.pretrain.config import INITS, OBJECTIVES, PAPER_TABLE5, PretrainConfig  # noqa: F401 - re-exported
from compress.pretrain.masking import IGNORE, MaskingSpec, mask_tokens
from compress.pretrain.model import PretrainingModel
from compress.resume import Resume
from compress.stats import Interval, wilson_interval
from compress.students.albert import AlbertOptions, albert_config, build_albert
from compress.teachers.registry import load_teacher, load_tokenizer, resolve_teacher_dir, teacher_config
from compress.training import (
    Batch,
    TrainConfig,
    check_precision,
    resolve_precision,
    seed_everything,
    to_device,
    train_stage,
    with_progress,
)

RECORD = "record.json"
_CACHE_VERSION = 1
EVAL_PAIRS = 2000  # held-out pairs per measure, at most


class PretrainRecord(TypedDict):
    """record.json of a pre-training cache entry (and what ``compress pretrain --json`` prints of it): a plain
    dict, so records cached before this type existed read back unchanged."""

    objective: str
    corpus: str
    teacher: str
    config: dict[str, str | int | float]   # the PretrainConfig, as asdict
    documents: dict[str, int]              # train, held_out
    pairs: dict[str, int]                  # train, held_out_sop, held_out_nsp, held_out_none
    held_out: dict[str, float] | None      # the kept epoch's held-out metrics (see evaluate_pretraining)
    best_epoch: int
    history: list[dict[str, str | int | float]]
    seconds: float
    params: int                            # the encoder's parameters


@dataclass
class PretrainResult:
    directory: Path        # the cache entry: encoder/, heads.safetensors, record.json, log.jsonl
    record: PretrainRecord
    cache_hit: bool

    @property
    def encoder_dir(self) -> Path:
        return self.directory / "encoder"


def held_out_interval(record: PretrainRecord, task: str) -> Interval:
    """The 95% interval (Wilson's) of the sentence head's accuracy on the held-out ``task`` pairs (sop, nsp)."""
    n = record["pairs"][f"held_out_{task}"]
    return wilson_interval(round(record["held_out"][f"{task}_accuracy"] * n), n)


def _corpus_id(corpus: str) -> str:
    path = Path(corpus)
    return f"file:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}" if path.is_file() else corpus


def check_pretrain(config: PretrainConfig, device: str = "auto") -> None:
    """Every refusal of a pre-training that needs no corpus, weights or training: the ALBERT shape against the
    teacher's, the corpus's name, the device and the precision on it."""
    try:
        albert_config(teacher_config(config.teacher), config.embedding_size, config.sharing, config.groups)
    except ValueError as e:
        raise CompressError(f"invalid ALBERT shape: {e}") from None
    check_corpus(config.corpus)
    check_precision(resolve_precision(config.precision, device), resolve_device(device))


def pretrain(config: PretrainConfig, *, device: str = "auto", show_progress: bool = True) -> PretrainResult:
    """The pre-trained encoder of ``config`` (trained, or found in the cache); bad input fails before training."""
    check_pretrain(config, device)
    # auto becomes the precision it stands for here, so the cache key and the record name the one that trained
    config = replace(config, precision=resolve_precision(config.precision, device))
    teacher_dir = resolve_teacher_dir(config.teacher)
    documents = load_corpus(config.corpus)
    train_docs, held_docs = _split_documents(documents, config)
    train_pairs = _pairs(train_docs, config.objective, config)  # fails here when no pair can be made
    held_sop = _pairs(held_docs, "sop", config, seed=config.seed + 1, limit=EVAL_PAIRS)
    held_out = {"sop": held_sop, "nsp": _pairs(held_docs, "nsp", config, seed=config.seed + 1, limit=EVAL_PAIRS),
                "none": _in_order(held_sop)}  # masked LM is scored on the same segments, in their order
    settings = {k: v for k, v in asdict(config).items() if k not in ("teacher", "corpus")}
    key = hashlib.sha256(json.dumps({"version": _CACHE_VERSION, "teacher": weights_digest(teacher_dir),
                                     "corpus": _corpus_id(config.corpus), "settings": settings},
                                    sort_keys=True).encode()).hexdigest()[:20]
    target = cache_dir() / "pretrain" / key

    def build(tmp: Path) -> None:
        with Resume({"pretrain": key}, f"pre-training ({config.objective})") as resume:
            _train(config, train_pairs, held_out, (len(train_docs), len(held_docs)), tmp, resolve_device(device),
                   show_progress, resume)

    record, hit = cached(target, "pre-trained encoder", build, _record_of, collective=True)
    return PretrainResult(target, record, cache_hit=hit)


def _record_of(entry: Path) -> PretrainRecord:
    if not (entry / RECORD).is_file() or not (entry / "encoder").is_dir():
        raise ValueError(f"it lacks {RECORD} or encoder/")
    return json.loads((entry / RECORD).read_text())


def _split_documents(documents: list[Document], config: PretrainConfig) -> tuple[list[Document], list[Document]]:
    """Training and held-out documents (a seeded shuffle; at least two held out, so NSP pairs can be made)."""
    if len(documents) < 4:
        raise CompressError(f"the corpus {config.corpus} has {len(documents)} document(s); pre-training needs at "
                            "least 4 (some are held out for evaluation).")
    order = list(documents)
    random.Random(config.seed).shuffle(order)
    held = max(2, min(config.held_out_documents, len(order) // 10))
    return order[held:], order[:held]


def _pairs(documents: list[Document], objective: str, config: PretrainConfig, seed: int | None = None,
           limit: int | None = None) -> datasets.Dataset:
    """Segment pairs for ``objective`` (``none``: consecutive segments in order), at most ``limit``."""
    seed = config.seed if seed is None else seed
    k = config.sentences_per_segment
    if not any(len(d.sentences) >= 2 * k for d in documents):
        raise CompressError(f"the corpus {config.corpus} has no document of {2 * k} or more sentences, so no segment "
                            "pair can be made (documents are separated by blank lines).")
    pairs = make_nsp_pairs(documents, seed=seed, sentences_per_segment=k) if objective == "nsp" else \
        make_sop_pairs(documents, seed=seed, sentences_per_segment=k)
    limit = limit or config.max_pairs
    if len(pairs) > limit:
        pairs = pairs.shuffle(seed=seed).select(range(limit))
    return _in_order(pairs) if objective == "none" else pairs


def _in_order(sop_pairs: datasets.Dataset) -> datasets.Dataset:
    """SOP pairs with the swapped ones put back in order: consecutive segments, for masked LM alone."""
    with quiet_datasets():
        return sop_pairs.map(lambda row: {"text": row["text_pair"], "text_pair": row["text"], "label": 0}
                             if row["label"] else row)


def _masking(tokenizer: Any, vocab_size: int) -> MaskingSpec:
    if tokenizer.mask_token_id is None:
        raise CompressError("the teacher's tokenizer has no [MASK] token, so it cannot be pre-trained with masked LM.")
    return MaskingSpec(mask_id=tokenizer.mask_token_id, vocab_size=vocab_size,
                       special_ids=tuple(sorted(set(tokenizer.all_special_ids))))


def _train(config: PretrainConfig, train_pairs: datasets.Dataset, held_out_pairs: dict[str, datasets.Dataset],
           documents: tuple[int, int], out: Path, device: torch.device, show_progress: bool, resume: Resume) -> None:
    teacher = load_teacher(config.teacher, num_labels=2).model
    tokenizer = load_tokenizer(config.teacher)
    seed_everything(config.seed)
    options = AlbertOptions(embedding_size=config.embedding_size, sharing=config.sharing, groups=config.groups)
    try:
        encoder = build_albert(teacher, options) if config.init == "teacher" else \
            Encoder(albert_config(teacher.config, config.embedding_size, config.sharing, config.groups))
    except ValueError as e:
        raise CompressError(f"invalid ALBERT shape: {e}") from None
    model = PretrainingModel(encoder).to(device)
    spec = _masking(tokenizer, encoder.config.vocab_size)
    length = min(config.max_length, encoder.config.max_positions)
    collator = collator_for(tokenizer)
    train = tokenize_dataset(train_pairs, tokenizer, length)
    held_out = {name: tokenize_dataset(pairs, tokenizer, length) for name, pairs in held_out_pairs.items()}
    generator = torch.Generator().manual_seed(config.seed)
    sentence_loss = config.objective != "none"

    def loss_fn(m: nn.Module, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        corrupted, labels = mask_tokens(batch["input_ids"], batch["attention_mask"], spec, generator)
        vocabulary, sentence = m(corrupted, batch["attention_mask"], batch["token_type_ids"], labels)
        mlm = nn.functional.cross_entropy(vocabulary, labels[labels != IGNORE])
        if not sentence_loss:
            return mlm, {"mlm": mlm.item()}
        order = nn.functional.cross_entropy(sentence, batch["labels"])
        return config.mlm_weight * mlm + order, {"mlm": mlm.item(), config.objective: order.item()}

    def held_out_metrics(evaluated: PretrainingModel) -> dict[str, float]:
        return evaluate_pretraining(evaluated, held_out, collator, spec, config.objective, device, show_progress,
                                    config.mlm_weight)

    with open(out / "log.jsonl", "w") as log:
        log.write(resume.log())
        result = train_stage(
            model, loss_fn,
            lambda epoch: make_dataloader(train, collator, batch_size=config.batch_size, shuffle=True,
                                          seed=config.seed + epoch),
            lambda: [], TrainConfig(epochs=config.epochs, lr=config.lr, batch_size=config.batch_size,
                                    seed=config.seed, metric="loss", precision=config.precision),
            device=device, name=f"pretrain ({config.objective})", log=log, evaluate_fn=held_out_metrics,
            show_progress=show_progress,
            checkpoints=resume.stage(0, [], out / "log.jsonl", generators=(generator,)),
        )
    model.cpu()
    save_encoder(model.encoder, out / "encoder", tokenizer=tokenizer)
    save_file({k: v.contiguous() for k, v in model.state_dict().items() if not k.startswith("encoder.")},
              out / "heads.safetensors")
    record = PretrainRecord(objective=config.objective, corpus=config.corpus, teacher=config.teacher,
                            config=asdict(config), documents=dict(zip(("train", "held_out"), documents)),
                            pairs={"train": len(train), **{f"held_out_{k}": len(v) for k, v in held_out.items()}},
                            held_out=result.best_dev, best_epoch=result.best_epoch,
                            history=result.history, seconds=round(result.seconds, 1),
                            params=sum(p.numel() for p in model.encoder.parameters()))
    (out / RECORD).write_text(json.dumps(record, indent=2))


@torch.inference_mode()
def evaluate_pretraining(model: PretrainingModel, held_out: dict[str, datasets.Dataset], collator: Any,
                         spec: MaskingSpec, objective: str, device: torch.device,
                         show_progress: bool = False, mlm_weight: float = 1.0) -> dict[str, float]:
    """Masked-LM accuracy and loss on in-order held-out pairs (masks drawn with a fixed seed, so every model
    and epoch is scored on the same corruption), and the sentence head's accuracy on held-out SOP pairs and
    NSP pairs. ``loss`` (what picks the best epoch) is the masked-LM loss, weighted as in training
    (``mlm_weight``), plus, unless ``objective`` is ``none``, the sentence loss on that objective's pairs. Each
    pass shows a progress bar when asked (on 2 cores the three take minutes)."""
    model.eval()
    generator = torch.Generator().manual_seed(0)
    correct = total = 0
    mlm_loss = 0.0
    batches = make_dataloader(held_out["none"], collator, batch_size=128)
    for batch in with_progress(batches, "held-out masked LM", show_progress):
        batch = to_device(batch, device)
        corrupted, labels = mask_tokens(batch["input_ids"], batch["attention_mask"], spec, generator)
        vocabulary, _ = model(corrupted, batch["attention_mask"], batch["token_type_ids"], labels)
        targets = labels[labels != IGNORE]
        mlm_loss += float(nn.functional.cross_entropy(vocabulary, targets, reduction="sum"))
        correct += int((vocabulary.argmax(-1) == targets).sum())
        total += len(targets)
    metrics = {"mlm_accuracy": correct / total, "mlm_loss": mlm_loss / total}
    sentence_loss = 0.0
    for name in ("sop", "nsp"):
        right = seen = 0
        batches = make_dataloader(held_out[name], collator, batch_size=128)
        for batch in with_progress(batches, f"held-out {name.upper()} pairs", show_progress):
            batch = to_device(batch, device)
            no_mask = torch.full_like(batch["input_ids"], IGNORE)
            _, logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], no_mask)
            right += int((logits.argmax(-1) == batch["labels"]).sum())
            seen += len(batch["labels"])
            if name == objective:
                sentence_loss += float(nn.functional.cross_entropy(logits, batch["labels"], reduction="sum"))
        metrics[f"{name}_accuracy"] = right / seen
        if name == objective:
            sentence_loss /= seen
    return {"loss": mlm_weight * metrics["mlm_loss"] + sentence_loss, **metrics}
