"""Fixes to the testing toolkit: bfloat16 rows, Dict key order, container changes, numpy=True
refusals with strategies, and objects deepcopy refuses in the mutation check."""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.testing import (
    ConnectorContractError,
    check_connector,
    check_deterministic,
    check_does_not_mutate,
    check_list_numpy_agree,
    check_lookback_across_cuts,
    outputs_equal,
)
from episodes.testing.strategies import episodes, items


# ------------------------------------------------------------------- bfloat16 rows across cuts
def _four_steps() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 0, 0], rewards=[0.0] * 3,
        len_lookback_buffer=0,
    )  # fmt: skip


def _obs_rows(dtype_name: str, per_observation: bool = False) -> Any:
    torch = pytest.importorskip("torch")

    def connector(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
        obs = eps[0].get_observations()
        rows = obs if per_observation else obs[:-1]
        return {"obs": torch.tensor([float(o) for o in rows], dtype=getattr(torch, dtype_name))}

    return connector


def _own_rows(dtype_name: str) -> Any:  # ignores the chunk: always rows 0.. of its own
    torch = pytest.importorskip("torch")
    return lambda eps, batch: {"obs": torch.arange(len(eps[0]), dtype=getattr(torch, dtype_name))}


@pytest.mark.parametrize(
    ("name", "make", "row_keys", "error"),
    [
        ("bf16 steps, row_keys", lambda: _obs_rows("bfloat16"), ["obs"], None),
        ("bf16 observations, row_keys", lambda: _obs_rows("bfloat16", True), ["obs"], None),
        ("bf16 steps", lambda: _obs_rows("bfloat16"), None, None),
        ("wrong bf16 rows", lambda: _own_rows("bfloat16"), None, "values differ"),
        ("wrong bf16 rows, row_keys", lambda: _own_rows("bfloat16"), ["obs"], "values differ"),
        ("wrong f32 rows", lambda: _own_rows("float32"), None, "values differ"),
    ],
)
def test_lookback_across_cuts_compares_bfloat16_rows(
    name: str, make: Any, row_keys: Any, error: str | None
) -> None:
    connector = make()
    if error is None:
        check_lookback_across_cuts(connector, _four_steps(), 1, 3, lookback=0, row_keys=row_keys)
    else:
        with pytest.raises(ConnectorContractError, match=error):
            check_lookback_across_cuts(
                connector, _four_steps(), 1, 3, lookback=0, row_keys=row_keys
            )


# -------------------------------------------------------------------------- Dict key order
_DICT = gym.spaces.Dict(
    {
        "a": gym.spaces.Box(0, 1, (1,), np.float32),
        "b": gym.spaces.Box(2, 3, (1,), np.float32),
        "c": gym.spaces.Dict({"y": gym.spaces.Discrete(2), "x": gym.spaces.Discrete(3)}),
    }
)


def test_items_of_a_dict_keep_the_space_key_order() -> None:
    seen: list[tuple[list[Any], list[Any]]] = []

    @settings(max_examples=40, database=None)
    @given(items(_DICT))
    def draw(value: dict[str, Any]) -> None:
        assert _DICT.contains(value)
        seen.append((list(value), list(value["c"])))

    draw()
    expected = (list(_DICT.spaces), list(_DICT["c"].spaces))
    assert seen and all(order == expected for order in seen)
    assert list(_DICT.sample()) == expected[0]  # gymnasium's own order


def test_items_of_a_dict_still_shrink() -> None:
    from hypothesis import find

    found = find(items(_DICT), lambda v: v["c"]["x"] >= 1)
    assert int(found["c"]["x"]) == 1 and int(found["c"]["y"]) == 0
    assert float(found["a"][0]) == 0.0 and float(found["b"][0]) == 2.0
    assert find(items(gym.spaces.Dict({})), lambda v: True) == {}


def _flatten_values(episodes_: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    rows = [
        np.concatenate(
            [np.asarray(v, np.float32).reshape(-1) for v in ep.get_observations(t).values()]
        )
        for ep in episodes_
        for t in range(len(ep))
    ]
    return {**batch, "obs": np.stack(rows) if rows else np.zeros((0, 2), np.float32)}


def test_check_connector_passes_a_connector_flattening_dict_values_in_order() -> None:
    space = gym.spaces.Dict(
        {"a": gym.spaces.Box(0, 1, (1,), np.float32), "b": gym.spaces.Box(2, 3, (1,), np.float32)}
    )
    check_connector(
        _flatten_values,
        observation_space=space,
        action_space=gym.spaces.Discrete(2),
        max_examples=30,
    )


# ------------------------------------------------------------------ container-type mutations
_POS_PAIR = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(0, 5, (2,), np.int64),
        "pair": gym.spaces.Tuple([gym.spaces.Discrete(3)] * 2),
    }
)


def _dict_obs_episode() -> SingleAgentEpisode:
    obs = [{"pos": np.array([1, 2]), "pair": (np.int64(0), np.int64(1))} for _ in range(2)]
    return SingleAgentEpisode(
        observations=obs, observation_space=_POS_PAIR, actions=[0], rewards=[0.0],
        len_lookback_buffer=0,
    )  # fmt: skip


def _tuple_obs_episode() -> SingleAgentEpisode:
    space = gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Discrete(3)])
    return SingleAgentEpisode(
        observations=[(np.int64(0), np.int64(1)), (np.int64(2), np.int64(0))],
        observation_space=space, actions=[0], rewards=[0.0], len_lookback_buffer=0,
    )  # fmt: skip


def _pos_to_list(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    obs = eps[0].get_observations(-1)  # list mode: the stored dict itself
    obs["pos"] = obs["pos"].tolist()
    return batch


def _pair_to_list(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    obs = eps[0].get_observations(-1)
    obs["pair"] = list(obs["pair"])
    return batch


def _stored_tuple_to_list(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    store = eps[0].observations.data
    store[1] = list(store[1])
    return batch


def _custom_list_to_tuple(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    eps[0].custom_data["hist"] = tuple(eps[0].custom_data["hist"])
    return batch


def _with_history(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    ep.custom_data["hist"] = [1, 2]
    return ep


@pytest.mark.parametrize(
    ("make", "connector", "named"),
    [
        (_dict_obs_episode, _pos_to_list, "observations[1]['pos']: ndarray -> list"),
        (_dict_obs_episode, _pair_to_list, "observations[1]['pair']: tuple -> list"),
        (_tuple_obs_episode, _stored_tuple_to_list, "observations[1]: tuple -> list"),
        (
            lambda: _with_history(_tuple_obs_episode()),
            _custom_list_to_tuple,
            "custom_data['hist']: list -> tuple",
        ),
    ],
    ids=["array-to-list", "tuple-to-list-in-dict", "stored-tuple-to-list", "custom-data"],
)
def test_mutation_of_only_a_container_type_is_located(
    make: Any, connector: Any, named: str
) -> None:
    with pytest.raises(ConnectorContractError) as caught:
        check_does_not_mutate(connector, [make()])
    message = str(caught.value)
    assert named in message and "before" in message and "after" in message
    assert "no difference could be located" not in message


def test_outputs_equal_still_ignores_containers() -> None:
    assert outputs_equal(np.array([1, 2]), [1, 2])
    assert outputs_equal((1, 2), [1, 2])
    assert outputs_equal({"pos": (1, 2)}, {"pos": np.array([1, 2])}, check_dtype=True)


# ------------------------------------------------- numpy=True refusals with a strategy beside
_SEQ = gym.spaces.Sequence(gym.spaces.Discrete(2))


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"observation_space": gym.spaces.Discrete(2), "action_space": _SEQ}, "action_space"),
        (
            {"observation_space": st.just(gym.spaces.Discrete(2)), "action_space": _SEQ},
            "action_space",
        ),
        (
            {"observation_space": _SEQ, "action_space": st.just(gym.spaces.Discrete(2))},
            "observation_space",
        ),
        (
            {
                "observation_space": st.just(gym.spaces.Discrete(2)),
                "action_space": gym.spaces.Discrete(2),
                "extra_model_outputs": {"x": _SEQ},
            },
            "extra_model_outputs",
        ),
        (
            {
                "observation_space": st.just(gym.spaces.Discrete(2)),
                "action_space": st.just(gym.spaces.Discrete(2)),
                "extra_model_outputs": {"x": _SEQ},
            },
            "extra_model_outputs",
        ),
    ],
    ids=["spaces", "obs-strategy", "act-strategy", "emo-one-strategy", "emo-two-strategies"],
)
def test_numpy_true_refuses_unstackable_given_spaces_when_built(
    kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        episodes(numpy=True, **kwargs)


def test_numpy_true_with_strategies_still_draws() -> None:
    @settings(max_examples=5, database=None)
    @given(episodes(st.just(gym.spaces.Discrete(2)), gym.spaces.Discrete(2), numpy=True))
    def draw(ep: SingleAgentEpisode) -> None:
        assert ep.is_numpy

    draw()


# ----------------------------------------------------------- objects deepcopy refuses
def _locked_episode(lock: Any) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    ep.custom_data["lock"] = lock
    ep.custom_data["box"] = {"held": [lock, 3]}
    ep.custom_data["fn"] = lambda x: x
    return ep


def _uses_lock(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    with eps[0].custom_data["lock"]:
        return {"n": len(eps[0])}


def _replaces_lock(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    eps[0].custom_data["lock"] = threading.Lock()
    return {}


def _changes_beside_lock(eps: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    eps[0].custom_data["box"]["held"][1] = 4
    return {}


@pytest.mark.parametrize(
    ("connector", "error"),
    [
        (_uses_lock, None),
        (_replaces_lock, r"custom_data\['lock'\]"),
        (_changes_beside_lock, r"custom_data\['box'\]\['held'\]\[1\]"),
    ],
    ids=["uses", "replaces", "changes-beside"],
)
def test_does_not_mutate_shares_a_lock_in_custom_data(connector: Any, error: str | None) -> None:
    lock = threading.Lock()
    ep = _locked_episode(lock)
    if error is None:
        check_does_not_mutate(connector, [ep])
    else:
        with pytest.raises(ConnectorContractError, match=error):
            check_does_not_mutate(connector, [ep])
    # The caller's episode is unchanged and still holds its own lock.
    assert ep.custom_data["lock"] is lock and ep.custom_data["box"] == {"held": [lock, 3]}


def test_other_checks_take_episodes_and_batches_holding_a_lock() -> None:
    lock = threading.Lock()
    ep = _locked_episode(lock)
    check_deterministic(_uses_lock, [ep], {"lock": lock})
    check_list_numpy_agree(_uses_lock, [ep], {"lock": lock})
    check_does_not_mutate(_uses_lock, [ep], {"lock": lock})


class _NoCopyList(list):  # type: ignore[type-arg]
    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        raise RuntimeError("this list refuses to be copied")


def test_what_cannot_be_copied_even_shared_is_a_clear_type_error() -> None:
    ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    ep.custom_data["odd"] = _NoCopyList([1])
    with pytest.raises(TypeError, match=r"input episode 0 .*cannot be deep-copied"):
        check_does_not_mutate(lambda eps, batch: {}, [ep])
