"""Low-rank factorization on a tiny encoder, checked against independent computations: full rank changes nothing,
the Fisher weights equal an explicit loop, activation-aware factors fit the calibration inputs better than plain
SVD, parameters and FLOPs follow the ranks, and the factorized model saves, reloads, exports and quantizes.
Bad input fails in one line before any work, through the real CLI."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import (
    assert_int8_logits_follow,
    assert_refused_before_work,
    int8_logits_follow,
    mis_scaled,
    padded_batch,
    padded_batches,
    run_cli,
    tiny_config,
)

from compress.methods.lowrank.factorize import (
    break_even,
    cholesky,
    energy_ranks,
    factor,
    fisher_rows,
    input_covariances,
    linear_of,
    matrices,
    uniform_ranks,
    weighted,
)
from compress.methods.lowrank.verb import factorize
from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.encoder import Encoder, LowRankLinear

torch.manual_seed(0)


@pytest.fixture(scope="module")
def model() -> Encoder:
    torch.manual_seed(1)
    return Encoder(tiny_config(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=0.0)).eval()


def _batches(count: int = 3) -> list[dict[str, torch.Tensor]]:
    batches = []
    for seed in range(count):
        batch = padded_batch(seed=seed)
        batch["labels"] = torch.randint(0, 2, (len(batch["input_ids"]),), generator=torch.Generator().manual_seed(seed))
        batches.append(batch)
    return batches


def _logits(model: Encoder, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits


@pytest.mark.parametrize("weighting", ["svd", "fisher", "activation"])
def test_at_full_rank_the_factorized_model_gives_the_same_logits(model, weighting):
    found = matrices(model)
    batches = _batches()
    if weighting == "fisher":
        weights = {k: {"rows": r + 1e-6} for k, r in fisher_rows(copy.deepcopy(model), batches, torch.device("cpu"),
                                                                   found).items()}
    elif weighting == "activation":
        weights = {k: {"whiten": cholesky(c)} for k, c in
                   input_covariances(model, batches, torch.device("cpu"), found).items()}
    else:
        weights = {}
    full = factorize(model, {m.key: min(m.out, m.inp) for m in found}, weights, word_rank=model.config.embedding_size)
    assert all(isinstance(linear_of_factored, LowRankLinear) for linear_of_factored in
               (full.attention[0].query, full.ffn[0].output))
    batch = padded_batch(seed=7)
    assert torch.allclose(_logits(full, batch), _logits(model, batch), atol=1e-5)


def test_fisher_weights_equal_an_explicit_loop_over_the_same_batches(model):
    batches = _batches()
    found = matrices(model)
    rows = fisher_rows(copy.deepcopy(model), batches, torch.device("cpu"), found)
    independent = copy.deepcopy(model)
    weight = independent.ffn[1].intermediate.weight
    expected = torch.zeros(weight.shape[0], dtype=torch.float64)
    for batch in batches:   # dL/dW per batch, squared, summed over the row's columns, summed over batches
        logits = independent(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits
        loss = F.cross_entropy(logits, batch["labels"])
        (grad,) = torch.autograd.grad(loss, weight)
        for i in range(weight.shape[0]):
            expected[i] += sum(float(grad[i, j]) ** 2 for j in range(weight.shape[1]))
    assert torch.allclose(rows["ffn.1.intermediate"], expected, rtol=1e-6, atol=1e-14)


def test_activation_aware_factors_fit_the_calibration_inputs_better_than_plain_svd(model):
    batches = _batches()
    target = model.attention[0].value
    seen = []
    handle = target.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach()))
    with torch.no_grad():
        for batch in batches:
            model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    handle.remove()
    # The real (not padding) tokens' inputs, as columns: X is in x tokens.
    x = torch.cat([s.reshape(-1, s.shape[-1])[b["attention_mask"].reshape(-1).bool()] for s, b in zip(seen, batches)]).T
    [cov] = input_covariances(model, batches, torch.device("cpu"), [m for m in matrices(model)
                                                                    if m.key == "attention.0.value"]).values()
    assert torch.allclose(cov, x.double() @ x.double().T, rtol=1e-9)
    w, rank = target.weight.detach(), 4
    errors = {}
    for name, whiten in (("svd", None), ("activation", cholesky(cov))):
        up, down = factor(w, rank, whiten=whiten)
        errors[name] = float(torch.linalg.norm((w - up @ down).double() @ x.double()))
    assert errors["activation"] < errors["svd"], errors
    # And plain SVD is the better fit of the weights themselves: each minimizes its own error.
    up, down = factor(w, rank)
    aware_up, aware_down = factor(w, rank, whiten=cholesky(cov))
    assert torch.linalg.norm(w - up @ down) < torch.linalg.norm(w - aware_up @ aware_down)


def test_parameters_and_flops_follow_the_ranks(model):
    found = matrices(model)
    ranks = {m.key: (2 if m.kind == "attention" else 3) if m.block == 0 else 0 for m in found}
    small = factorize(model, ranks, {}, word_rank=5)
    count = count_parameters(small)
    assert count.total == sum(p.numel() for p in small.parameters()) == count_parameters(small.config).total
    removed = sum(m.params - ranks[m.key] * (m.out + m.inp) for m in found if ranks[m.key])
    removed += model.config.vocab_size * model.config.embedding_size - 5 * (model.config.vocab_size +
                                                                             model.config.embedding_size)
    assert count_parameters(model).total - count.total == removed
    n = 16
    saved = sum(2 * n * (m.params - ranks[m.key] * (m.out + m.inp)) for m in found if ranks[m.key])
    assert flops_per_sequence(model.config, n) - flops_per_sequence(small.config, n) == \
        saved - 2 * n * 5 * model.config.embedding_size


def test_ranks_are_shared_out_within_the_budget(model):
    found = matrices(model)
    spectra = {m.key: weighted(linear_of(model, m).weight.detach()) for m in found}
    total = sum(m.params for m in found)
    for keep in (0.3, 0.6):
        ranks = energy_ranks(found, spectra, int(keep * total))
        spent = sum(ranks[m.key] * (m.out + m.inp) if ranks[m.key] else m.params for m in found)
        assert spent <= int(keep * total) and all(r <= break_even(m.out, m.inp) for m, r in
                                                   zip(found, ranks.values()))
    uniform = uniform_ranks(found, 0.5)
    assert all(r == int(0.5 * m.params / (m.out + m.inp)) for m, r in zip(found, uniform.values()))


def test_keep_one_leaves_every_matrix_whole_and_factorizes_the_table_alone(model):
    from compress.methods.lowrank import shape
    from compress.methods.lowrank.options import LowRankOptions
    from compress.methods.lowrank.verb import choose_ranks

    found = matrices(model)
    spectra = {m.key: weighted(linear_of(model, m).weight.detach()) for m in found}
    options = LowRankOptions(keep=1.0, embedding_rank=4)
    for allocation in ("energy", "uniform"):   # uniform's rank at keep 1 would be break-even: factors, no saving
        assert set(choose_ranks(LowRankOptions(keep=1.0, allocation=allocation), found, spectra).values()) == {0}
    factorized = shape(options, model.config, None)
    assert factorized.word_rank == 4
    assert {r for block in factorized.attention_ranks + factorized.ffn_ranks for r in block} == {0}
    vocab, width = model.config.vocab_size, model.config.embedding_size
    assert count_parameters(model.config).total - count_parameters(factorized).total == \
        vocab * width - 4 * (vocab + width)


def test_a_factorized_model_saves_reloads_exports_and_quantizes(model, tmp_path):
    from compress.methods.quantization import quant_format
    from compress.models.checkpoints import load_encoder, save_encoder
    from compress.quantize.artefacts import load_artefact, needs_calibration, write_artefact

    found = matrices(model)
    small = factorize(model, {m.key: 3 for m in found}, {}, word_rank=6)
    batch = padded_batches(seeds=range(8))   # 24 sentences
    reference = _logits(small, batch)
    assert save_encoder(small, tmp_path / "student") == "compress"   # transformers has no low-rank layers
    loaded = load_encoder(tmp_path / "student").model.eval()
    assert loaded.config == small.config and torch.allclose(_logits(loaded, batch), reference, atol=1e-6)
    inputs = {k: batch[k].numpy() for k in ("input_ids", "attention_mask", "token_type_ids")}
    calibration = [{k: padded_batch(seed=seed)[k].numpy() for k in inputs} for seed in range(8, 16)]  # 24 others
    for name, backend in (("onnx", "onnxruntime"), ("int8", "onnxruntime"), ("int8", "torch"), ("onnx", "openvino"),
                          ("int8", "openvino")):
        directory = tmp_path / f"{name}-{backend}"
        directory.mkdir()
        write_artefact(quant_format(name), backend, small, directory,
                       calibration=calibration if needs_calibration(quant_format(name), backend) else None)
        logits = torch.as_tensor(load_artefact(directory, 1)(inputs))
        if name == "onnx":
            assert (logits - reference).abs().max() < 1e-4, (name, backend)
        else:   # near the fp32 logits for their size (about 0.01 here), not merely within a fixed distance of them
            assert_int8_logits_follow(logits, reference, (name, backend))
    assert not int8_logits_follow(_logits(mis_scaled(small), batch), reference)   # nor would weights 1.25x theirs


@pytest.mark.parametrize(("args", "expected"), [
    (("--rank", "0"), "--rank must be a positive integer, got 0."),
    (("--rank", "-3"), "--rank must be a positive integer, got -3."),
    (("--keep", "0"), "--keep is the share of the matrices' parameters to keep and must be in (0, 1], got 0.0."),
    (("--keep", "1.5"), "must be in (0, 1], got 1.5."),
    (("--keep", "0.0001"), "--keep 0.0001 keeps nothing"),
    (("--weighting", "random"), "--weighting must be one of svd, fisher, activation, got 'random'."),
    (("--embedding-rank", "0"), "--embedding-rank must be a positive integer, got 0."),
    (("--keep", "1"), "--keep 1 keeps every matrix whole and no --embedding-rank is given: nothing would be"),
])
def test_bad_options_fail_in_one_line_before_any_work(args, expected, tmp_path):
    done = run_cli("run", "lowrank", *args, "--out", str(tmp_path / "run"))
    assert_refused_before_work(done, expected, tmp_path / "run")


@pytest.mark.parametrize(("pipeline", "expected"), [
    ("int8+lowrank", "lowrank cannot follow int8: int8 gives a quantized model and lowrank takes a fp32 one."),
    ("lowrank+prune", "prune cannot follow lowrank: pruning scores and slices dense heads and neurons"),
    ("distilbert+lowrank+lowrank", "lowrank cannot follow lowrank: the model is already factorized"),
])
def test_orders_that_make_no_sense_fail_in_one_line(pipeline, expected, tmp_path):
    done = run_cli("run", pipeline, "--out", str(tmp_path / "run"))
    assert_refused_before_work(done, expected, tmp_path / "run")


def test_distilbert_then_lowrank_then_int8_runs_end_to_end(tmp_path):
    """The chain through the real CLI: the factorized step is a smaller dense model saved with its ranks, its
    report draws the rank of every matrix, and int8 quantizes it."""
    import json

    from helpers import make_tiny_teacher, write_tiny_csv

    from compress.models.checkpoints import load_encoder

    teacher, csv = make_tiny_teacher(tmp_path / "teacher"), write_tiny_csv(tmp_path / "reviews.csv")
    out = tmp_path / "chain"
    done = run_cli("run", "distilbert+lowrank+int8", "--keep", "0.5", "--recovery-epochs", "1", "--teacher",
                   str(teacher), "--dataset", str(csv), "--out", str(out), "--epochs", "2", "--batch-size", "8",
                   "--lr", "1e-3", "--teacher-epochs", "8", "--teacher-lr", "3e-3", "--teacher-batch-size", "8",
                   "--threads", "1", env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    factorized = tmp_path / "chain-lowrank"
    metrics = json.loads((factorized / "metrics.json").read_text())
    details = metrics["details"]
    assert metrics["kind"] == "lowrank" and metrics["source"]["kind"] == "run"
    assert metrics["student"]["params"] < metrics["source"]["params"]
    assert metrics["student"]["flops"] < json.loads((out / "metrics.json").read_text())["student"]["flops"]
    assert details["matrix_params_after"] <= 0.5 * details["matrix_params_before"]
    model = load_encoder(factorized / "student").model
    ranks = {(m["kind"], m["block"], m["name"]): m["rank"] for m in details["matrices"]}
    assert model.config.attention_ranks[0] == tuple(ranks["attention", 0, n] for n in ("query", "key", "value",
                                                                                       "output"))
    assert sum(p.numel() for p in model.parameters()) - model.config.num_labels * (model.config.hidden_size + 1) \
        == metrics["student"]["params"]
    report = (factorized / "report.md").read_text()
    assert "## Low-rank factorization" in report and "| layer | Q | K | V | O | FFN in | FFN out |" in report
    log = [json.loads(line) for line in (factorized / "log.jsonl").read_text().splitlines()]
    assert any(entry.get("event") == "dev" for entry in log)   # the recovery trained and was evaluated
    last = json.loads((tmp_path / "chain-lowrank-int8" / "metrics.json").read_text())
    assert [step["step"].split("[")[0] for step in last["chain"]] == ["distilbert", "lowrank", "int8"]


def test_explain_gives_the_break_even_ranks_and_the_teachers_real_spectra():
    """On the bundled minilm: break-even ranks of its two shapes, ALBERT's embedding as the same operation, and
    spectra equal to an independent SVD of the teacher's own matrices."""
    import json

    from compress.teachers.registry import load_teacher

    done = run_cli("explain", "lowrank", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    formula = " ".join(data["formula"])
    assert "(384 x 384) r < 192" in formula and "(1536 x 384) r < 308" in formula   # r (m + n) < m n
    assert 191 * (384 + 384) < 384 * 384 <= 192 * (384 + 384) and 307 * 1920 < 1536 * 384 <= 308 * 1920
    assert "V x E + E x H pays for E < 380" in formula   # 30522 * 384 / (30522 + 384) = 379.3
    model = load_teacher("minilm", num_labels=2).model
    queries = [torch.linalg.svdvals(block.query.weight.detach().double()) for block in model.attention]
    expected = sum(float((s[:64] ** 2).sum() / (s ** 2).sum()) for s in queries) / len(queries)
    assert data["spectra"]["Q"]["64"] == pytest.approx(expected, abs=1e-4)
    for by_rank in data["spectra"].values():
        shares = list(by_rank.values())
        assert shares == sorted(shares) and 0 < shares[0] < shares[-1] <= 1
