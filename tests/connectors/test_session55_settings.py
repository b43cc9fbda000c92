"""Every documented connector setting is checked when assigned later, as the constructor checks it.

``MeanStdFilter`` checked its settings on assignment; the others took ``conn.inference =
"no"``, ``stack.n = 0`` or ``prev.fill = None`` silently, to fail (or read wrongly) on a later
call. Now each setting has one check (``episodes.connectors.checked_settings``): a bad value
is the constructor's error and the old value stays; a good one takes effect.
"""

from __future__ import annotations

import copy
import pickle
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    EpisodeConnector,
    FlattenObservations,
    FrameStack,
    MeanStdFilter,
    PrevActionsPrevRewards,
)
from episodes.connectors.checked_settings import CheckedSettings

MAKERS: dict[str, Callable[..., Any]] = {
    "EpisodeConnector": EpisodeConnector,
    "FlattenObservations": FlattenObservations,
    "FrameStack": lambda **kw: FrameStack(2, **kw),
    "PrevActionsPrevRewards": PrevActionsPrevRewards,
    "MeanStdFilter": MeanStdFilter,
    "AddLearnerColumns": AddLearnerColumns,
}

FLAG_BAD = [1, 0, "no", None, np.array(True), 1.0]
KEY_BAD = [None, 3, b"obs", ("obs",)]

# (class, setting) -> bad values; each the constructor refuses with the same error.
BAD: dict[tuple[str, str], list[Any]] = {
    ("EpisodeConnector", "inference"): FLAG_BAD,
    ("FlattenObservations", "inference"): FLAG_BAD,
    ("FlattenObservations", "one_hot_discrete"): FLAG_BAD,
    ("FlattenObservations", "out_key"): KEY_BAD,
    ("FrameStack", "inference"): FLAG_BAD,
    ("FrameStack", "n"): [0, -1, 2.0, True, np.float64(3), "2", None, np.array([2])],
    ("FrameStack", "fill"): [None],
    ("FrameStack", "flatten"): FLAG_BAD,
    ("FrameStack", "out_key"): KEY_BAD,
    ("PrevActionsPrevRewards", "inference"): FLAG_BAD,
    ("PrevActionsPrevRewards", "n_actions"): [-1, 1.5, True, "1", None],
    ("PrevActionsPrevRewards", "n_rewards"): [-1, 1.5, np.True_, "1", None],
    ("PrevActionsPrevRewards", "fill"): [None],
    ("PrevActionsPrevRewards", "one_hot_discrete"): FLAG_BAD,
    ("MeanStdFilter", "inference"): FLAG_BAD,
    ("MeanStdFilter", "update"): FLAG_BAD,
    ("MeanStdFilter", "clip"): [0, -1.0, float("nan"), float("inf"), True, "1"],
    ("MeanStdFilter", "eps"): [0, -1e-6, None, float("nan"), True, "1"],
    ("MeanStdFilter", "out_key"): KEY_BAD,
    ("AddLearnerColumns", "columns"): ["obs", [1], ["obs", None], (b"obs",)],
    ("AddLearnerColumns", "extra_model_outputs"): FLAG_BAD,
}

# The constructor's keyword for a setting where it differs (FrameStack's n is positional).
_POSITIONAL = {("FrameStack", "n"): lambda value: FrameStack(value)}

BAD_CASES = [
    pytest.param(cls, name, value, id=f"{cls}.{name}={value!r}")
    for (cls, name), values in BAD.items()
    for value in values
]


def _constructor_error(cls: str, name: str, value: Any) -> BaseException:
    make = _POSITIONAL.get((cls, name), lambda v: MAKERS[cls](**{name: v}))
    with pytest.raises((TypeError, ValueError)) as info:
        make(value)
    return info.value


@pytest.mark.parametrize(("cls", "name", "value"), BAD_CASES)
def test_bad_value_assigned_is_the_constructors_error_and_keeps_the_old(
    cls: str, name: str, value: Any
) -> None:
    expected = _constructor_error(cls, name, value)
    conn = MAKERS[cls]()
    before = copy.deepcopy(vars(conn))
    with pytest.raises(type(expected), match=re.escape(str(expected))):
        setattr(conn, name, value)
    assert vars(conn).keys() == before.keys()
    assert all(
        type(vars(conn)[key]) is type(before[key]) and repr(vars(conn)[key]) == repr(before[key])
        for key in before
        if not key.startswith("_")
    )


# (class, setting) -> (good value given, value kept)
GOOD: dict[tuple[str, str], tuple[Any, Any]] = {
    ("EpisodeConnector", "inference"): (np.True_, True),
    ("FlattenObservations", "inference"): (True, True),
    ("FlattenObservations", "one_hot_discrete"): (np.False_, False),
    ("FlattenObservations", "out_key"): ("flat", "flat"),
    ("FrameStack", "inference"): (np.True_, True),
    ("FrameStack", "n"): (np.int64(3), 3),
    ("FrameStack", "fill"): (-1.0, -1.0),
    ("FrameStack", "flatten"): (np.True_, True),
    ("FrameStack", "out_key"): ("frames", "frames"),
    ("PrevActionsPrevRewards", "inference"): (True, True),
    ("PrevActionsPrevRewards", "n_actions"): (np.int32(0), 0),
    ("PrevActionsPrevRewards", "n_rewards"): (3, 3),
    ("PrevActionsPrevRewards", "fill"): (-1.0, -1.0),
    ("PrevActionsPrevRewards", "one_hot_discrete"): (np.False_, False),
    ("MeanStdFilter", "inference"): (np.True_, True),
    ("MeanStdFilter", "update"): (np.False_, False),
    ("MeanStdFilter", "clip"): (None, None),
    ("MeanStdFilter", "eps"): (np.float32(0.5), 0.5),
    ("MeanStdFilter", "out_key"): ("norm", "norm"),
    ("AddLearnerColumns", "columns"): (["obs", "rewards"], ("obs", "rewards")),
    ("AddLearnerColumns", "extra_model_outputs"): (np.False_, False),
}


def test_every_bad_table_entry_has_a_good_one() -> None:
    assert BAD.keys() == GOOD.keys()
    for cls, make in MAKERS.items():
        checked = set(type(make()).setting_checks)
        assert checked == {name for c, name in BAD if c == cls}, cls


@pytest.mark.parametrize(("cls", "name"), list(GOOD), ids=[f"{c}.{n}" for c, n in GOOD])
def test_good_value_assigned_is_kept_as_the_constructor_keeps_it(cls: str, name: str) -> None:
    given, kept = GOOD[(cls, name)]
    conn = MAKERS[cls]()
    setattr(conn, name, given)
    value = getattr(conn, name)
    assert value == kept and type(value) is type(kept)
    made = _POSITIONAL.get((cls, name), lambda v: MAKERS[cls](**{name: v}))(given)
    assert getattr(made, name) == value and type(getattr(made, name)) is type(value)


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[1, 0],
        rewards=[1.0, 2.0],
        observation_space=gym.spaces.Discrete(3),
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )


def test_assigned_settings_take_effect_on_the_next_call() -> None:
    ep = _episode()
    stack = FrameStack(2)
    stack.n, stack.fill, stack.out_key, stack.inference = 3, -1, "frames", True
    assert stack([ep], {})["frames"].tolist() == [[0, 1, 2]]
    stack.inference, stack.flatten = False, True
    assert stack([ep], {})["frames"].shape == (2, 9)

    flat = FlattenObservations()
    flat.one_hot_discrete = False
    assert flat([ep], {})["obs"].tolist() == [[0.0], [1.0]]

    prev = PrevActionsPrevRewards()
    prev.n_actions, prev.n_rewards, prev.fill, prev.one_hot_discrete = 0, 2, -1.0, False
    out = prev([ep], {})
    assert "prev_n_actions" not in out and out["prev_n_rewards"].tolist() == [[-1, -1], [-1, 1]]

    learner = AddLearnerColumns()
    learner.columns = ["rewards"]
    assert list(learner([ep], {})) == ["rewards"]


def test_copies_and_pickles_keep_the_checked_settings() -> None:
    stack = FrameStack(4, flatten=True, inference=True)
    for twin in (copy.copy(stack), copy.deepcopy(stack), pickle.loads(pickle.dumps(stack))):
        assert (twin.n, twin.flatten, twin.inference) == (4, True, True)
        with pytest.raises(TypeError, match="inference must be a bool"):
            twin.inference = "no"


def test_shared_filter_checks_its_own_settings() -> None:
    learner = MeanStdFilter()
    acting = learner.shared(inference=True)
    with pytest.raises(TypeError, match="update must be a bool"):
        acting.update = 1
    assert acting.update is True and learner.inference is False


def test_a_subclass_adds_its_settings_to_those_it_inherits() -> None:
    def positive(value: Any) -> Any:
        if value <= 0:
            raise ValueError(f"Scaled's scale must be > 0, got {value!r}")
        return value

    class Scaled(FlattenObservations, scale=positive):
        def __init__(self, scale: float) -> None:
            super().__init__()
            self.scale = scale

    conn = Scaled(2.0)
    assert set(Scaled.setting_checks) == {"inference", "one_hot_discrete", "out_key", "scale"}
    with pytest.raises(ValueError, match="scale must be > 0"):
        conn.scale = 0
    with pytest.raises(TypeError, match="out_key must be a str"):
        conn.out_key = None
    assert (conn.scale, conn.out_key) == (2.0, "obs")
    # Settings of one class are not another's: the parent takes any attribute of that name.
    plain = FlattenObservations()
    plain.scale = 0
    assert plain.scale == 0 and issubclass(FlattenObservations, CheckedSettings)
