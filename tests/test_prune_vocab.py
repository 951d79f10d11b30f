"""Vocabulary pruning: the pruned tokenizer renumbers ids exactly, the pruned model computes the same
logits with V' x E embeddings, it saves and reloads, and bad keep lists fail in one sentence."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from compress.errors import CompressError
from compress.models.checkpoints import load_encoder, save_encoder
from compress.models.encoder import Encoder
from compress.prune.vocab import (
    check_keep,
    old_to_new,
    prune_vocabulary,
    pruned_tokenizer,
    used_token_ids,
    vocab_summary,
)
from tests.helpers import tiny_config

E = 32
SAMPLE = 64  # sentences run through the models


@pytest.fixture(scope="module")
def tokenizer():
    from compress.teachers.registry import load_tokenizer

    return load_tokenizer("minilm")


@pytest.fixture(scope="module")
def train_texts() -> list[str]:
    from compress.data.load import load_task

    return list(load_task("mr").splits["train"]["text"])


@pytest.fixture(scope="module")
def keep(tokenizer, train_texts) -> list[int]:
    return used_token_ids(tokenizer, train_texts)


@pytest.fixture(scope="module")
def model(tokenizer) -> Encoder:
    torch.manual_seed(0)
    return Encoder(tiny_config(vocab_size=len(tokenizer), embedding_size=E, hidden_size=E,
                               max_positions=512)).eval()


@pytest.fixture(scope="module")
def pruned(model, tokenizer, keep):
    return prune_vocabulary(model, tokenizer, keep)


def remapped(ids: list[list[int]], keep: list[int]) -> list[list[int]]:
    mapping = old_to_new(keep)
    return [[mapping[i] for i in row] for row in ids]


def logits(model: Encoder, tokenizer, texts: list[str]) -> torch.Tensor:
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --- which ids are kept -----------------------------------------------------------------------------
def test_used_ids_are_sorted_unique_and_hold_every_special_token(tokenizer, keep) -> None:
    assert keep == sorted(set(keep))
    assert set(tokenizer.all_special_ids) <= set(keep)
    assert {tokenizer.convert_ids_to_tokens(i) for i in tokenizer.all_special_ids} == {
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    assert 1000 < len(keep) < len(tokenizer) // 2  # MR's training text uses a minority of the 30522 tokens


def test_used_ids_include_text_pairs_and_are_never_truncated(tokenizer) -> None:
    zebra, = tokenizer("zebra", add_special_tokens=False).input_ids
    banana, = tokenizer("banana", add_special_tokens=False).input_ids
    assert zebra not in used_token_ids(tokenizer, ["a film"])
    assert zebra in used_token_ids(tokenizer, ["the " * 600 + "zebra"])  # past position 512
    assert banana in used_token_ids(tokenizer, ["a film"], ["banana"])
    assert banana not in used_token_ids(tokenizer, ["a film"], ["an apple"])


# --- the tokenizer ----------------------------------------------------------------------------------
def test_new_ids_are_the_remapped_old_ids_on_every_training_sentence(tokenizer, keep, pruned, train_texts) -> None:
    new = pruned[1]
    assert type(new) is type(tokenizer)
    assert len(new) == len(keep)
    old_batch, new_batch = tokenizer(train_texts, padding=True), new(train_texts, padding=True)
    assert new_batch["input_ids"] == remapped(old_batch["input_ids"], keep)  # [CLS], [SEP], [PAD] included
    assert new_batch["attention_mask"] == old_batch["attention_mask"]
    assert new_batch["token_type_ids"] == old_batch["token_type_ids"]
    mapping = old_to_new(keep)
    assert new.pad_token_id == mapping[tokenizer.pad_token_id]
    assert new.cls_token_id == mapping[tokenizer.cls_token_id] != tokenizer.cls_token_id


def test_sentence_pairs_keep_their_ids_and_segments(tokenizer, keep, pruned, train_texts) -> None:
    first, second = train_texts[:SAMPLE], train_texts[SAMPLE:2 * SAMPLE]
    old_batch, new_batch = tokenizer(first, second, padding=True), pruned[1](first, second, padding=True)
    assert new_batch["input_ids"] == remapped(old_batch["input_ids"], keep)
    assert new_batch["token_type_ids"] == old_batch["token_type_ids"]


def test_a_generic_fast_tokenizer_gets_its_special_token_ids_renumbered(tokenizer, keep, train_texts) -> None:
    """PreTrainedTokenizerFast does not rebuild its post-processor as BERT's class does: the [CLS]/[SEP]
    ids come from the renumbered tokenizers JSON alone."""
    from transformers import PreTrainedTokenizerFast

    generic = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer, **tokenizer.special_tokens_map)
    new = pruned_tokenizer(generic, keep)
    texts = train_texts[:SAMPLE]
    assert new(texts, padding=True)["input_ids"] == remapped(generic(texts, padding=True)["input_ids"], keep)


def test_words_the_training_text_never_used_still_tokenize(tokenizer, keep, pruned) -> None:
    new, kept = pruned[1], set(keep)
    old_pieces = tokenizer("quarterback", add_special_tokens=False).input_ids
    assert not set(old_pieces) <= kept  # the precondition: MR's training text never says "quarterback"
    assert new.convert_ids_to_tokens(new("quarterback").input_ids) == ["[CLS]", "quarter", "##back", "[SEP]"]
    assert new.convert_ids_to_tokens(new("ζ").input_ids) == ["[CLS]", "[UNK]", "[SEP]"]
    assert tokenizer.convert_ids_to_tokens(tokenizer("ζ").input_ids) == ["[CLS]", "ζ", "[SEP]"]


# --- the model --------------------------------------------------------------------------------------
def test_pruned_model_gives_the_same_logits_and_copies_every_other_weight(
        model, tokenizer, keep, pruned, train_texts) -> None:
    new_model, new_tokenizer = pruned
    texts = train_texts[:SAMPLE]
    torch.testing.assert_close(logits(new_model, new_tokenizer, texts), logits(model, tokenizer, texts),
                               atol=1e-6, rtol=0)
    assert new_model.config == model.config.replace(vocab_size=len(keep), pad_token_id=0)
    old_state, new_state = model.state_dict(), new_model.state_dict()
    assert old_state.keys() == new_state.keys()
    table = "embeddings.word_embeddings.weight"
    assert torch.equal(new_state[table], old_state[table][keep])
    assert all(torch.equal(new_state[k], old_state[k]) for k in old_state if k != table)
    assert new_state[table].data_ptr() != old_state[table].data_ptr()


def test_the_input_model_is_untouched(tokenizer, keep) -> None:
    torch.manual_seed(1)
    model = Encoder(tiny_config(vocab_size=len(tokenizer), embedding_size=E, hidden_size=E))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    new_model, _ = prune_vocabulary(model, tokenizer, keep)
    with torch.no_grad():
        new_model.embeddings.word_embeddings.weight.add_(1.0)
        new_model.pooler.weight.add_(1.0)
    assert model.config.vocab_size == len(tokenizer)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert new_model.training and model.training


def test_a_padding_id_other_than_0_is_renumbered(tokenizer, keep) -> None:
    """BERT pads with id 0, which stays 0; a model and a tokenizer backend that pad with another id
    get it renumbered."""
    mask = tokenizer.mask_token_id
    model = Encoder(tiny_config(vocab_size=len(tokenizer), pad_token_id=mask))
    padding_with_mask = copy.deepcopy(tokenizer)
    padding_with_mask.backend_tokenizer.enable_padding(pad_id=mask, pad_token="[MASK]")
    new_model, new_tokenizer = prune_vocabulary(model, padding_with_mask, keep)
    new_mask = old_to_new(keep)[mask]
    assert new_mask != mask
    assert new_model.config.pad_token_id == new_model.embeddings.word_embeddings.padding_idx == new_mask
    assert new_tokenizer.backend_tokenizer.padding["pad_id"] == new_mask


def test_pruning_removes_exactly_the_dropped_rows(model, keep, pruned) -> None:
    removed = model.config.vocab_size - len(keep)
    assert count(model) - count(pruned[0]) == removed * E
    summary = vocab_summary(model.config.vocab_size, keep, E)
    assert (summary.kept, summary.removed) == (len(keep), removed)
    assert summary.embedding_params_before - summary.embedding_params_after == removed * E
    assert summary.share_removed == pytest.approx(removed / model.config.vocab_size)


def test_saved_pruned_model_is_smaller_and_reloads_with_the_same_logits_and_ids(
        model, tokenizer, keep, pruned, train_texts, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    new_model, new_tokenizer = pruned
    save_encoder(model, tmp_path / "full", tokenizer)
    save_encoder(new_model, tmp_path / "pruned", new_tokenizer)
    full_size = (tmp_path / "full" / "model.safetensors").stat().st_size
    pruned_size = (tmp_path / "pruned" / "model.safetensors").stat().st_size
    expected = (model.config.vocab_size - len(keep)) * E * 4  # float32 rows
    assert abs((full_size - pruned_size) - expected) < 64  # the safetensors headers differ by a few bytes

    reloaded = load_encoder(tmp_path / "pruned").model
    reloaded_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "pruned")
    assert reloaded.config == new_model.config
    assert len(reloaded_tokenizer) == len(keep)
    texts = train_texts[:SAMPLE]
    assert reloaded_tokenizer(texts, padding=True)["input_ids"] == new_tokenizer(texts, padding=True)["input_ids"]
    torch.testing.assert_close(logits(reloaded, reloaded_tokenizer, texts), logits(model, tokenizer, texts),
                               atol=1e-6, rtol=0)


# --- refusals ---------------------------------------------------------------------------------------
def test_losing_a_special_token_is_refused_naming_it(model, tokenizer, keep) -> None:
    without_cls = [i for i in keep if i != tokenizer.cls_token_id]
    with pytest.raises(CompressError, match=r"special token \[CLS\] \(id 101\); keep it\.$"):
        check_keep(tokenizer, without_cls, len(tokenizer))
    with pytest.raises(CompressError, match=r"\[PAD\] \(id 0\)"):
        prune_vocabulary(model, tokenizer, keep[1:])


@pytest.mark.parametrize("bad, message", [
    ([], "is empty"),
    ([0, 100, 101, 102, 103, 103], "token id 103 is listed twice"),
    ([0, 100, 101, 102, 103, 30522], "token id 30522 is outside the vocabulary of 30522 tokens"),
    ([0, -1, 100, 101, 102, 103], "token id -1 is outside"),
])
def test_bad_keep_lists_are_refused_in_one_sentence(tokenizer, bad: list[int], message: str) -> None:
    with pytest.raises(CompressError, match=message) as error:
        check_keep(tokenizer, bad, len(tokenizer))
    assert "\n" not in str(error.value) and str(error.value).endswith(".")


def test_only_wordpiece_tokenizers_are_supported() -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(WordLevel({"[UNK]": 0, "[PAD]": 1, "film": 2}, unk_token="[UNK]"))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]")
    model = Encoder(tiny_config(vocab_size=3))
    with pytest.raises(CompressError, match="WordPiece \\(BERT\\) tokenizers only, and this one is WordLevel"):
        prune_vocabulary(model, tokenizer, [0, 1])


def test_a_renumbered_predictor_reads_teacher_ids_as_its_own():
    """compare times every model on the teacher's token ids; a vocabulary-pruned one gets them renumbered."""
    import numpy as np

    from compress.quantize.predictors import RenumberedPredictor, renumbering

    teacher = {"[PAD]": 0, "[UNK]": 1, "good": 2, "bad": 3, "film": 4}
    pruned = {"[PAD]": 0, "[UNK]": 1, "film": 2}
    assert renumbering(teacher, dict(teacher), 1) is None
    table = renumbering(teacher, pruned, 1)
    seen = []

    class Echo:
        backend, dtype = "torch", "fp32"

        def __call__(self, inputs):
            seen.append(inputs["input_ids"])
            return np.zeros((len(inputs["input_ids"]), 2), dtype=np.float32)

    predictor = RenumberedPredictor(Echo(), table)
    predictor({"input_ids": np.array([[2, 4, 3, 0]]), "attention_mask": np.ones((1, 4), dtype=np.int64)})
    assert seen[0].tolist() == [[1, 2, 1, 0]] and predictor.backend == "torch"
