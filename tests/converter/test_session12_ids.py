"""Episode ids the time-order check cannot key (lists, dicts), pinned.

``check_time_order`` keyed a dict by each chunk's id, so ``episodes_to_rollout`` raised
``TypeError: unhashable type`` for a list id, while ``group_by_env`` and the stepless-end
lookup already accept such ids (they match nothing). Hashable ids keep their check.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout


def chunk(id_: Any, t0: int = 0, n: int = 2) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, t, np.float32) for t in range(t0, t0 + n + 1)],
        actions=[t % 2 for t in range(t0, t0 + n)],
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        t_started=t0,
        len_lookback_buffer=0,
    )


def zero_values(obs: Any) -> np.ndarray:
    return np.zeros(len(obs))


@pytest.mark.parametrize(
    "id_", [["run", 1], {"run": 1}, ("run", [1])], ids=["list", "dict", "tuple-holding-list"]
)
def test_unhashable_id_converts(id_: Any) -> None:
    rollout = episodes_to_rollout([[chunk(id_)], [chunk("b")]], gamma=0.9, value_fn=zero_values)
    assert rollout.storage.num_transitions_per_env == 2
    np.testing.assert_array_equal(rollout.storage.rewards[:, :, 0].numpy(), np.ones((2, 2)))


def test_hashable_id_still_checked() -> None:
    with pytest.raises(ValueError, match="time order"):
        episodes_to_rollout([[chunk("a"), chunk("a")]], gamma=0.9, value_fn=zero_values)


# ------------------------------ unhashable ids are matched by value, not skipped (regression)
def stepless_end(id_: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, 2, np.float32)],
        t_started=2,
        terminated=True,
        extra_model_outputs={"vf_preds": [], "action_logp": []},
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("id_", ["run", ["run", 7], {"run": [7]}], ids=["str", "list", "dict"])
@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
def test_stepless_end_of_an_unhashable_id_ends_its_episode(id_: Any, layout: str) -> None:
    rollout = episodes_to_rollout(
        [chunk(id_), stepless_end(id_)], gamma=0.9, value_fn=zero_values, layout=layout
    )
    assert rollout.storage.dones[:, 0, 0].tolist() == [False, True]


@pytest.mark.parametrize("id_", [["run", 7], {"run": [7]}], ids=["list", "dict"])
def test_an_unhashable_id_given_twice_is_refused(id_: Any) -> None:
    with pytest.raises(ValueError, match="time order"):
        episodes_to_rollout([[chunk(id_), chunk(id_)]], gamma=0.9, value_fn=zero_values)


def test_list_mode_object_extras_convert_on_either_path() -> None:
    import gymnasium as gym

    from episodes.runner import EnvRunner

    def policy(obs: Any) -> Any:
        n = len(obs)
        extras = {"vf_preds": np.array([0.5] * n, object), "action_logp": np.zeros(n)}
        return np.ones(n, np.int64), extras

    results = []
    for read_first in (False, True):
        env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        chunks = EnvRunner(env, policy, seed=0, numpy_episodes=False).sample(4)
        if read_first:
            chunks[0]  # a built chunk: the general path
        rollout = episodes_to_rollout(chunks, gamma=0.9, value_fn=zero_values)
        results.append(rollout.storage.values[:, :, 0].tolist())
    assert results[0] == results[1] == [[0.5, 0.5]] * 4
