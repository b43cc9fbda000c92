"""Review of the replay buffers' ``set_extra_model_outputs``: values given in plain Python forms.

A flat column's rows given as a tuple, or as a list of tuples (rows of a vector column), are
rows as numpy reads them; only a nested column reads tuples as its Tuple leaves. A nested
column's leaves that disagree in their number of rows are refused naming the leaf whose count
differs from the indices', not a leaf that has one row per index. And the converter refuses
chunks of two agents under one id in per-env lists before it files stepless ends, whose
refusal spoke of time order instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _buffer(cls: Any, extras: dict[str, Any]) -> Any:
    buf = cls(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0, 3.0],
            actions=[0, 1, 0],
            rewards=[1.0] * 3,
            len_lookback_buffer=0,
            extra_model_outputs=extras,
        )
    )
    return buf


FLAT_ROWS = {
    # name: (column, values for items [0, 2], what the column then holds at [0, 1, 2])
    "tuple of scalars": (np.zeros(3, np.float32), (1.0, 2.0), [1.0, 0.0, 2.0]),
    "list of tuples": (
        np.zeros((3, 2), np.float32),
        [(1.0, 2.0), (3.0, 4.0)],
        [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]],
    ),
    "tuple of lists": (
        np.zeros((3, 2), np.float32),
        ([1.0, 2.0], [3.0, 4.0]),
        [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]],
    ),
    "tuple of arrays": (
        np.zeros((3, 2), np.float32),
        (np.ones(2), np.full(2, 5.0)),
        [[1.0, 1.0], [0.0, 0.0], [5.0, 5.0]],
    ),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("name", list(FLAT_ROWS))
def test_a_flat_column_takes_tuples_as_rows(cls: Any, name: str) -> None:
    column, values, want = FLAT_ROWS[name]
    buf = _buffer(cls, {"v": column})
    assert buf.set_extra_model_outputs("v", values, [0, 2]) == 2
    assert buf.get_extra_model_outputs("v", [0, 1, 2]).tolist() == want


def test_a_flat_column_refuses_tuples_of_another_count() -> None:
    buf = _buffer(EpisodeReplayBuffer, {"v": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match=r"3 values for 2 indices"):
        buf.set_extra_model_outputs("v", (1.0, 2.0, 3.0), [0, 2])
    assert buf.get_extra_model_outputs("v", [0, 1, 2]).tolist() == [0.0] * 3


def test_a_nested_column_still_reads_a_tuple_as_its_leaves() -> None:
    buf = _buffer(EpisodeReplayBuffer, {"n": [(0.0, np.zeros(2, np.float32))] * 3})
    assert buf.set_extra_model_outputs("n", ([1.0, 2.0], np.ones((2, 2))), [0, 2]) == 2
    first, second = buf.get_extra_model_outputs("n", [0, 1, 2])
    assert first.tolist() == [1.0, 0.0, 2.0]
    assert second[:, 0].tolist() == [1.0, 0.0, 1.0]


NESTED_COUNTS = {
    # name: (values for one index, the leaf the refusal names)
    "first leaf long": ({"a": [1.0, 2.0], "b": [7.0]}, r"\['a'\]: 2 rows for 1 indices"),
    "second leaf long": ({"a": [1.0], "b": [7.0, 8.0]}, r"\['b'\]: 2 rows for 1 indices"),
}


@pytest.mark.parametrize("name", list(NESTED_COUNTS))
def test_nested_leaves_of_other_counts_name_the_wrong_leaf(name: str) -> None:
    values, match = NESTED_COUNTS[name]
    buf = _buffer(EpisodeReplayBuffer, {"n": {"a": np.zeros(3), "b": np.zeros(3)}})
    with pytest.raises(ValueError, match=match):
        buf.set_extra_model_outputs("n", values, [1])
    assert buf.get_extra_model_outputs("n", [0, 1, 2])["a"].tolist() == [0.0] * 3


def test_nested_leaves_all_of_another_count_are_counted_as_values() -> None:
    buf = _buffer(EpisodeReplayBuffer, {"n": {"a": np.zeros(3), "b": np.zeros(3)}})
    with pytest.raises(ValueError, match=r"2 values for 1 indices"):
        buf.set_extra_model_outputs("n", {"a": [1.0, 2.0], "b": [7.0, 8.0]}, [1])


def _agent_chunk(agent: str, n: int = 2) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "game",
        observations=[float(t) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        agent_id=agent,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
    )


@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
def test_per_env_lists_of_two_agents_under_one_id_name_the_agents(layout: str) -> None:
    """Each agent in an env list of its own, one ending: the refusal says why, not time order."""
    from episodes.converter import episodes_to_rollout

    end = SingleAgentEpisode(
        "game",
        observations=[2.0],
        agent_id="blue",
        t_started=2,
        terminated=True,
        len_lookback_buffer=0,
    )
    groups = [[_agent_chunk("red")], [_agent_chunk("blue")], [end]]
    with pytest.raises(ValueError, match=r"belong to agents 'red' and 'blue'"):
        episodes_to_rollout(groups, gamma=0.9, layout=layout)
