"""Structural pruning on tiny encoders: removal equals zero gates, parameter counts, files, ONNX and int8."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import (
    assert_int8_logits_follow,
    int8_logits_follow,
    mis_scaled,
    padded_batch,
    padded_batches,
    tiny_config,
)

from compress.methods.quantization import quant_format
from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.checkpoints import load_encoder, save_encoder
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.prune.structure import Keep, gates_for, prune_model, pruned_config
from compress.quantize.artefacts import load_artefact, needs_calibration, write_artefact
from compress.quantize.predictors import TorchPredictor


def _model(**changes) -> Encoder:
    torch.manual_seed(0)
    config = tiny_config(**changes)
    # std 1/sqrt(H): every block moves the residual stream as a trained one does, so a wrong slice shows.
    return Encoder(config.replace(initializer_range=config.hidden_size ** -0.5)).eval()


def _keep(config: EncoderConfig, layers: tuple[int, ...]) -> Keep:
    """A deliberately uneven keep: block 0 keeps heads 1 and 3, the last block none; FFN blocks keep
    every third neuron, one block none."""
    heads = [tuple(range(config.heads_of(b))) for b in range(config.num_attention_blocks)]
    heads[0] = (1, 3)
    if len(heads) > 1:
        heads[-1] = ()
    neurons = [tuple(range(b % 3, config.ffn_size_of(b), 3)) for b in range(config.num_ffn_blocks)]
    if len(neurons) > 2:
        neurons[1] = ()
    return Keep(tuple(heads), tuple(neurons), layers)


SHAPES = {
    "bert": {},
    "factorized": {"embedding_size": 16},
    "all-shared": {"sharing": "all"},
    "attention-shared": {"sharing": "attention"},
    "grouped": {"sharing": "ffn", "groups": 2},
}


@pytest.mark.parametrize("shape", SHAPES)
def test_removing_parts_equals_zeroing_their_gates(shape):
    model = _model(**SHAPES[shape])
    layers = (0, 1, 2, 3) if shape == "grouped" else (0, 2, 3)   # grouped sharing cannot drop layers
    keep = _keep(model.config, layers)
    batch = padded_batch()
    with torch.no_grad():
        gated = model(**batch, gates=gates_for(model.config, keep), output_hidden_states=True)
        pruned = prune_model(model, keep)
        out = pruned(**batch, output_hidden_states=True)
        full = model(**batch).logits
    torch.testing.assert_close(out.logits, gated.logits, atol=1e-5, rtol=0)
    assert not torch.allclose(out.logits, full, atol=1e-3)   # something was really removed
    kept_states = [gated.hidden_states[0]] + [gated.hidden_states[i + 1] for i in layers]
    for ours, theirs in zip(out.hidden_states, kept_states, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_ones_gates_change_nothing_and_keeping_everything_is_the_same_model():
    model = _model()
    batch = padded_batch()
    everything = Keep.everything(model.config)
    with torch.no_grad():
        plain = model(**batch).logits
        torch.testing.assert_close(model(**batch, gates=gates_for(model.config, everything)).logits, plain,
                                   atol=1e-6, rtol=0)
        copy = prune_model(model, everything)
        assert copy.config == model.config
        torch.testing.assert_close(copy(**batch).logits, plain, atol=0, rtol=0)


def test_a_pruned_block_runs_for_every_layer_that_shares_it():
    model = _model(sharing="all")
    keep = Keep(((0, 2),), ((5, 9, 11),), (0, 1, 2, 3))
    pruned = prune_model(model, keep)
    assert pruned.config.heads == (2,) and pruned.config.ffn_sizes == (3,) and pruned.config.num_layers == 4
    assert len(pruned.attention) == 1 and len(pruned.ffn) == 1


@pytest.mark.parametrize("shape", SHAPES)
def test_parameter_counts_of_pruned_shapes_equal_their_tensors(shape, tmp_path):
    model = _model(**SHAPES[shape])
    layers = (0, 1, 2, 3) if shape == "grouped" else (1, 3)
    pruned = prune_model(model, _keep(model.config, layers))
    config = pruned.config
    own = sum(t.numel() for t in pruned.state_dict().values())
    assert count_parameters(config).total == own
    # Closed form, block by block: what each kept head and neuron owns.
    h, d, e = config.hidden_size, config.head_size, config.embedding_size
    attention = sum(4 * h * k * d + 3 * k * d + h + 2 * h
                    for k in (config.heads_of(b) for b in range(config.num_attention_blocks)))
    ffn = sum(2 * h * f + f + h + 2 * h for f in (config.ffn_size_of(b) for b in range(config.num_ffn_blocks)))
    embeddings = (config.vocab_size + config.max_positions + config.type_vocab_size) * e + 2 * e
    projection = e * h + h if config.factorized else 0
    head = h * h + h + h * config.num_labels + config.num_labels
    assert own == embeddings + projection + attention + ffn + head
    # The file holds the same tensors and loads back to the same model.
    assert save_encoder(pruned, tmp_path / "m") == "compress"
    from safetensors.torch import load_file

    assert sum(t.numel() for t in load_file(tmp_path / "m" / "model.safetensors").values()) == own
    loaded = load_encoder(tmp_path / "m").model
    assert loaded.config == config
    with torch.no_grad():
        torch.testing.assert_close(loaded(**padded_batch()).logits, pruned(**padded_batch()).logits, atol=0, rtol=0)


def test_flops_count_only_what_is_kept():
    config = tiny_config()
    n = 10
    keep = Keep(((0, 1),) + ((0, 1, 2, 3),) * 3, (tuple(range(16)),) + (tuple(range(64)),) * 3, (0, 1, 2, 3))
    pruned = pruned_config(config, keep)
    h, d = config.hidden_size, config.head_size
    # Layer 0 lost 2 of 4 heads and 48 of 64 neurons: its attention FLOPs scale with the heads kept
    # (projections and the n x n products alike), its FFN FLOPs with the neurons kept.
    saved = (2 * n * h * 3 * 2 * d + 2 * n * n * 2 * d * 2 + 2 * n * 2 * d * h) + 2 * 2 * n * h * 48
    assert flops_per_sequence(config, n) - flops_per_sequence(pruned, n) == saved
    none = pruned_config(config, Keep(((),) * 4, ((),) * 4, (0, 1, 2, 3)))
    assert flops_per_sequence(none, n) == 2 * h * h + 2 * h * config.num_labels


def test_bad_keeps_are_refused():
    config = tiny_config()
    everything = Keep.everything(config)
    with pytest.raises(ValueError, match="at least one layer"):
        pruned_config(config, Keep(everything.heads, everything.neurons, ()))
    with pytest.raises(ValueError, match="ascending"):
        pruned_config(config, Keep(((3, 1),) + everything.heads[1:], everything.neurons, everything.layers))
    with pytest.raises(ValueError, match="below 4"):
        pruned_config(config, Keep(((4,),) + everything.heads[1:], everything.neurons, everything.layers))
    grouped = tiny_config(sharing="all", groups=2)
    keep = Keep.everything(grouped)
    with pytest.raises(ValueError, match="groups"):
        pruned_config(grouped, Keep(keep.heads, keep.neurons, (0, 1)))
    with pytest.raises(ValueError, match="one entry per block"):
        tiny_config(heads=(1, 2))


@pytest.mark.parametrize("method, backend", [("int8", "torch"), ("int8", "onnxruntime"), ("onnx", "onnxruntime"),
                                             ("int8", "openvino"), ("onnx", "openvino")])
def test_pruned_shapes_export_and_quantize(method, backend, tmp_path):
    model = _model(vocab_size=2000)
    pruned = prune_model(model, _keep(model.config, (0, 2, 3)))
    batch = padded_batches(vocab_size=2000, seeds=range(8))   # 24 sentences
    calibration = [{k: v.numpy() for k, v in padded_batch(vocab_size=2000, seed=seed).items()}
                   for seed in range(8, 16)]   # 24 others
    write_artefact(quant_format(method), backend, pruned, tmp_path, label_names=["a", "b", "c"],
                   calibration=calibration if needs_calibration(quant_format(method), backend) else None)
    predictor = load_artefact(tmp_path, threads=1)
    inputs = {k: v.numpy() for k, v in batch.items()}
    expected = TorchPredictor(pruned)(inputs)
    if method == "onnx":
        np.testing.assert_allclose(predictor(inputs), expected, atol=1e-4)
    else:
        assert_int8_logits_follow(predictor(inputs), expected, (method, backend))
        assert not int8_logits_follow(TorchPredictor(mis_scaled(pruned))(inputs), expected)   # nor weights 1.25x theirs


# --- importance scores, each against an independent computation -----------------------------------


def _scoring_batches(vocab_size: int = 101, count: int = 3) -> list[dict[str, torch.Tensor]]:
    batches = []
    for seed in range(count):
        batch = padded_batch(vocab_size, seed=seed)
        batch["labels"] = torch.tensor([seed % 3, (seed + 1) % 3, 2])
        batches.append(batch)
    return batches


def _hooked_head_importance(model: Encoder, batches) -> list[torch.Tensor]:
    """Michel et al. through explicit gates: a hook scales each head's slice of the output projection's input."""
    config = model.config
    gates = [torch.ones(config.heads_of(b), requires_grad=True) for b in range(config.num_attention_blocks)]
    handles = [block.output.register_forward_pre_hook(
        lambda module, args, g=g: (args[0] * g.repeat_interleave(config.head_size),))
        for block, g in zip(model.attention, gates, strict=True)]
    totals = [torch.zeros_like(g) for g in gates]
    for batch in batches:
        logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits
        grads = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, batch["labels"]), gates)
        for total, g in zip(totals, grads, strict=True):
            total += g.abs()
    for handle in handles:
        handle.remove()
    return [t / len(batches) / (t / len(batches)).norm() for t in totals]


def _hooked_taylor(model: Encoder, batches) -> list[torch.Tensor]:
    """The Taylor score as gate gradients: sum w dL/dw over a neuron's input weights and bias is dL/dg for
    a gate on its pre-activation, over its output weights dL/dg for a gate on its activation."""
    totals = []
    for block in model.ffn:
        pre = torch.ones(block.width, requires_grad=True)
        post = torch.ones(block.width, requires_grad=True)
        handles = [block.intermediate.register_forward_hook(lambda m, a, out, g=pre: out * g),
                   block.output.register_forward_pre_hook(lambda m, args, g=post: (args[0] * g,))]
        total = torch.zeros(block.width)
        for batch in batches:
            logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits
            g_pre, g_post = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, batch["labels"]), [pre, post])
            total += (g_pre + g_post).abs()
        for handle in handles:
            handle.remove()
        totals.append(total / len(batches))
    return totals


def test_head_and_neuron_importance_equal_independent_gate_gradients():
    from compress.prune.importance import score

    model = _model()
    batches = _scoring_batches()
    importance = score(model, batches)
    for ours, theirs in zip(importance.heads, _hooked_head_importance(model, batches), strict=True):
        torch.testing.assert_close(torch.tensor(ours), theirs, atol=1e-5, rtol=1e-4)
    for ours, theirs in zip(importance.neurons, _hooked_taylor(model, batches), strict=True):
        torch.testing.assert_close(torch.tensor(ours), theirs, atol=1e-6, rtol=1e-4)
    assert len({round(v, 6) for v in importance.heads[0]}) == 4   # not a constant


def test_layer_importance_is_the_loss_of_the_model_without_that_layer():
    from compress.prune.importance import score

    model = _model()
    batches = _scoring_batches()
    importance = score(model, batches)

    def mean_loss(m: Encoder) -> float:
        with torch.no_grad():
            losses = [torch.nn.functional.cross_entropy(
                m(b["input_ids"], b["attention_mask"], b["token_type_ids"]).logits, b["labels"]) * 3 for b in batches]
        return float(sum(losses)) / (3 * len(batches))

    assert importance.base_loss == pytest.approx(mean_loss(model), rel=1e-5)
    everything = Keep.everything(model.config)
    for layer, increase in enumerate(importance.layers):
        without = prune_model(model, Keep(everything.heads, everything.neurons,
                                          tuple(i for i in range(4) if i != layer)))
        assert increase == pytest.approx(mean_loss(without) - importance.base_loss, abs=1e-5)


def test_scores_against_predictions_use_the_models_own_argmax():
    from compress.prune.importance import score

    model = _model()
    batches = _scoring_batches()
    with torch.no_grad():
        own = [model(b["input_ids"], b["attention_mask"], b["token_type_ids"]).logits.argmax(-1) for b in batches]
    relabelled = [dict(b, labels=p) for b, p in zip(batches, own, strict=True)]
    assert score(model, batches, target="predictions").heads == score(model, relabelled).heads
    with pytest.raises(ValueError, match="target"):
        score(model, batches, target="gold")


# --- choosing what to keep ---------------------------------------------------------------------------


def _importance(config: EncoderConfig):
    from compress.prune.importance import Importance

    # Block b's head h scores (b + 1) * (h + 1) before normalisation: later blocks and heads matter more.
    heads = [[(b + 1) * (h + 1) for h in range(config.num_heads)] for b in range(config.num_layers)]
    neurons = [[float((7 * i + b) % 13) for i in range(config.ffn_size)] for b in range(config.num_layers)]
    return Importance(heads=heads, neurons=neurons, layers=[0.5, 0.1, 0.3, 0.2], base_loss=1.0, examples=8,
                      target="labels")


def test_global_ranking_keeps_the_best_anywhere_and_layer_ranking_the_best_of_each_layer():
    from compress.prune.select import Amount, choose

    config = tiny_config()
    importance = _importance(config)
    glob = choose(config, importance, Amount(heads=0.25, neurons=0.5, ranking="global"))
    assert glob.heads == ((), (), (2, 3), (2, 3))   # 16, 12, 12, 9: the best four anywhere, ties to the lower block
    assert sum(map(len, glob.neurons)) == 128
    per_layer = choose(config, importance, Amount(heads=0.5, neurons=0.5, ranking="layer"))
    assert per_layer.heads == ((2, 3),) * 4 and all(len(n) == 32 for n in per_layer.neurons)
    kept = per_layer.neurons[0]
    assert min(importance.neurons[0][i] for i in kept) >= max(
        importance.neurons[0][i] for i in range(64) if i not in kept)


def test_layers_go_from_the_top_or_by_the_least_loss_increase():
    from compress.prune.select import Amount, choose

    config = tiny_config()
    importance = _importance(config)
    assert choose(config, importance, Amount(drop_layers=2)).layers == (0, 1)
    by_importance = choose(config, importance, Amount(drop_layers=2, layer_order="importance"))
    assert by_importance.layers == (0, 2)   # layers 1 and 3 raise the loss least when skipped
    # Heads and neurons are ranked among the layers that remain only.
    assert by_importance.heads[1] == by_importance.heads[3] == ()


def test_iterative_steps_reach_the_asked_share_in_equal_slices():
    from compress.methods.prune.options import PruneOptions
    from compress.methods.prune.verb import step_amounts

    amounts = step_amounts(PruneOptions(keep_heads=0.4, keep_ffn=0.7, drop_layers=2, steps=3, keep_width=0.5), 384)
    kept_heads = kept_ffn = 1.0
    for number, amount in enumerate(amounts, 1):
        kept_heads *= amount.heads
        kept_ffn *= amount.neurons
        assert kept_heads == pytest.approx(1 - 0.6 * number / 3)
        assert kept_ffn == pytest.approx(1 - 0.3 * number / 3)
    assert [a.drop_layers for a in amounts] == [2, 0, 0]
    assert [a.channels for a in amounts] == [320, 256, 192]   # the width falls by as many channels each step
    assert step_amounts(PruneOptions(), 384)[0].channels is None
