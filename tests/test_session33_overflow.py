"""Pins for numpy warnings that escaped as the error where warnings are errors, and for an
item holding itself, which the structure walk of ``to_numpy`` followed until the stack ran out.

- a finite float Box bound beyond its dtype (a forged space) was read as inf, with an overflow
  warning; it is refused as an int bound out of range is (``ValueError``; a ``DatasetError``
  when read from a dataset);
- ``get_return`` of rewards summing past float max warned (``repr`` showed ``return=?``);
- a replay n-step return past float32 max warned when cast to float32;
- an item holding itself (a list in itself, a dict twice in itself) is a ``ValueError``.

Every test here runs with warnings as errors.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import tree

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, read_episodes
from episodes.io.format import piece_return
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.spaces import batch, space_from_dict, space_to_dict
from tests.io.test_hunt_fixes_hostile import forge_index, write

pytestmark = pytest.mark.filterwarnings("error")


# --------------------------------------------------------------- 1: float Box bounds overflowing
def _box(dtype: str, **bounds: Any) -> dict[str, Any]:
    return dict(space_to_dict(gym.spaces.Box(0, 1, (2,), np.dtype(dtype))), **bounds)


@pytest.mark.parametrize(
    ("dtype", "bounds"),
    [
        ("float32", {"low": [-1e300, 0.0]}),
        ("float32", {"low": [-1e300, "-inf"]}),  # beside a marker (the per-item path)
        ("float32", {"low": -1e300}),  # one value for every entry
        ("float32", {"high": [1.0, 1e300]}),
        ("float32", {"high": [1.0, 10**40]}),  # an int beyond float32, within float64
        ("float32", {"high": [1.0, 3.4028236e38]}),  # rounds to inf, not to float32 max
        ("float16", {"high": [1.0, 70000]}),
        ("float16", {"low": [-1e5, 0.0], "high": [1.0, 1.0]}),
    ],
)
def test_a_finite_float_bound_beyond_its_dtype_is_refused_as_an_int_one_is(dtype, bounds):
    with pytest.raises(ValueError, match=f"values out of range for dtype {dtype}"):
        space_from_dict(_box(dtype, **bounds))


def test_an_int_bound_beyond_its_dtype_is_refused_as_before():
    with pytest.raises(ValueError, match="values out of range for dtype int8"):
        space_from_dict(_box("int8", high=[1, 300]))


@pytest.mark.parametrize(
    ("dtype", "low", "high"),
    [
        ("float32", ["-inf", "-inf"], ["inf", "inf"]),
        ("float32", [float(np.finfo(np.float32).min), 0.0], [3.4028235e38, 1]),  # rounds to max
        ("float16", [-65504.0, 0.0], [65504, 1.0]),
        ("float64", [-1e308, -1.5], [1e308, 1e-320]),
        ("float32", [0.0, 0.0], [1e-50, 1.0]),  # below float32's range: 0, as before
    ],
)
def test_bounds_within_the_dtype_and_infinities_still_decode(dtype, low, high):
    box = space_from_dict(_box(dtype, low=low, high=high))
    expected_low = np.array([float(x) for x in low]).astype(dtype)
    expected_high = np.array([float(x) for x in high]).astype(dtype)
    np.testing.assert_array_equal(box.low, expected_low)
    np.testing.assert_array_equal(box.high, expected_high)
    assert box.dtype == np.dtype(dtype)


def _forged_dataset(root: Path) -> Path:
    ep = SingleAgentEpisode(
        "a", observations=[0.0, 0.5], actions=[0], rewards=[1.0], terminated=True,
        observation_space=gym.spaces.Box(-1, 1, (), np.float32), len_lookback_buffer=0,
    )  # fmt: skip
    write(root, 2, [ep])

    def edit(index: dict[str, Any]) -> None:
        box = next(s for s in index["spaces"] if s and s["low"] == [-1.0])
        box["low"] = [-1e300]  # read as -inf (and a warning) before

    forge_index(root, edit)
    return root


def test_a_dataset_with_such_a_bound_is_corrupt_not_a_warning(tmp_path):
    root = _forged_dataset(tmp_path / "d")
    with pytest.raises(CorruptDatasetError, match="out of range for dtype float32"):
        list(read_episodes(root))


def test_validate_under_warnings_as_errors_reports_it_in_a_line_and_exits_1(tmp_path):
    root = _forged_dataset(tmp_path / "d")
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-m", "episodes", "validate", str(root)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "out of range for dtype float32" in proc.stdout + proc.stderr


# ------------------------------------------------------------ 2: returns summing past float max
@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([1e308, 1e308], math.inf),
        ([-1e308, -1e308], -math.inf),
        (np.array([1e308, 1e308]), math.inf),
        (np.array([[1e308], [1e308]]), math.inf),  # one number per step in an array
        ([np.float64(1e308), 1e308], math.inf),
        ([1e308, 1e308, -math.inf], math.nan),
        ([math.inf, -math.inf], math.nan),
        ([1.0, 2.0], 3.0),
    ],
)
def test_a_return_past_float_max_is_inf_quietly_as_the_writers_give_it(rewards, expected):
    ep = SingleAgentEpisode(
        observations=list(range(len(rewards) + 1)), actions=[0] * len(rewards),
        rewards=rewards, len_lookback_buffer=0,
    )  # fmt: skip
    got = ep.get_return()
    assert got == expected or (math.isnan(got) and math.isnan(expected))
    written = piece_return(ep)
    assert written == got or (math.isnan(written) and math.isnan(got))
    assert "return=?" not in repr(ep)


# --------------------------------------------------- 3: replay n-step returns past float32 max
@pytest.mark.parametrize("buffer_class", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_an_n_step_return_past_float32_max_is_inf_quietly(buffer_class, sign):
    buffer = buffer_class(100)
    rewards = np.full(4, sign * 3e38, np.float32)
    ep = SingleAgentEpisode(
        "e", observations=list(range(5)), actions=[0] * 4, rewards=rewards,
        len_lookback_buffer=0, terminated=True,
    )  # fmt: skip
    buffer.add(ep)
    batch_ = buffer.sample(64, n_step=3, gamma=1.0)
    steps = batch_["n_step"]
    assert batch_["rewards"].dtype == np.float32
    np.testing.assert_array_equal(
        batch_["rewards"], np.where(steps > 1, sign * np.inf, sign * np.float32(3e38))
    )


# ------------------------------------------------------------------ 4: items holding themselves
def _list_in_itself() -> list:
    item: list = [1.0]
    item.append(item)
    return item


def _dict_twice_in_itself() -> dict:
    item: dict = {}
    item["x"] = item
    item["y"] = item
    return item


def _dict_in_a_list_in_itself() -> dict:
    item: dict = {"a": 1.0}
    item["b"] = [item]
    return item


def _tuple_through_a_list() -> tuple:
    inner: list = [1.0]
    item = (inner, 2.0)
    inner.append(item)
    return item


LOOPS = [_list_in_itself, _dict_twice_in_itself, _dict_in_a_list_in_itself, _tuple_through_a_list]


@pytest.mark.parametrize("make", LOOPS)
@pytest.mark.parametrize(
    "arrange",
    [
        lambda loop, other: [loop, loop],
        lambda loop, other: [loop, other],
        lambda loop, other: [other, loop],
        lambda loop, other: [loop],
    ],
    ids=["twice", "first", "second", "alone"],
)
def test_batching_an_item_that_holds_itself_is_a_value_error(make, arrange):
    other = [1.0, [2.0, 3.0]] if isinstance(make(), list) else {"a": 1.0, "b": [0.5]}
    with pytest.raises(ValueError, match="holds itself"):
        batch(arrange(make(), other))


def test_items_holding_one_container_twice_side_by_side_batch_as_copies_of_it_do():
    shared = [1.0, 2.0]
    items = [{"a": shared, "b": (shared, [shared])}, {"a": shared, "b": (shared, [shared])}]
    got, copied = batch(items), batch(copy.deepcopy(items))
    assert tree.flatten(tree.map_structure(np.ndarray.tolist, got)) == tree.flatten(
        tree.map_structure(np.ndarray.tolist, copied)
    )


@pytest.mark.parametrize("column", ["observations", "actions", "extra_model_outputs"])
@pytest.mark.parametrize("make", [*LOOPS[1:]])  # a list in itself is ragged first
def test_to_numpy_refuses_an_item_holding_itself_and_leaves_the_episode_alone(column, make):
    item = make()
    fields: dict[str, Any] = {"observations": [0, 1], "actions": [0], "rewards": [0.0]}
    if column == "observations":
        fields["observations"] = [item, item]
    elif column == "actions":
        fields["actions"] = [item]
    else:
        fields["extra_model_outputs"] = {"m": [item]}
    ep = SingleAgentEpisode(len_lookback_buffer=0, **fields)
    with pytest.raises(ValueError, match="cannot be stacked: .*holds itself"):
        ep.to_numpy()
    assert not ep.is_numpy
    assert ep.get_observations()[-1] is fields["observations"][-1]
    assert ep.get_actions()[-1] is fields["actions"][-1]
    if column == "extra_model_outputs":
        assert ep.get_extra_model_outputs("m")[-1] is item
