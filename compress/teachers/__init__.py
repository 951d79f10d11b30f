"""Teacher registry: aliases -> bundled package, hub id or local directory."""

from compress.teachers.registry import (
    DEFAULT_TEACHER,
    TEACHERS,
    TeacherSpec,
    load_teacher,
    load_tokenizer,
    resolve_teacher_dir,
    teacher_config,
    teacher_spec,
    weights_available,
)

__all__ = [
    "DEFAULT_TEACHER", "TEACHERS", "TeacherSpec", "load_teacher", "load_tokenizer",
    "resolve_teacher_dir", "teacher_config", "teacher_spec", "weights_available",
]
