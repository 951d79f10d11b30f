"""What a compression method is and how the rest of compress finds one: the registry
(:mod:`compress.registry.method`), the transform contract (:mod:`compress.registry.contract`) and pipelines of
methods (:mod:`compress.registry.pipeline`). The families themselves are the packages of :mod:`compress.methods`;
this package sits below them and below the runs and reports that ask for them."""

from compress.registry.contract import Artefact, Context, Details, Section, TrainSettings, Transformed
from compress.registry.method import (
    WHY_KEYS,
    Method,
    Preparation,
    StageTurn,
    StudentMethod,
    Transform,
    all_methods,
    convert,
    default_of,
    details_class,
    families,
    field_type,
    flag_for,
    flag_of,
    format_value,
    get_method,
    names,
    option_fields,
    optional,
    register,
)

__all__ = ["WHY_KEYS", "Artefact", "Context", "Details", "Method", "Preparation", "Section", "StageTurn",
           "StudentMethod", "TrainSettings", "Transform", "Transformed", "all_methods", "convert", "default_of",
           "details_class", "families", "field_type", "flag_for", "flag_of", "format_value", "get_method", "names",
           "option_fields", "optional", "register"]
