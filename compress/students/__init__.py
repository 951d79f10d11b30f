"""Student builders: the shape of each compressed student and its initialisation from the teacher."""

from compress.students.albert import AlbertOptions, albert_config, build_albert
from compress.students.distilbert import DistilBertOptions, build_distilbert, distilbert_config
from compress.students.tinybert import TinyBertOptions, build_tinybert, tinybert_config

__all__ = [
    "AlbertOptions", "DistilBertOptions", "TinyBertOptions", "albert_config", "build_albert",
    "build_distilbert", "build_tinybert", "distilbert_config", "tinybert_config",
]
