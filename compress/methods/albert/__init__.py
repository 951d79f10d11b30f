"""ALBERT (Lan et al. 2020): a factorized embedding (V x E + E x H) and blocks shared across layers,
distilled from the teacher on the logits (and, when asked, the hidden states); with ``--rank r``, relaxed sharing
(each layer adds its own rank-r delta to every shared matrix, :mod:`compress.methods.albert.relaxed`).

Engines: the shape and initialisation in :mod:`compress.students.albert`, the recipe in
:mod:`compress.distill.recipes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.models.config import EncoderConfig
from compress.models.presets import PAPER_ABLATION, PAPER_CONFIGS, PAPER_PARAMS
from compress.registry import StudentMethod, register
from compress.students.albert import AlbertOptions, albert_config, build_albert, options_shape, student_config

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.distill.recipe import Recipe
    from compress.models.encoder import Encoder
    from compress.reports.footprint import AblationCell, ExplainTable, Explanation

WHY = ("Sharing cuts parameters, not FLOPs: every layer still runs, the shared block once per layer. "
       "Here the student has {params:.2f}x fewer parameters and {size:.2f}x fewer bytes, but does "
       "{flops_share:.2f}x the teacher's arithmetic per sequence. The factorized embedding (V x E + E x H) "
       "removes most of the embedding table; sharing removes all but one block. Any speed-up it shows "
       "comes from memory, not arithmetic: one shared block's weights can stay in the CPU's caches where "
       "the teacher streams every layer's weights from memory.")

SHARINGS = ("all", "attention", "ffn", "none")


def explain(name: str, tc: EncoderConfig, seq_len: int, options: AlbertOptions) -> Explanation:
    from compress.models.accounting import count_parameters
    from compress.reports.footprint import footprint, side_by_side

    sc = options_shape(tc, options)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    v, e, h, layers = tc.vocab_size, sc.embedding_size, tc.hidden_size, tc.num_layers
    embedding = (f"factorized embedding: V*H = {v}*{h} = {v * h:,}  ->  V*E + E*H = {v}*{e} + {e}*{h} = "
                 f"{v * e + e * h:,}" if sc.factorized else
                 f"embedding not factorized (E = H = {h}): V*H = {v}*{h} = {v * h:,}")
    a, f = sc.num_attention_blocks, sc.num_ffn_blocks
    formula = [embedding, f"cross-layer sharing ({sc.sharing}, {sc.groups} group(s)): {layers} attention + "
                          f"{layers} FFN blocks  ->  {a} attention + {f} FFN blocks, each run {layers // a} and "
                          f"{layers // f} times"]
    if sc.relaxed:
        shapes = ([(h, h)] * 4 if sc.shares_attention else []) + ([(h, tc.ffn_size)] * 2 if sc.shares_ffn else [])
        per_layer = sum(options.rank * (m + n) for m, n in shapes)
        formula.append(f"relaxed sharing: each of the {layers} layers adds a rank-{options.rank} delta to each of "
                       f"{len(shapes)} shared matrices, r (m + n) each = {per_layer:,} per layer"
                       + (", plus its own bias and layer-norm offsets" if sc.own_norms else ""))
    notes = [
        "Sharing cuts parameters, not FLOPs: every layer still runs, so each shared block is applied once per "
        f"layer that uses it; the student computes {student.flops / teacher.flops:.3f}x the teacher's FLOPs "
        "(the E->H projection even adds a little) and is not faster at inference.",
        "Memory for weights and the size on disk shrink with the parameters; activations do not.",
    ]
    ablation = [
        {"embedding_size": emb, "sharing": sharing,
         "params": count_parameters(albert_config(tc, emb, sharing)).backbone}
        for emb in dict.fromkeys((h, e))
        for sharing in SHARINGS
    ]
    base = PAPER_CONFIGS["bert-base"]
    paper_ablation = [
        {"embedding_size": emb, "sharing": sharing, "paper": PAPER_ABLATION[emb, sharing],
         "params": count_parameters(albert_config(base, emb, sharing)).backbone}
        for emb, sharing in PAPER_ABLATION
    ]
    paper = [
        {"model": key, "params": count_parameters(cfg).backbone, "paper": PAPER_PARAMS[key],
         "layers": cfg.num_layers, "hidden": cfg.hidden_size, "embedding": cfg.embedding_size,
         "sharing": cfg.sharing}
        for key, cfg in PAPER_CONFIGS.items()
    ]
    out = side_by_side("albert", name, teacher, student, formula, notes)
    out["ablation"] = ablation
    out["paper_ablation"] = paper_ablation
    out["paper_table2"] = paper
    out["tables"] = [
        _ablation_table(ablation, "Sharing x embedding size on the teacher's shape"),
        _ablation_table(paper_ablation, "The same on ALBERT-base, beside the paper's Tables 3-4 (V = 30000)"),
        {"title": "ALBERT paper Table 2, counted by our encoder (V = 30000)",
         "columns": [["model", "left"], ["L", "right"], ["H", "right"], ["E", "right"], ["sharing", "left"],
                     ["ours", "right"], ["paper", "right"]],
         "rows": [[row["model"], str(row["layers"]), str(row["hidden"]), str(row["embedding"]), row["sharing"],
                   _millions(row["params"]), row["paper"]] for row in paper]},
    ]
    return out


def _millions(n: int) -> str:
    return f"{n / 1e6:,.2f}M"


def _ablation_table(rows: list[AblationCell], title: str) -> ExplainTable:
    """Parameters by embedding size (rows) and sharing (columns), with the paper's count beside ours if given."""
    by_e: dict[int, dict[str, str]] = {}
    for row in rows:
        cell = _millions(row["params"]) + (f" (paper {row['paper']})" if "paper" in row else "")
        by_e.setdefault(row["embedding_size"], {})[row["sharing"]] = cell
    return {"title": title,
            "columns": [["E", "right"], *([f"{s}-shared" if s != "none" else "not shared", "right"] for s in SHARINGS)],
            "rows": [[str(e), *(cells[s] for s in SHARINGS)] for e, cells in by_e.items()]}


def build(teacher: Encoder, options: AlbertOptions) -> Encoder:
    """The student of :func:`build_albert`; with ``--delta-init svd``, its deltas started from the teacher's
    residuals (from a pre-trained encoder, ``--init-from``, they start at zero)."""
    student = build_albert(teacher, options)
    if student.config.relaxed and options.delta_init == "svd" and not options.init_from:
        from compress.methods.albert.relaxed import deltas_from_teacher

        deltas_from_teacher(teacher, student)
    return student


# Epochs of the relaxed student (--rank): with its deltas its training loss still falls after three epochs, where
# the strict one has stopped (MR, rank 48: seed 13 went from 96.3% of the teacher after three epochs to 97.3% after
# five; seeds 14 and 15 keep 96.5% and 96.8% after five; docs/tutorial.md, section 5). The strict student keeps the
# recipe's three: round 2 measured no gain from six.
RELAXED_EPOCHS = 5


def recipe(options: AlbertOptions) -> Recipe:
    from compress.distill.recipes import albert_recipe

    # albert_recipe's epochs are its logit stage's: an intermediate stage keeps its own.
    longer = {"epochs": RELAXED_EPOCHS} if options.rank else {}
    return albert_recipe(hidden_loss=options.hidden_loss, intermediate_epochs=options.intermediate_epochs, **longer)


METHOD = register(StudentMethod(
    name="albert", rank=10, family="parameter efficiency",
    label="ALBERT (factorized embedding, shared layers)",
    summary="factorized embedding + cross-layer sharing (relaxed by per-layer low-rank deltas with --rank), "
            "distilled on the logits",
    options=AlbertOptions, why=WHY, explain=explain,
    student_config=student_config,
    build=build, recipe=recipe, copies=lambda o: o.augment_copies,
))
