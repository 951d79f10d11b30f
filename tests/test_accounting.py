"""Parameter and FLOP accounting, checked against transformers' models and torch's FLOP counter."""

from __future__ import annotations

import pytest
import torch
from helpers import padded_batch, tiny_config
from torch.utils.flop_counter import FlopCounterMode
from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel

from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.encoder import Encoder
from compress.models.presets import PAPER_CONFIGS


@pytest.mark.parametrize(
    "changes",
    [{}, {"embedding_size": 16}, {"sharing": "all"}, {"sharing": "attention", "groups": 2},
     {"sharing": "ffn", "embedding_size": 8, "groups": 4}],
)
def test_components_add_up_to_every_parameter(changes):
    model = Encoder(tiny_config(**changes))
    count = count_parameters(model)
    assert count.total == sum(p.numel() for p in model.parameters())
    assert count == count_parameters(model.config)  # meta-device count of the config agrees
    assert count.backbone + count.classifier == count.total
    assert (count.by_component["embedding_projection"] > 0) == model.config.factorized


def _meta_count(model_cls, config) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in model_cls(config).parameters())


def _hf_bert_config(c):
    return BertConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
                      num_attention_heads=c.num_heads, intermediate_size=c.ffn_size)


@pytest.mark.parametrize("name", ["bert-base", "bert-large", "bert-xlarge"])
def test_bert_presets_match_transformers_bert_model(name):
    c = PAPER_CONFIGS[name]
    assert count_parameters(c).backbone == _meta_count(BertModel, _hf_bert_config(c))


@pytest.mark.parametrize("name", ["albert-base", "albert-large", "albert-xlarge", "albert-xxlarge"])
def test_albert_presets_match_transformers_albert_model(name):
    c = PAPER_CONFIGS[name]
    hf = AlbertConfig(vocab_size=c.vocab_size, embedding_size=c.embedding_size, hidden_size=c.hidden_size,
                      num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
                      intermediate_size=c.ffn_size, num_hidden_groups=c.groups)
    assert count_parameters(c).backbone == _meta_count(AlbertModel, hf)


@pytest.mark.parametrize(
    "changes", [{}, {"embedding_size": 16}, {"sharing": "all", "embedding_size": 8}, {"num_labels": 7}]
)
def test_analytic_flops_equal_torch_flop_counter(changes):
    config = tiny_config(**changes)
    model = Encoder(config).eval()
    batch = {k: v[:1] for k, v in padded_batch().items()}  # one sequence of 9 tokens
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(**batch, output_attentions=True)  # explicit attention: plain matmuls the counter sees
    assert counter.get_total_flops() == flops_per_sequence(config, 9)


def test_sharing_cuts_parameters_but_not_flops():
    none, shared = tiny_config(), tiny_config(sharing="all")
    assert count_parameters(shared).total < count_parameters(none).total
    assert flops_per_sequence(shared, 64) == flops_per_sequence(none, 64)
