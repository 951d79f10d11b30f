"""Teacher registry: aliases -> bundled package, hub id or local directory."""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "registry": ["DEFAULT_TEACHER", "TEACHERS", "TeacherSpec", "load_teacher", "load_tokenizer", "resolve_teacher_dir",
        "teacher_config", "teacher_spec", "weights_available"],
})
