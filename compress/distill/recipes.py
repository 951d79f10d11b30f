"""The default recipes of the three students, following their papers.

DistilBERT (Sanh et al. 2019) trains with 5 * L_ce(soft targets, T=2) + 2 * L_mlm + 1 * L_cos;
on a task the gold-label loss takes the place of L_mlm, and the weights are normalised to sum
to 1 (0.625, 0.25, 0.125). TinyBERT (Jiao et al. 2020) distils intermediate layers first
(embedding, hidden and attention MSE, layer map g(m) = m * N / M) and the prediction layer
second (soft cross-entropy, T = 1). ALBERT students are distilled on the logits (and, when asked,
the hidden states: same depth and width, so layer m pairs with teacher layer m).
"""

from __future__ import annotations

from compress.distill.layer_maps import LayerMap
from compress.distill.recipe import LossTerm, Recipe, Stage

KD_TEMPERATURE = 2.0


def _kd(weight: float) -> LossTerm:
    return LossTerm("kd_kl", weight, {"temperature": KD_TEMPERATURE, "scale_by_t2": True})


def recovery_terms() -> list[LossTerm]:
    """What a transform recovers with, by distillation from the model it was given (pruning, low-rank factorization,
    quantization-aware training): that model's soft targets and, layer by layer, its hidden states (the same width,
    so no projection)."""
    return [_kd(1.0), LossTerm("hidden_mse", 1.0)]


def albert_recipe(hidden_loss: bool = False, epochs: int = 3, lr: float = 1e-4,
                  intermediate_epochs: int = 0) -> Recipe:
    terms = [_kd(0.5), LossTerm("hard_ce", 0.5)]
    if hidden_loss:
        terms.append(LossTerm("hidden_mse", 1.0))
    stages = [Stage("distill", terms, epochs=epochs, lr=lr)]
    if intermediate_epochs:
        stages.insert(0, Stage("intermediate", [LossTerm("hidden_mse"), LossTerm("attention_mse")],
                               epochs=intermediate_epochs, lr=lr, select_on="loss"))
    return Recipe("albert", stages, LayerMap("uniform"))


def distilbert_recipe(epochs: int = 3, lr: float = 5e-5) -> Recipe:
    terms = [_kd(0.625), LossTerm("hard_ce", 0.25), LossTerm("cosine_hidden", 0.125, layers="last")]
    return Recipe("distilbert", [Stage("distill", terms, epochs=epochs, lr=lr)], LayerMap("every_other"))


def tinybert_recipe(intermediate_epochs: int = 4, prediction_epochs: int = 3, lr: float = 1e-4) -> Recipe:
    intermediate = Stage(
        "intermediate",
        [LossTerm("embedding_mse"), LossTerm("hidden_mse"), LossTerm("attention_mse")],
        epochs=intermediate_epochs, lr=lr, select_on="loss",
    )
    prediction = Stage("prediction", [LossTerm("soft_ce", 1.0, {"temperature": 1.0})],
                       epochs=prediction_epochs, lr=lr)
    return Recipe("tinybert", [intermediate, prediction], LayerMap("uniform"))
