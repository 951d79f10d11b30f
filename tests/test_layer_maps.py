"""Layer maps: TinyBERT's g(m), the last layers, explicit lists, DistilBERT's every other layer."""

from __future__ import annotations

import json

import pytest
from helpers import tiny_config

from compress.distill.layer_maps import LAYER_MAP_KINDS, LayerMap, teacher_blocks, teacher_layers
from compress.students import distilbert_config


def test_uniform_is_tinyberts_g_of_m():
    assert teacher_layers(LayerMap("uniform"), 4, 12) == [0, 3, 6, 9, 12]
    assert teacher_layers(LayerMap("uniform"), 6, 12) == [0, 2, 4, 6, 8, 10, 12]
    assert teacher_layers(LayerMap("uniform"), 12, 12) == list(range(13))
    assert teacher_blocks(LayerMap("uniform"), 4, 12) == [2, 5, 8, 11]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 8, 12, 24])
def test_uniform_equals_tinybert_code_when_m_divides_n(n):
    for m in range(1, n + 1):
        if n % m == 0:
            stride = n // m  # TinyBERT's code: layer m -> m * int(N / M)
            assert teacher_layers(LayerMap(), m, n) == [k * stride for k in range(m + 1)]


def test_uniform_floors_when_m_does_not_divide_n():
    assert teacher_layers(LayerMap(), 5, 12) == [0, 2, 4, 7, 9, 12]
    assert teacher_layers(LayerMap(), 4, 6) == [0, 1, 3, 4, 6]
    for n in range(1, 25):
        for m in range(1, n + 1):
            g = teacher_layers(LayerMap(), m, n)
            assert g[-1] == n and all(a < b for a, b in zip(g, g[1:]))


def test_last_layers():
    assert teacher_layers(LayerMap("last"), 4, 12) == [0, 9, 10, 11, 12]
    assert teacher_blocks(LayerMap("last"), 2, 6) == [4, 5]


def test_explicit():
    layer_map = LayerMap.explicit([2, 5, 8, 12])
    assert teacher_layers(layer_map, 4, 12) == [0, 2, 5, 8, 12]
    assert teacher_blocks(layer_map, 4, 12) == [1, 4, 7, 11]
    # DistilBERT's released extraction kept both ends: teacher layers 0, 2, 4, 7, 9, 11 (0-based)
    distilbert_release = LayerMap.explicit([1, 3, 5, 8, 10, 12])
    assert teacher_blocks(distilbert_release, 6, 12) == [0, 2, 4, 7, 9, 11]


def test_every_other():
    assert teacher_layers(LayerMap("every_other"), 3, 6) == [0, 2, 4, 6]
    assert teacher_blocks(LayerMap("every_other"), 3, 6) == [1, 3, 5]  # 2i + 1: the last layer is kept
    assert teacher_layers(LayerMap("every_other"), 6, 12) == [0, 2, 4, 6, 8, 10, 12]
    assert teacher_blocks(LayerMap("every_other"), 3, 5) == [0, 2, 4]  # odd N: 2i, still ending at the last
    assert teacher_layers(LayerMap("every_other"), 1, 1) == [0, 1]


@pytest.mark.parametrize("n", range(1, 25))
def test_every_other_fits_the_distilbert_student_default(n):
    student = distilbert_config(tiny_config(num_layers=n))
    blocks = teacher_blocks(LayerMap("every_other"), student.num_layers, n)
    assert len(blocks) == student.num_layers
    assert blocks[-1] == n - 1
    assert all(b - a == 2 for a, b in zip(blocks, blocks[1:]))


@pytest.mark.parametrize(
    ("layer_map", "m", "n", "message"),
    [
        (LayerMap("uniform"), 13, 12, "at most as many student layers"),
        (LayerMap("last"), 13, 12, "at most as many student layers"),
        (LayerMap("every_other"), 4, 6, "at most 3 student layers"),
        (LayerMap("every_other"), 4, 5, "at most 3 student layers"),
        (LayerMap.explicit([3, 6, 9]), 4, 12, "lists 3 teacher layers but the student has 4"),
        (LayerMap.explicit([3, 6, 9, 13]), 4, 12, r"in 1\.\.12"),
        (LayerMap("uniform"), 0, 12, "student_layers must be a positive integer"),
        (LayerMap("uniform"), 4, 0, "teacher_layers must be a positive integer"),
    ],
)
def test_maps_that_do_not_fit_raise_one_sentence(layer_map, m, n, message):
    with pytest.raises(ValueError, match=message) as info:
        teacher_layers(layer_map, m, n)
    text = str(info.value)
    assert text.endswith(".") and "\n" not in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "every-other"}, "kind must be one of uniform, last, every_other, explicit"),
        ({"kind": "explicit"}, "non-empty list"),
        ({"kind": "explicit", "layers": []}, "non-empty list"),
        ({"kind": "explicit", "layers": [0, 3]}, "integers >= 1"),
        ({"kind": "explicit", "layers": [1.5]}, "integers >= 1"),
        ({"kind": "explicit", "layers": [True]}, "integers >= 1"),
        ({"kind": "uniform", "layers": [1, 2]}, "only used with kind 'explicit'"),
    ],
)
def test_invalid_layer_maps(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LayerMap(**kwargs)


@pytest.mark.parametrize(
    "layer_map", [LayerMap(), LayerMap("last"), LayerMap("every_other"), LayerMap.explicit([2, 4, 12])]
)
def test_json_round_trip(layer_map):
    data = json.loads(json.dumps(layer_map.to_dict()))
    assert LayerMap.from_dict(data) == layer_map
    assert teacher_layers(LayerMap.from_dict(data), 3, 12) == teacher_layers(layer_map, 3, 12)


def test_from_dict_rejects_unknown_fields_and_lists_kinds():
    assert LayerMap.explicit([1, 2]).to_dict() == {"kind": "explicit", "layers": [1, 2]}
    assert LayerMap().to_dict() == {"kind": "uniform", "layers": None}
    with pytest.raises(ValueError, match="unknown layer map field"):
        LayerMap.from_dict({"kind": "uniform", "stride": 2})
    assert LAYER_MAP_KINDS == ("uniform", "last", "every_other", "explicit")


def test_parse_layer_map_reads_kinds_and_lists():
    from compress.distill.layer_maps import parse_layer_map

    assert parse_layer_map("uniform") == LayerMap("uniform")
    assert parse_layer_map("2, 4,6") == LayerMap.explicit([2, 4, 6])
    with pytest.raises(ValueError, match="layer map kind"):
        parse_layer_map("sideways")
