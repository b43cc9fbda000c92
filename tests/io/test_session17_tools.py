"""split / filter_dataset / merge argument checks: numpy numbers taken, wrong types refused.

Every refusal names the argument and comes before anything is written (the destination is not
made). split's seed follows the package's seed rule (contract §8): an int >= 0, numpy ints
taken, floats, bools, strings and negative ints refused.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetWriter, dataset_info, filter_dataset, merge, read_episodes, split


def _episode(id_: str, *, terminated: bool = False) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
        terminated=terminated,
    )


@pytest.fixture
def source(tmp_path: Path) -> Path:
    with DatasetWriter(tmp_path / "src", sync=False) as writer:
        writer.write_many([_episode(str(i), terminated=i % 2 == 0) for i in range(6)])
    return tmp_path / "src"


# ----------------------------------------------------------------------------------- split
NUMPY_SPLITS = {
    "numpy_float_fraction": ({"fraction": np.float64(0.5)}, 0.5, 0),
    "numpy_float32_fraction": ({"fraction": np.float32(0.25)}, 0.25, 0),
    "numpy_int_seed": ({"seed": np.int64(3)}, 0.1, 3),
    "int_fraction": ({"fraction": 1}, 1.0, 0),
}


@pytest.mark.parametrize(("kwargs", "fraction", "seed"), NUMPY_SPLITS.values(), ids=NUMPY_SPLITS)
def test_split_takes_numpy_numbers_and_stores_plain_ones(source, tmp_path, kwargs, fraction, seed):
    n_train, n_val = split(source, tmp_path / "a", tmp_path / "b", **kwargs)
    assert n_train + n_val == 6
    stored = json.loads(json.dumps(dataset_info(tmp_path / "b").metadata))["user"]["split"]
    assert stored["fraction"] == fraction and type(stored["fraction"]) is float
    assert stored["seed"] == seed and type(stored["seed"]) is int


def test_split_by_numpy_seed_matches_split_by_int_seed(source, tmp_path):
    by_numpy = split(source, tmp_path / "a", tmp_path / "b", fraction=0.5, seed=np.int64(7))
    by_int = split(source, tmp_path / "c", tmp_path / "d", fraction=0.5, seed=7)
    assert by_numpy == by_int
    ids = [[e.id_ for e in read_episodes(tmp_path / name)] for name in "bd"]
    assert ids[0] == ids[1]


BAD_SPLITS = {
    "str_fraction": ({"fraction": "0.5"}, TypeError, "fraction must be a real number"),
    "bool_fraction": ({"fraction": True}, TypeError, "fraction must be a real number"),
    "numpy_bool_fraction": ({"fraction": np.True_}, TypeError, "fraction must be a real number"),
    "none_fraction": ({"fraction": None}, TypeError, "fraction must be a real number"),
    "fraction_above_one": ({"fraction": 1.5}, ValueError, r"fraction must be in \[0, 1\]"),
    "nan_fraction": ({"fraction": float("nan")}, ValueError, r"fraction must be in \[0, 1\]"),
    "float_seed": ({"seed": 1.5}, ValueError, "seed must be an int >= 0, got 1.5"),
    "str_seed": ({"seed": "x"}, ValueError, "seed must be an int >= 0, got 'x'"),
    "negative_seed": ({"seed": -1}, ValueError, "seed must be an int >= 0, got -1"),
    "bool_seed": ({"seed": True}, ValueError, "seed must be an int >= 0, got True"),
    "none_seed": ({"seed": None}, ValueError, "seed must be an int >= 0, got None"),
}


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_SPLITS.values(), ids=BAD_SPLITS)
def test_split_refuses_bad_fraction_or_seed_before_writing(
    source, tmp_path, kwargs, error, message
):
    with pytest.raises(error, match=message):
        split(source, tmp_path / "a", tmp_path / "b", **kwargs)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_split_command_refuses_a_negative_seed(source, tmp_path, capsys):
    args = ["split", str(source), "--train", str(tmp_path / "a"), "--val", str(tmp_path / "b")]
    assert main([*args, "--seed", "-5"]) == 1
    assert "--seed must be >= 0" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# -------------------------------------------------------------------------- filter_dataset
BAD_FILTERS = {
    "str_done_only": ({"done_only": "no"}, TypeError, "done_only must be a bool"),
    "int_done_only": ({"done_only": 1}, TypeError, "done_only must be a bool"),
    "str_min_return": ({"min_return": "1"}, TypeError, "min_return must be a real number"),
    "bool_max_return": ({"max_return": True}, TypeError, "max_return must be a real number"),
    "float_min_length": ({"min_length": 2.5}, TypeError, "min_length must be an int"),
    "str_max_length": ({"max_length": "3"}, TypeError, "max_length must be an int"),
    "list_custom_data": ({"custom_data": [("k", 1)]}, TypeError, "custom_data must be a mapping"),
    "str_predicate": ({"predicate": "done"}, TypeError, "predicate must be callable"),
    "numpy_nan_min_return": ({"min_return": np.float64("nan")}, ValueError, "min_return"),
}


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_FILTERS.values(), ids=BAD_FILTERS)
def test_filter_refuses_wrong_argument_types_before_writing(
    source, tmp_path, kwargs, error, message
):
    with pytest.raises(error, match=message):
        filter_dataset(source, tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


GOOD_FILTERS = {
    "numpy_bool_done_only": ({"done_only": np.True_}, ["0", "2", "4"]),
    "numpy_float_min_return": ({"min_return": np.float64(1.0)}, [str(i) for i in range(6)]),
    "numpy_int_max_length": ({"max_length": np.int64(0)}, []),
    "numpy_int_min_return_above": ({"min_return": np.int64(2)}, []),
    "fraction_min_return": ({"min_return": Fraction(1, 1)}, [str(i) for i in range(6)]),
    "decimal_min_return_above": ({"min_return": Decimal("2")}, []),
}


@pytest.mark.parametrize(("kwargs", "kept"), GOOD_FILTERS.values(), ids=GOOD_FILTERS)
def test_filter_takes_numpy_numbers_and_bools(source, tmp_path, kwargs, kept):
    filter_dataset(source, tmp_path / "out", **kwargs)
    assert [e.id_ for e in read_episodes(tmp_path / "out")] == kept


# ----------------------------------------------------------------------------------- merge
@pytest.mark.parametrize(
    "wrap", [str, Path, lambda p: str(p).encode()], ids=["str", "path", "bytes"]
)
def test_merge_refuses_one_path_for_sources(source, tmp_path, wrap):
    with pytest.raises(TypeError, match="sources must be a list of dataset paths.*pass \\["):
        merge(wrap(source), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_merge_refuses_a_source_that_is_no_path(source, tmp_path):
    with pytest.raises(TypeError, match=r"sources\[1\] must be a path"):
        merge([source, 3], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_merge_takes_a_tuple_or_generator_of_sources(source, tmp_path):
    assert merge((source,), tmp_path / "a") == 6
    assert merge(iter([source]), tmp_path / "b") == 6
    assert dataset_info(tmp_path / "b").metadata["user"]["merged_from"] == [str(source)]
