"""Student builders: the shape of each compressed student, derived from the teacher's."""

from compress.students.albert import albert_config
from compress.students.distilbert import distilbert_config
from compress.students.tinybert import tinybert_config

__all__ = ["albert_config", "distilbert_config", "tinybert_config"]
