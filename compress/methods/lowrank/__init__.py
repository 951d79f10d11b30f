"""Low-rank factorization, the survey's fourth family: every attention and FFN matrix W (out x in) replaced by two,
up (out x r) @ down (r x in), where that saves parameters, chosen by plain SVD, Fisher-weighted SVD (Hsu et al.
2022) or activation-aware SVD (SVD-LLM / DRONE), then recovered by distillation from the unfactorized model.

The arithmetic is :mod:`~compress.methods.lowrank.factorize`, the verb :mod:`~compress.methods.lowrank.verb`, the
record :mod:`~compress.methods.lowrank.details` and the report :mod:`~compress.methods.lowrank.report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from compress.errors import CompressError
from compress.methods.lowrank.details import LowRankDetails
from compress.methods.lowrank.options import LowRankOptions
from compress.methods.lowrank.report import compared_sections, report_lines, summary_lines
from compress.models.config import EncoderConfig
from compress.registry import Context, Transform, Transformed, register

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.distill.recipe import Recipe
    from compress.models.encoder import Encoder
    from compress.reports.footprint import Explanation
    from compress.runs.config import RunConfig

WHY = ("Low-rank factorization replaces each matrix by two thinner ones, so parameters fall by {params:.2f}x, "
       "bytes by {size:.2f}x and FLOPs by {flops:.2f}x against {against}: a matrix of rank r costs r (out + in) "
       "weights and multiply-adds per token instead of out x in. The embedding table is untouched unless "
       "--embedding-rank asks, which is why parameters fall less than the matrices do.")

SPECTRUM_RANKS = (8, 16, 32, 64, 128, 192, 256)
LABELS = {"query": "Q", "key": "K", "value": "V", "attention.output": "O", "intermediate": "FFN in",
          "ffn.output": "FFN out"}


def matrix_label(kind: str, name: str) -> str:
    return LABELS.get(name) or LABELS[f"{kind}.{name}"]


def spectra(teacher: str, shape: EncoderConfig) -> dict[str, dict[int, float]] | None:
    """The teacher's real singular-value spectra: per matrix type (Q, K, V, O, FFN in, FFN out), the share of the
    weight energy the first r singular values keep, averaged over the layers; None when its weights are not on
    this machine (nothing is downloaded)."""
    from compress.methods.lowrank.factorize import linear_of, matrices, weighted
    from compress.teachers.registry import load_teacher

    try:
        model = load_teacher(teacher, num_labels=2).model
    except Exception:  # noqa: BLE001 - weights not here (hub not cached, no network): explain what it can
        return None
    energies: dict[str, list[Any]] = {}
    for m in matrices(model):
        energies.setdefault(matrix_label(m.kind, m.name), []).append(weighted(linear_of(model, m).weight.detach()))
    return {label: {r: sum(w.energy(r) for w in found) / len(found) for r in SPECTRUM_RANKS}
            for label, found in energies.items()}


def explain(name: str, tc: EncoderConfig, seq_len: int, options: LowRankOptions) -> Explanation:
    from compress.methods.lowrank.factorize import Matrix, break_even, uniform_ranks
    from compress.reports.footprint import footprint, side_by_side

    h, f, v, e = tc.hidden_size, tc.ffn_size, tc.vocab_size, tc.embedding_size
    square, wide = break_even(h, h), break_even(f, h)
    keep = options.keep
    shapes = [Matrix("attention", 0, "query", h, h), Matrix("ffn", 0, "intermediate", f, h)]
    rank_square, rank_wide = uniform_ranks(shapes, keep).values()   # 0: dense, the rank would pass break-even
    sc = tc.replace(attention_ranks=((rank_square,) * 4,) * tc.num_attention_blocks,
                    ffn_ranks=((rank_wide,) * 2,) * tc.num_ffn_blocks, word_rank=options.embedding_rank or 0)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    albert = break_even(v, h)
    formula = [
        "W (out x in) ~ up (out x r) @ down (r x in): r (out + in) parameters and multiply-adds per token instead "
        "of out x in, smaller when r < out * in / (out + in) (the break-even rank)",
        f"break-even here: Q, K, V, O ({h} x {h}) r < {square + 1}; FFN in and out ({f} x {h}) r < {wide + 1}",
        f"--keep {keep:g} of every matrix (uniform): r = {rank_square or 'dense'} for Q, K, V, O and "
        f"{rank_wide or 'dense'} for the FFN "
        "(the default allocation, energy, gives each matrix its own rank from the same budget)",
        "svd: min ||W - W'||; fisher (FWSVD): min ||diag(sqrt(I)) (W - W')||, I_i = sum of (dL/dW_ij)^2 over batches "
        "and j; activation (SVD-LLM): min ||(W - W') X|| over the layer's real inputs X, by whitening with the "
        "Cholesky factor of X X^T",
        f"ALBERT's factorized embedding is the same operation on the token table: V x H = {v} x {h} -> V x E + E x H "
        f"pays for E < {albert + 1}; --embedding-rank E applies it to any trained model by SVD (E = {e} today)",
    ]
    notes = [
        "Factorization removes arithmetic as well as parameters: each factor is a smaller dense matrix, so the "
        "model is physically smaller, exports to ONNX and quantizes like any other.",
        "The spectra table shows why plain SVD collapses quickly: a trained BERT matrix keeps its energy spread over "
        "many directions, so a rank that halves the parameters drops a large share of it; the Fisher and "
        "activation weightings choose which part of that energy to lose.",
    ]
    out = side_by_side("lowrank", name, teacher, student, formula, notes)
    found = spectra(name, tc)
    if found is None:
        out["lines"] = [f"{name}'s weights are not on this machine: no spectra (the arithmetic above holds)."]
        return out
    out["spectra"] = {label: {str(r): round(share, 4) for r, share in by_rank.items()} for label, by_rank in
                      found.items()}
    out["tables"] = [{"title": f"{name}: share of each matrix's weight energy kept by its first r singular values "
                               "(mean over the layers)",
                      "columns": [["matrix", "left"], *([f"r = {r}", "right"] for r in SPECTRUM_RANKS)],
                      "rows": [[label, *(f"{by_rank[r]:.0%}" for r in SPECTRUM_RANKS)]
                               for label, by_rank in found.items()]}]
    return out


def check(config: RunConfig, options: LowRankOptions) -> None:
    """Every check that needs no data, against the model it will be given when that exists already."""
    from compress.methods.lowrank.verb import check_shape
    from compress.models.checkpoints import read_config
    from compress.teachers.registry import teacher_config

    if config.epochs or config.lr or config.layer_map or config.patience:
        raise CompressError("lowrank recovers with --recovery-epochs and --recovery-lr; --epochs, --lr, --layer-map "
                            "and --patience do not apply.")
    check_shape(options, teacher_config(config.teacher) if config.target == "teacher" else
                read_config(Path(config.target) / "student")[0])


def check_input(options: LowRankOptions, shape: EncoderConfig) -> None:
    from compress.methods.lowrank.verb import check_shape

    check_shape(options, shape)


def shape(options: LowRankOptions, tc: EncoderConfig, context: Context) -> EncoderConfig:
    """The shape --keep (or --rank) gives with every matrix keeping the same share (the energy allocation spends the
    same budget, matrix by matrix)."""
    from dataclasses import replace

    from compress.methods.lowrank.factorize import config_matrices
    from compress.methods.lowrank.verb import choose_ranks, factorized_config

    uniform = replace(options, allocation="uniform")
    return factorized_config(tc, choose_ranks(uniform, config_matrices(tc), {}), options.embedding_rank or 0)


def recovery(options: LowRankOptions, tc: EncoderConfig) -> Recipe:
    from compress.methods.lowrank.verb import recovery_recipe

    return recovery_recipe(options, tc.num_layers)


def apply(model: Encoder, options: LowRankOptions, context: Context) -> Transformed:
    from compress.methods.lowrank.verb import apply as factorize

    return factorize(model, options, context)


METHOD = register(Transform(
    name="lowrank", rank=97, family="low-rank factorization",
    label="low-rank factorization (SVD of every matrix)",
    summary="every attention and FFN matrix as two thinner ones (plain, Fisher-weighted or activation-aware SVD), "
            "recovered by distillation",
    options=LowRankOptions, why=WHY, explain=explain, takes="fp32", gives="fp32", run_kind="lowrank",
    details=LowRankDetails, summary_lines=summary_lines, report_lines=report_lines,
    compared_sections=compared_sections, check=check, check_input=check_input, apply=apply, shape=shape,
    recovery=recovery,
    not_before={"prune": "pruning scores and slices dense heads and neurons, and after lowrank they are factors; "
                         "prune first, then factorize what is left (prune+lowrank)",
                "lowrank": "the model is already factorized; factorize once, with the rank you want"},
))
