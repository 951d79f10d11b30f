"""Parameters, bytes and FLOPs of a model shape, and the teacher-vs-student block every explanation shares.

Nothing here needs weights or a network: parameters are counted on the meta device, FLOPs analytically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.config import EncoderConfig, EncoderConfigData


@dataclass(frozen=True)
class Footprint:
    """Parameters, bytes and FLOPs of one model shape at one precision."""

    config: EncoderConfig
    params: int                     # embeddings + encoder + pooler (as transformers counts a BertModel)
    params_by_component: dict[str, int]
    classifier_params: int
    flops: int                      # per sequence of seq_len tokens
    size_bytes: int

    def to_dict(self) -> FootprintData:
        return FootprintData(config=self.config.to_dict(), params=self.params,
                             params_by_component=self.params_by_component,
                             classifier_params=self.classifier_params, flops=self.flops, size_bytes=self.size_bytes)


class ExplainTable(TypedDict):
    """A method's own table in its explanation: columns as [name, "left" or "right"], rows of text."""

    title: str
    columns: list[list[str]]
    rows: list[list[str]]


class FootprintData(TypedDict, total=False):
    """:meth:`Footprint.to_dict`; the teacher's also has its ``name``."""

    name: str
    config: EncoderConfigData       # EncoderConfig.to_dict()
    params: int
    params_by_component: dict[str, int]
    classifier_params: int
    flops: int
    size_bytes: int


class AblationCell(TypedDict, total=False):
    """ALBERT's parameters at one embedding size and sharing (with the paper's count, where it gives one)."""

    embedding_size: int
    sharing: str
    params: int
    paper: str


class PaperModel(TypedDict):
    """One row of the ALBERT paper's Table 2, counted by our encoder."""

    model: str
    params: int
    paper: str
    layers: int
    hidden: int
    embedding: int
    sharing: str


class KeptTokens(TypedDict):
    count: int | None               # None: not known on this machine
    source: str                     # where the count comes from, in words


class Explanation(TypedDict, total=False):
    """`compress explain METHOD --json`: what :func:`side_by_side` makes for every method, and what some add.

    tables, lines   the method's own tables and sentences, rendered after the side-by-side table
    the rest        the method's own data behind them (ALBERT's ablations, quantization's sizes, ...)
    """

    method: str
    seq_len: int
    teacher: FootprintData
    student: FootprintData
    ratios: dict[str, float]
    formula: list[str]
    notes: list[str]
    tables: list[ExplainTable]
    lines: list[str]
    ablation: list[AblationCell]
    paper_ablation: list[AblationCell]
    paper_table2: list[PaperModel]
    backend: str
    precisions: dict[str, int]
    kept_tokens: KeptTokens
    spectra: dict[str, dict[str, float]]   # low-rank: per matrix type, weight energy kept at rank r


def footprint(config: EncoderConfig, seq_len: int) -> Footprint:
    """A shape's footprint, its size in fp32 (what each quantization stores: compress.quantize.sizes)."""
    count = count_parameters(config)
    size = count.total * 4
    return Footprint(config, count.backbone, count.by_component, count.classifier,
                     flops_per_sequence(config, seq_len), size)


def _ratio(a: int, b: int) -> float:
    return round(a / b, 3) if b else float("inf")


def side_by_side(method: str, teacher_name: str, teacher: Footprint, student: Footprint,
                 formula: list[str], notes: list[str]) -> Explanation:
    """The explanation every method gives: both footprints, their ratios, the formula and notes."""
    return Explanation(
        method=method, teacher={"name": teacher_name, **teacher.to_dict()}, student=student.to_dict(),
        ratios={"params": _ratio(teacher.params, student.params), "flops": _ratio(teacher.flops, student.flops),
                "size": _ratio(teacher.size_bytes, student.size_bytes)},
        formula=formula, notes=notes)
