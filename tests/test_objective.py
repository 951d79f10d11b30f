"""The distillation objective: wiring of layers, projections and cached teacher logits."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import padded_batch, tiny_config

from compress.distill.layer_maps import LayerMap
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import LossTerm, Recipe, Stage
from compress.distill.recipes import albert_recipe, distilbert_recipe, tinybert_recipe
from compress.errors import CompressError
from compress.models.encoder import Encoder

ALL_TERMS = [LossTerm("kd_kl", 1.0, {"temperature": 2.0, "scale_by_t2": True}), LossTerm("soft_ce"),
             LossTerm("embedding_mse"), LossTerm("hidden_mse"), LossTerm("attention_mse"),
             LossTerm("attention_kl"), LossTerm("cosine_hidden")]


def _batch():
    batch = padded_batch()
    batch["labels"] = torch.tensor([0, 1, 2])
    return batch


def test_a_student_identical_to_its_teacher_has_zero_distillation_loss():
    torch.manual_seed(0)
    teacher = Encoder(tiny_config()).eval()
    student = copy.deepcopy(teacher)
    objective = DistillationObjective(Stage("all", [t for t in ALL_TERMS if t.loss != "soft_ce"]), teacher, student,
                                      LayerMap("uniform"))
    loss, parts = objective(student, _batch())
    assert set(parts) == {"kd_kl", "embedding_mse", "hidden_mse", "attention_mse", "attention_kl", "cosine_hidden"}
    assert all(abs(v) < 1e-5 for v in parts.values()), parts


def test_layer_map_pairs_student_layers_with_mapped_teacher_layers():
    torch.manual_seed(0)
    teacher = Encoder(tiny_config(num_layers=4)).eval()
    student = Encoder(tiny_config(num_layers=2)).eval()
    objective = DistillationObjective(Stage("h", [LossTerm("hidden_mse")]), teacher, student, LayerMap("uniform"))
    assert objective.hidden_map == [0, 2, 4]
    explicit = DistillationObjective(Stage("h", [LossTerm("hidden_mse")]), teacher, student, LayerMap.explicit([1, 3]))
    assert explicit.hidden_map == [0, 1, 3]


def test_projections_are_made_for_narrower_students_and_trained():
    torch.manual_seed(0)
    teacher = Encoder(tiny_config()).eval()
    student = Encoder(tiny_config(embedding_size=16, hidden_size=16, num_layers=2))
    stage = tinybert_recipe().stages[0]
    objective = DistillationObjective(stage, teacher, student, LayerMap("uniform"))
    assert set(objective.projections) == {"embedding", "hidden"}
    loss, _ = objective(student, _batch())
    loss.backward()
    assert all(p.grad is not None for p in objective.projections.parameters())
    assert all(p.grad is None for p in teacher.parameters())

    cosine = Stage("cos", [LossTerm("cosine_hidden")])
    with pytest.raises(CompressError, match="equal width"):
        DistillationObjective(cosine, teacher, student, LayerMap("uniform"))


def test_cached_teacher_logits_give_the_same_loss_as_running_the_teacher():
    torch.manual_seed(0)
    teacher = Encoder(tiny_config()).eval()
    student = Encoder(tiny_config(embedding_size=8, sharing="all")).eval()
    stage = albert_recipe().stages[0]
    objective = DistillationObjective(stage, teacher, student, albert_recipe().layer_map)
    assert not objective.needs_teacher_forward
    batch = _batch()
    fresh, _ = objective(student, batch)
    with torch.no_grad():
        cached = dict(batch, teacher_logits=teacher(**{k: batch[k] for k in ("input_ids", "attention_mask",
                                                                                 "token_type_ids")}).logits)
    reused, _ = objective(student, cached)
    torch.testing.assert_close(fresh, reused)


def test_an_albert_intermediate_stage_makes_an_identical_student_lose_nothing():
    """--intermediate-epochs puts TinyBERT's hidden + attention stage (selected on its dev loss) before the
    logits; the same depth pairs layer m with teacher layer m, so a student equal to its teacher scores 0."""
    recipe = albert_recipe(intermediate_epochs=2)
    assert [(s.name, s.epochs, s.select_on) for s in recipe.stages][0] == ("intermediate", 2, "loss")
    assert [t.loss for t in recipe.stages[0].terms] == ["hidden_mse", "attention_mse"]
    assert [s.name for s in albert_recipe().stages] == ["distill"]
    torch.manual_seed(0)
    teacher = Encoder(tiny_config()).eval()
    objective = DistillationObjective(recipe.stages[0], teacher, teacher, recipe.layer_map)
    loss, parts = objective(teacher, padded_batch())
    assert float(loss) == 0.0 and set(parts) == {"hidden_mse", "attention_mse"}


def test_recipes_round_trip_through_json():
    for recipe in (albert_recipe(hidden_loss=True), albert_recipe(intermediate_epochs=1), distilbert_recipe(),
                   tinybert_recipe()):
        assert Recipe.from_dict(recipe.to_dict()) == recipe
    with pytest.raises(ValueError, match="takes no option"):
        LossTerm("hard_ce", options={"temperature": 2.0})
