"""Every registered method has everything the runner, the CLI, compare, explain and the reports ask of it."""

from __future__ import annotations

import importlib
import pkgutil
import string
from dataclasses import fields, is_dataclass

import pytest

from compress.cli.method_flags import method_flags
from compress.models.presets import PAPER_CONFIGS
from compress.registry import WHY_KEYS, Method, StudentMethod, Transform, all_methods, get_method, names
from compress.reports.explain import explain, topics

RATIOS = {"params": 3.5, "flops": 2.0, "size_bytes": 4.1}


def _declared_methods() -> dict[str, Method]:
    """Every method a module under compress/methods holds, found by walking the package's files: what the
    registry must list without being told (it imports only the top level; a family loads its own parts)."""
    import compress.methods

    found: dict[str, Method] = {}
    for module in pkgutil.walk_packages(compress.methods.__path__, "compress.methods."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, Method):
                found[value.name] = value
    return found


def test_the_registry_finds_every_method_module_in_rank_order():
    declared = _declared_methods()
    missed, unheld = set(declared) - set(names()), set(names()) - set(declared)
    assert not missed, f"modules under compress/methods declare {sorted(missed)}; the registry does not list them"
    assert not unheld, f"the registry lists {sorted(unheld)}; no module under compress/methods holds them"
    assert all(get_method(name) is method for name, method in declared.items())
    for kind in ("student", "transform"):
        ranked = sorted((m for m in declared.values() if m.kind == kind), key=lambda m: m.rank)
        assert names(kind) == [m.name for m in ranked]
    assert len(set(m.rank for m in all_methods())) == len(all_methods())


@pytest.mark.parametrize("name", names())
def test_method_has_everything_the_reports_need(name):
    method = get_method(name)
    assert method.kind in ("student", "transform") and method.family and method.label and method.summary
    assert isinstance(method, StudentMethod if method.kind == "student" else Transform)
    # The run-record sentence formats with a run's real ratios and only with them.
    used = {f for _, f, _, _ in string.Formatter().parse(method.why) if f}
    assert used <= set(WHY_KEYS), used
    sentence = method.sentence(RATIOS)
    assert sentence.endswith(".") and "{" not in sentence
    # Options: a dataclass, every field with help, every default makes a valid options object.
    assert is_dataclass(method.options)
    for f in fields(method.options):
        assert f.metadata.get("help"), f"{name}.{f.name} has no help"
    method.make_options({})
    # The explanation `compress explain` shows, on a real teacher shape.
    data = method.explain("bert-base", PAPER_CONFIGS["bert-base"], 128, method.make_options({}))
    assert {"method", "teacher", "student", "ratios", "formula", "notes"} <= set(data)
    assert data["formula"] and data["notes"] and data["method"] == method.explain_topic
    assert method.explain_topic in topics()


def test_every_flag_is_one_option_and_named_once():
    flags = method_flags()
    spelled = [flag for flag, _, _, _ in flags.values()]
    assert len(spelled) == len(set(spelled))
    # The flags the README, tutorial and tests use keep their spelling.
    for flag in ("--embedding-size", "--sharing", "--groups", "--no-dropout", "--hidden-loss", "--layers",
                 "--hidden-size", "--heads", "--ffn-size", "--general-distillation", "--init-from", "--augment",
                 "--backend"):
        assert flag in spelled, flag


def test_options_from_text_are_converted_by_field_type():
    albert = get_method("albert").make_options({"embedding_size": "64", "dropout": "false", "sharing": "ffn"})
    assert (albert.embedding_size, albert.dropout, albert.sharing) == (64, False, "ffn")
    tiny = get_method("tinybert").make_options({"init_from": "none", "augment_copies": "2"})
    assert tiny.init_from is None and tiny.augment_copies == 2
    assert get_method("distilbert").make_options({"init_map": "2,4"}).init_map.layers == (2, 4)


def test_explain_all_lists_topics_and_a_method_name_finds_its_topic():
    # One topic per method or group of methods explained together, in the rank order of their first method.
    assert list(topics()) == list(dict.fromkeys(m.explain_topic for m in all_methods()))
    assert explain("int8", "bert-base")["method"] == "quantize"
