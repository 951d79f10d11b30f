"""The encoder: shape validation, the fused and explicit attention paths, masking, sharing."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import padded_batch, tiny_config

from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"num_heads": 5}, "num_heads"),
        ({"num_layers": 4, "groups": 3}, "groups"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"ffn_size": -1}, "ffn_size"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"sharing": "layers"}, "sharing"),
        ({"embedding_size": 64}, "embedding_size"),
        ({"activation": "swish"}, "activation"),
        ({"hidden_dropout": 1.0}, "hidden_dropout"),
    ],
)
def test_invalid_shapes_raise_value_error_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        tiny_config(**changes)


def test_config_json_round_trip():
    config = tiny_config(embedding_size=16, sharing="ffn", groups=2, activation="gelu_new")
    assert EncoderConfig.from_json(config.to_json()) == config
    with pytest.raises(ValueError, match="unknown encoder config field"):
        EncoderConfig.from_dict({**config.to_dict(), "bogus": 1})


@pytest.mark.parametrize("sharing", ["none", "all", "attention", "ffn"])
def test_fused_and_explicit_attention_agree(sharing):
    torch.manual_seed(0)
    model = Encoder(tiny_config(embedding_size=16, sharing=sharing, groups=2)).eval()
    batch = padded_batch()
    with torch.no_grad():
        fused = model(**batch)
        explicit = model(**batch, output_attentions=True, output_hidden_states=True)
    assert fused.attention_scores is None and fused.hidden_states is None
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(fused.logits, explicit.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(fused.last_hidden_state[real], explicit.last_hidden_state[real], atol=1e-5, rtol=0)


def test_outputs_have_every_hidden_state_and_pre_softmax_scores():
    torch.manual_seed(0)
    config = tiny_config(embedding_size=16)
    model = Encoder(config).eval()
    batch = padded_batch()
    with torch.no_grad():
        out = model(**batch, output_attentions=True, output_hidden_states=True)
    assert len(out.hidden_states) == config.num_layers + 1
    assert all(h.shape == (3, 9, config.hidden_size) for h in out.hidden_states)  # after E->H projection
    assert len(out.attention_scores) == len(out.attention_probs) == config.num_layers
    assert out.attention_scores[0].shape == (3, config.num_heads, 9, 9)

    # Layer 0's scores, recomputed by hand from its input (the embedding output) and its weights.
    block, x = model.attention[0], out.hidden_states[0]
    d = config.head_size
    q = block.query(x).view(3, 9, config.num_heads, d).transpose(1, 2)
    k = block.key(x).view(3, 9, config.num_heads, d).transpose(1, 2)
    manual = q @ k.transpose(-1, -2) / math.sqrt(d)
    keep = batch["attention_mask"][:, None, None, :].expand_as(manual).bool()
    torch.testing.assert_close(out.attention_scores[0][keep], manual[keep], atol=1e-5, rtol=0)
    assert (out.attention_scores[0][~keep] < -1e30).all()  # padding masked before softmax
    torch.testing.assert_close(out.attention_probs[0], out.attention_scores[0].softmax(-1))
    assert (out.attention_probs[0][~keep] == 0).all()


def test_padding_does_not_change_real_tokens():
    torch.manual_seed(0)
    model = Encoder(tiny_config()).eval()
    batch = padded_batch()
    with torch.no_grad():
        padded = model(**batch).last_hidden_state[1, :5]
        alone = model(**{k: v[1:2, :5] for k, v in batch.items()}).last_hidden_state[0]
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("sharing", "groups", "attention_map", "ffn_map"),
    [
        ("none", 1, [0, 1, 2, 3], [0, 1, 2, 3]),
        ("all", 1, [0, 0, 0, 0], [0, 0, 0, 0]),
        ("all", 2, [0, 0, 1, 1], [0, 0, 1, 1]),
        ("attention", 2, [0, 0, 1, 1], [0, 1, 2, 3]),
        ("ffn", 4, [0, 1, 2, 3], [0, 1, 2, 3]),
        ("ffn", 1, [0, 1, 2, 3], [0, 0, 0, 0]),
    ],
)
def test_sharing_maps_layers_to_blocks_in_contiguous_groups(sharing, groups, attention_map, ffn_map):
    config = tiny_config(sharing=sharing, groups=groups)
    model = Encoder(config)
    assert [config.attention_block_of(i) for i in range(4)] == attention_map
    assert [config.ffn_block_of(i) for i in range(4)] == ffn_map
    assert len(model.attention) == max(attention_map) + 1
    assert len(model.ffn) == max(ffn_map) + 1


def test_shared_block_runs_at_every_layer():
    """All-shared with one group: perturbing the one block changes every layer's output."""
    torch.manual_seed(0)
    model = Encoder(tiny_config(sharing="all")).eval()
    batch = padded_batch()
    with torch.no_grad():
        before = model(**batch, output_hidden_states=True).hidden_states
        model.ffn[0].output.bias.add_(0.5)
        after = model(**batch, output_hidden_states=True).hidden_states
    assert torch.equal(before[0], after[0])
    assert all(not torch.allclose(b, a) for b, a in zip(before[1:], after[1:]))
