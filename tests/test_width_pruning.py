"""Cutting the width (the hidden size) of tiny encoders: what the cut model computes, against a forward pass written
here from the uncut model's weights; parameters and FLOPs against the tensors and torch's counter; the channel
scores against the layers run one by one; exports; the shares and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import padded_batch, padded_batches, tiny_config
from torch.utils.flop_counter import FlopCounterMode

from compress.errors import CompressError
from compress.methods.prune.options import PruneOptions, channels_to_keep
from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.checkpoints import load_encoder, save_encoder
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.models.hf_convert import hf_layout
from compress.prune.structure import Keep, prune_model, pruned_config

CHANNELS = (0, 2, 3, 5, 8, 9, 13, 17, 18, 21, 22, 24, 27, 28, 30, 31)   # 16 of 32, uneven on purpose

SHAPES = {"bert": {}, "factorized": {"embedding_size": 8}, "all-shared": {"sharing": "all"}}


def _model(**changes) -> Encoder:
    torch.manual_seed(0)
    config = tiny_config(**changes)
    return Encoder(config.replace(initializer_range=config.hidden_size ** -0.5)).eval()


def _cut(model: Encoder, channels: tuple[int, ...] = CHANNELS, keep: Keep | None = None) -> Encoder:
    keep = keep or Keep.everything(model.config)
    return prune_model(model, Keep(keep.heads, keep.neurons, keep.layers, channels))


def _on_kept_channels(model: Encoder, batch: dict[str, torch.Tensor], channels: tuple[int, ...]) -> torch.Tensor:
    """The logits of ``model`` run on the kept channels of its residual stream only, written from its weights: every
    map that reads the stream reads those channels, every map that writes it writes only those, and every layer
    norm normalises over them."""
    c = torch.tensor(channels)
    config = model.config
    eps = config.layer_norm_eps
    e = model.embeddings
    ids, mask = batch["input_ids"], batch["attention_mask"]
    n = ids.shape[1]
    x = e.word_embeddings.weight[ids] + e.position_embeddings.weight[:n][None] + \
        e.token_type_embeddings.weight[batch["token_type_ids"]]
    if config.factorized:
        x = F.layer_norm(x, (x.shape[-1],), e.layer_norm.weight, e.layer_norm.bias, eps)
        x = x @ e.projection.weight[c].T + e.projection.bias[c]
    else:
        x = F.layer_norm(x[..., c], (len(c),), e.layer_norm.weight[c], e.layer_norm.bias[c], eps)
    additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    d = config.head_size
    for layer in range(config.num_layers):
        a = model.attention[config.attention_block_of(layer)]
        q, k, v = ((x @ m.weight[:, c].T + m.bias).view(*x.shape[:2], -1, d).transpose(1, 2)
                   for m in (a.query, a.key, a.value))
        context = ((q @ k.transpose(-1, -2) / math.sqrt(d) + additive).softmax(-1) @ v).transpose(1, 2)
        out = context.reshape(*x.shape[:2], -1) @ a.output.weight[c].T + a.output.bias[c]
        x = F.layer_norm(x + out, (len(c),), a.layer_norm.weight[c], a.layer_norm.bias[c], eps)
        f = model.ffn[config.ffn_block_of(layer)]
        inner = F.gelu(x @ f.intermediate.weight[:, c].T + f.intermediate.bias)
        out = inner @ f.output.weight[c].T + f.output.bias[c]
        x = F.layer_norm(x + out, (len(c),), f.layer_norm.weight[c], f.layer_norm.bias[c], eps)
    pooled = torch.tanh(x[:, 0] @ model.pooler.weight[c][:, c].T + model.pooler.bias[c])
    return pooled @ model.classifier.weight[:, c].T + model.classifier.bias


@pytest.mark.parametrize("shape", SHAPES)
def test_a_width_cut_computes_the_model_on_its_kept_channels(shape):
    model = _model(**SHAPES[shape])
    batch = padded_batch()
    with torch.no_grad():
        cut = _cut(model)
        ours = cut(**batch).logits
        torch.testing.assert_close(ours, _on_kept_channels(model, batch, CHANNELS), atol=1e-5, rtol=1e-4)
        assert not torch.allclose(ours, model(**batch).logits, atol=1e-3)   # something was really removed
    config = cut.config
    assert (config.hidden_size, config.head_size, config.head_width) == (16, 8, 8)   # heads keep their width
    assert config.embedding_size == (8 if shape == "factorized" else 16)
    assert config.factorized == (shape == "factorized")
    assert len(cut.attention) == model.config.num_attention_blocks


def test_keeping_every_channel_is_the_same_model_and_cuts_compose():
    model = _model()
    batch = padded_batch()
    with torch.no_grad():
        same = _cut(model, tuple(range(32)))
        assert same.config == model.config and same.config.head_width == 0
        torch.testing.assert_close(same(**batch).logits, model(**batch).logits, atol=0, rtol=0)
        # heads, neurons and layers with the width in one cut, or the width after them: the same model
        parts = Keep(((1, 3), (0, 1, 2, 3), (2,), (0, 1, 2, 3)), tuple(tuple(range(b, 64, 2)) for b in range(4)),
                     (0, 1, 3))
        once = _cut(model, keep=parts)
        twice = _cut(prune_model(model, parts))
        assert once.config == twice.config
        torch.testing.assert_close(once(**batch).logits, twice(**batch).logits, atol=0, rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_parameters_and_flops_of_a_cut_shape(shape, tmp_path):
    model = _model(**SHAPES[shape])
    cut = _cut(model)
    config = cut.config
    own = sum(t.numel() for t in cut.state_dict().values())
    assert count_parameters(config).total == own
    h, d, e, k = config.hidden_size, config.head_size, config.embedding_size, config.num_heads
    attention = config.num_attention_blocks * (4 * h * k * d + 3 * k * d + h + 2 * h)
    ffn = config.num_ffn_blocks * (2 * h * config.ffn_size + config.ffn_size + h + 2 * h)
    embeddings = (config.vocab_size + config.max_positions + config.type_vocab_size) * e + 2 * e
    projection = e * h + h if config.factorized else 0
    head = h * h + h + h * config.num_labels + config.num_labels
    assert own == embeddings + projection + attention + ffn + head
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        cut(**{k: v[:1] for k, v in padded_batch().items()}, output_attentions=True)   # one sequence of 9
    assert counter.get_total_flops() == flops_per_sequence(config, 9)
    # The shape is written and read back (head_width in config.json), and transformers is not offered it.
    assert save_encoder(cut, tmp_path / "m") == "compress"
    loaded = load_encoder(tmp_path / "m").model
    assert loaded.config == config and hf_layout(config) is None
    with torch.no_grad():
        torch.testing.assert_close(loaded(**padded_batch()).logits, cut(**padded_batch()).logits, atol=0, rtol=0)
    assert "head_width" not in model.config.to_dict()   # an uncut shape's JSON (and every key made of it) is as before


def test_channel_scores_are_the_first_order_change_of_the_loss_at_every_layer_norm_output():
    """|sum over the real tokens of x dL/dx| per channel at each output, with the layers run here one by one."""
    from compress.prune.importance import score

    model = _model()
    batches = [padded_batch(seed=seed) | {"labels": torch.tensor([0, 1, 2])} for seed in range(3)]
    expected = torch.zeros(32)
    for batch in batches:
        real = batch["attention_mask"].bool()
        mask = (1.0 - batch["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = model.embeddings(batch["input_ids"], batch["token_type_ids"])
        outputs = [x]
        for layer in range(4):
            x = model.attention[layer](x, mask, False)[0]
            outputs.append(x)
            x = model.ffn[layer](x)
            outputs.append(x)
        logits = model.classifier(torch.tanh(model.pooler(x[:, 0])))
        grads = torch.autograd.grad(F.cross_entropy(logits, batch["labels"]), outputs)
        expected += sum((out.detach()[real] * g[real]).sum(0).abs() for out, g in zip(outputs, grads, strict=True))
    scores = score(model, batches).channels
    np.testing.assert_allclose(scores, (expected / 3).numpy(), rtol=1e-4, atol=1e-7)


def test_channels_go_by_score_and_shares_round_to_whole_groups():
    from compress.prune.importance import Importance
    from compress.prune.select import Amount, choose

    config = tiny_config()
    scores = [float((7 * c) % 32) for c in range(32)]
    importance = Importance(heads=[[1.0] * 4] * 4, neurons=[[1.0] * 64] * 4, layers=[1.0] * 4, base_loss=1.0,
                            examples=1, target="labels", channels=scores)
    kept = choose(config, importance, Amount(channels=8)).channels
    assert sorted(scores[c] for c in kept) == list(range(24, 32))
    assert choose(config, importance, Amount()).channels is None
    assert pruned_config(config, Keep.everything(config)) == config
    assert [channels_to_keep(share, 384) for share in (1, 0.9, 0.8125, 0.75, 0.5, 0.001)] == \
        [384, 344, 312, 288, 192, 8]
    assert channels_to_keep(312, 384) == 312


@pytest.mark.parametrize("width, changes, message", [
    (0.0, {}, "share of the hidden channels in \\(0, 1\\]"),
    (1.5, {}, "whole number"),
    (33, {}, "at most the model's hidden size, 32"),
    (16, {"embedding_size": 16}, "keep more than the factorized embedding's 16"),
])
def test_bad_widths_are_refused_in_one_sentence(width, changes, message):
    from compress.methods.prune.verb import check_layers

    with pytest.raises(CompressError, match=message):
        check_layers(PruneOptions(keep_width=width), tiny_config(**changes))


def test_a_cut_shape_exports_to_onnx_runtime(tmp_path):
    from compress.methods.quantization import quant_format
    from compress.quantize.artefacts import load_artefact, write_artefact
    from compress.quantize.predictors import TorchPredictor

    model = _model(vocab_size=2000)
    cut = _cut(model, keep=Keep(((0, 2),) * 4, (tuple(range(40)),) * 4, (0, 1, 2, 3)))
    inputs = {k: v.numpy() for k, v in padded_batches(vocab_size=2000, seeds=range(4)).items()}
    write_artefact(quant_format("onnx"), "onnxruntime", cut, tmp_path, label_names=["a", "b", "c"])
    np.testing.assert_allclose(load_artefact(tmp_path, threads=1)(inputs), TorchPredictor(cut)(inputs), atol=1e-4)


@pytest.mark.parametrize(("width", "remedy"), [(48, "--group-size 16 divides every one"),
                                              (24, "no group size of 16, 32, 64, 128, 256 divides them all")])
def test_openvinos_int4_names_a_group_size_that_fits_a_cut_width_or_says_none_does(width, remedy):
    from compress.quantize.sizes import ov_int4_misfit

    shape = tiny_config(vocab_size=2000, hidden_size=width, embedding_size=width, head_width=8)   # heads 4 x 8
    why = ov_int4_misfit(shape, 32)
    assert why is not None and f"matrices {width} wide; {remedy}, and ONNX Runtime pads instead." in why
    assert (ov_int4_misfit(shape, 16) is None) == (width == 48)   # the size it names does fit


def test_a_config_with_its_own_head_width_needs_no_divisible_hidden_size():
    config = EncoderConfig(vocab_size=50, embedding_size=20, hidden_size=20, num_layers=1, num_heads=3,
                           ffn_size=8, head_width=8)
    assert config.head_size == 8 and config.pruned
    with pytest.raises(ValueError, match="divisible"):
        EncoderConfig(vocab_size=50, embedding_size=20, hidden_size=20, num_layers=1, num_heads=3, ffn_size=8)


def test_a_width_cut_recovers_against_the_teachers_kept_channels_or_through_a_projection():
    from compress.distill.layer_maps import LayerMap
    from compress.distill.losses import hidden_mse
    from compress.distill.objective import DistillationObjective
    from compress.distill.recipe import LossTerm, Recipe, Stage

    teacher = _model()
    student = _cut(teacher)
    stage = Stage("recover", [LossTerm("hidden_mse", 1.0)], epochs=1, lr=1e-4)
    batch = padded_batch()
    at_channels = DistillationObjective(stage, teacher, student, LayerMap("uniform"), CHANNELS)
    assert not at_channels.projections
    with torch.no_grad():
        s = student(**batch, output_hidden_states=True).hidden_states
        t = teacher(**batch, output_hidden_states=True).hidden_states
        expected = sum(hidden_mse(s[i], t[i][..., list(CHANNELS)], batch["attention_mask"]) for i in range(1, 5))
        torch.testing.assert_close(at_channels(student, batch)[0], expected)
    projected = DistillationObjective(stage, teacher, student, LayerMap("uniform"))
    assert projected.projections["hidden"].in_features == 16
    recipe = Recipe("prune", [stage], LayerMap("uniform"), CHANNELS)
    assert Recipe.from_dict(recipe.to_dict()) == recipe and "channels" not in Recipe("x", [stage]).to_dict()
