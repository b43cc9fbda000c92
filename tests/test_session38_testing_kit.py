"""The connector testing kit: outputs copied between calls, refusals checked for mutation,
extra model outputs every drawn episode records, exact space comparison, structured NaNs."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, FlattenObservations, Float32RangeError
from episodes.testing import ConnectorContractError, check_connector
from episodes.testing.compare import outputs_equal
from episodes.testing.contracts import (
    check_deterministic,
    check_does_not_mutate,
    check_list_numpy_agree,
    check_lookback_across_cuts,
)
from episodes.testing.suite import ConnectorContract


def _episode(n: int = 4, **kwargs: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=list(range(n + 1)),
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
        **kwargs,
    )


# --- 1. outputs are copied before the next call ------------------------------------------


def _accumulating() -> Any:
    """Returns the same growing list every call: two rows, then four, then six."""
    rows: list[int] = []

    def connector(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
        rows.extend([1, 2])
        return {"rows": rows}

    return connector


def _reused_buffer() -> Any:
    """A correct connector handing out a view into one buffer it overwrites each call."""
    buffer = np.zeros(64, np.int64)

    def connector(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
        obs = np.concatenate([np.asarray(ep.get_observations()[:-1]) for ep in eps]) if eps else []
        buffer[: len(obs)] = obs
        return {"obs": buffer[: len(obs)]}

    return connector


@pytest.mark.parametrize(
    "check",
    [
        lambda c: check_deterministic(c, [_episode()]),
        lambda c: check_list_numpy_agree(c, [_episode()]),
    ],
    ids=["deterministic", "list_numpy"],
)
def test_state_kept_changing_is_not_equal_to_itself(check: Any) -> None:
    with pytest.raises(ConnectorContractError):
        check(_accumulating())


def test_accumulating_connector_fails_the_suite() -> None:
    with pytest.raises(ConnectorContractError):
        check_connector(_accumulating(), observation_space=gym.spaces.Discrete(3), max_examples=5)


@pytest.mark.parametrize("start, stop", [(0, 2), (1, 3), (2, 4), (0, 4)])
def test_view_into_a_reused_buffer_passes_the_cut_check(start: int, stop: int) -> None:
    check_lookback_across_cuts(_reused_buffer(), _episode(), start, stop, 0)
    check_deterministic(_reused_buffer(), [_episode()])


# --- 2. a refusal must leave the inputs unchanged ----------------------------------------

_UNBOUNDED = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)


def _marks_then_refuses(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    for ep in eps:
        ep.custom_data["x"] = 1
    return FlattenObservations()(eps, batch)


def _huge_episode() -> SingleAgentEpisode:
    obs = [np.full(2, 1e300), np.zeros(2)]
    return SingleAgentEpisode(
        observations=obs,
        actions=[0],
        rewards=[1.0],
        observation_space=_UNBOUNDED,
        len_lookback_buffer=0,
    )


def test_mutation_before_a_refusal_is_caught() -> None:
    with pytest.raises(ConnectorContractError, match="before refusing") as info:
        check_does_not_mutate(_marks_then_refuses, [_huge_episode()])
    assert isinstance(info.value.__cause__, Float32RangeError)


def test_clean_refusal_is_raised_again() -> None:
    with pytest.raises(Float32RangeError):
        check_does_not_mutate(FlattenObservations(), [_huge_episode()])


def _marks_then_always_refuses(
    eps: list[SingleAgentEpisode], batch: dict[str, Any]
) -> dict[str, Any]:
    """Refuses every episode with steps (and marks it first); accepts the others."""
    if not any(len(ep) for ep in eps):
        return batch
    for ep in eps:
        ep.custom_data["x"] = 1
    raise Float32RangeError("refused")


@pytest.mark.parametrize("connector", [_marks_then_refuses, _marks_then_always_refuses])
def test_mutation_before_a_refusal_fails_the_suite(connector: Any) -> None:
    with pytest.raises(ConnectorContractError):
        check_connector(connector, observation_space=_UNBOUNDED, max_examples=25)


# --- 3. extra model outputs every drawn episode records ----------------------------------

_VF = {"vf_preds": gym.spaces.Box(-10.0, 10.0, (), np.float32)}
_OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _ppo_columns() -> AddLearnerColumns:
    return AddLearnerColumns(columns=("obs", "actions", "vf_preds"))


def test_ppo_columns_pass_the_suite_when_asked() -> None:
    check_connector(
        _ppo_columns(),
        observation_space=_OBS,
        action_space=gym.spaces.Discrete(2),
        lookback=0,
        max_examples=10,
        extra_model_outputs=_VF,
    )


class TestPPOColumns(ConnectorContract):
    observation_space = _OBS
    action_space = gym.spaces.Discrete(2)
    lookback = 0
    extra_model_outputs = _VF

    def make_connector(self) -> AddLearnerColumns:
        return _ppo_columns()


def test_bad_extra_model_outputs_refused_before_any_contract() -> None:
    with pytest.raises((TypeError, ValueError)):
        check_connector(_ppo_columns(), extra_model_outputs={"vf_preds": 3})


# --- 4. spaces compared exactly ----------------------------------------------------------


def _raise_high(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    eps[0].observation_space.high[0] = 1_000_009
    return batch


def _raise_action_high(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    eps[0].action_space["a"].high[0] = 1_000_009
    return batch


@pytest.mark.parametrize(
    "connector, kwargs",
    [
        (_raise_high, {"observation_space": gym.spaces.Box(0, 1_000_000, (1,), np.int64)}),
        (
            _raise_action_high,
            {
                "observation_space": gym.spaces.Discrete(5),
                "action_space": gym.spaces.Dict(
                    {"a": gym.spaces.Box(0.0, 1_000_000.0, (1,), np.float64)}
                ),
            },
        ),
    ],
    ids=["box", "box_in_dict"],
)
def test_small_change_to_a_space_is_caught(connector: Any, kwargs: dict[str, Any]) -> None:
    space = kwargs.get("action_space")
    actions = [space.sample()] * 4 if space is not None else [0] * 4
    obs_space = kwargs["observation_space"]
    ep = SingleAgentEpisode(
        observations=[obs_space.sample() for _ in range(5)],
        actions=actions,
        rewards=[1.0] * 4,
        len_lookback_buffer=0,
        **kwargs,
    )
    with pytest.raises(ConnectorContractError, match="space"):
        check_does_not_mutate(connector, [ep])


# --- 5. structured arrays holding NaNs ---------------------------------------------------

_RECORDS = [
    np.array([(1.0, np.nan)], dtype=[("x", "f4"), ("y", "f8")]),
    np.array([(np.nan, 2, np.nan + 1j)], dtype=[("x", "f8"), ("n", "i4"), ("c", "c16")]),
    np.array([((np.nan, 1.0),)], dtype=[("p", [("q", "f8"), ("r", "f4")])]),
    np.array([(np.full(2, np.nan),)], dtype=[("v", "f8", (2,))]),
]


@pytest.mark.parametrize("records", _RECORDS, ids=range(len(_RECORDS)))
def test_structured_arrays_with_nans_equal_their_copies(records: np.ndarray) -> None:
    assert outputs_equal(records, records.copy())
    assert outputs_equal({"k": records}, {"k": records.copy()})
    check_deterministic(lambda eps, batch: {"r": records.copy()}, [_episode()])
    changed = records.copy()
    first = records.dtype.names[0]
    changed[first] = np.zeros_like(changed[first])
    assert not outputs_equal(records, changed)


_SPACES = [
    gym.spaces.Box(-np.inf, np.inf, (2,), np.float64),
    gym.spaces.Box(0, 255, (2, 2), np.uint8),
    gym.spaces.Discrete(3, start=-1),
    gym.spaces.MultiDiscrete([2, 3]),
    gym.spaces.MultiBinary(4),
    gym.spaces.Text(5),
    gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(0.0, 1.0, (1,))]),
    gym.spaces.Dict({"b": gym.spaces.Box(0.0, 1.0, (1,)), "a": gym.spaces.Discrete(2)}),
    gym.spaces.Sequence(gym.spaces.Box(0.0, 1.0, (1,)), stack=True),
    gym.spaces.Graph(gym.spaces.Box(0.0, 1.0, (1,)), None),
]


@pytest.mark.parametrize("space", _SPACES, ids=lambda s: type(s).__name__)
def test_untouched_spaces_are_exactly_equal(space: Any) -> None:
    from episodes.testing.snapshot import _space_exact

    assert _space_exact(space, copy.deepcopy(space))
    assert not _space_exact(space, gym.spaces.Discrete(7))
