"""Mutation round (session 49, b): behaviour that hand-made mutants showed unpinned in
replay/extra_writes, replay/agents, episode/agent_ids, runner/policy, runner/metrics,
episode/accessors and episode/given_columns (each test fails on one mutant or more)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer


def _tuple_buffer() -> Any:
    buf = EpisodeReplayBuffer(10)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
            extra_model_outputs={
                "v": [0.5, 0.7],
                "pi": [np.zeros(3), np.ones(3)],
                "tup": [(1.0, np.zeros(2)), (2.0, np.ones(2))],
            },
        )
    )
    return buf


def test_set_extra_tuple_column_takes_tensors_that_need_grad() -> None:
    torch = pytest.importorskip("torch")
    buf = _tuple_buffer()
    scalars = torch.tensor([5.0, 6.0], dtype=torch.float64, requires_grad=True)
    rows = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64, requires_grad=True)
    assert buf.set_extra_model_outputs("tup", (scalars * 1, rows * 1), [1, 0]) == 2
    got = buf.get_extra_model_outputs("tup", [0, 1])
    assert got[0].tolist() == [6.0, 5.0]
    assert got[1].tolist() == [[3.0, 4.0], [1.0, 2.0]]


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(([5.0, 6.0], [[1.0, 2.0], [3.0, 4.0]]), id="lists"),
        pytest.param((np.array([5.0, 6.0]), [[1.0, 2.0], [3.0, 4.0]]), id="array and list"),
    ],
)
def test_set_extra_tuple_column_takes_per_leaf_lists(values: Any) -> None:
    buf = _tuple_buffer()
    assert buf.set_extra_model_outputs("tup", values, [1, 0]) == 2
    got = buf.get_extra_model_outputs("tup", [0, 1])
    assert got[0].tolist() == [6.0, 5.0]
    assert got[1].tolist() == [[3.0, 4.0], [1.0, 2.0]]


@pytest.mark.parametrize("key", [["v"], None, 3, ("v",)], ids=["list", "none", "int", "tuple"])
def test_extra_output_keys_that_are_no_str_are_a_key_error(key: Any) -> None:
    buf = _tuple_buffer()
    with pytest.raises(KeyError, match="no stored extra model output"):
        buf.get_extra_model_outputs(key, [0])
    with pytest.raises(KeyError, match="no stored extra model output"):
        buf.set_extra_model_outputs(key, [1.0], [0])
    assert buf.get_extra_model_outputs("v", [0, 1]).tolist() == [0.5, 0.7]


def test_set_extra_one_bare_index_is_refused_and_says_how() -> None:
    buf = _tuple_buffer()
    with pytest.raises(ValueError, match=r"1-d sequence, got shape \(\).*indices \[i\]"):
        buf.set_extra_model_outputs("v", [1.0], 0)
    assert buf.get_extra_model_outputs("v", [0, 1]).tolist() == [0.5, 0.7]


@pytest.mark.parametrize(
    "key, values",
    [("v", []), ("v", np.zeros(0)), ("pi", []), ("tup", ([], np.zeros((0, 2))))],
    ids=["list", "array", "rows of 3 as a bare list", "tuple"],
)
def test_set_extra_nothing_writes_nothing(key: str, values: Any) -> None:
    buf = _tuple_buffer()
    assert buf.set_extra_model_outputs(key, values, []) == 0
    assert buf.get_extra_model_outputs("v", [0, 1]).tolist() == [0.5, 0.7]


def test_agents_checked_passes_over_a_chunk_without_an_entry() -> None:
    # chunks built elsewhere than ``prepare`` may carry no meta entry: nothing names an agent
    import dataclasses

    from episodes.replay.agents import agents_checked
    from episodes.replay.ingest import prepare_all
    from episodes.replay.table import EpisodeTable

    episode = SingleAgentEpisode(
        "game",
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        agent_id="red",
        len_lookback_buffer=0,
    )
    chunks = [dataclasses.replace(c, meta=None) for c in prepare_all([episode] * 2, {}, {})]
    assert len(chunks) == 2
    assert agents_checked(chunks, EpisodeTable()) == chunks


def _chunk(agent: Any, id_: str = "game") -> Any:
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        agent_id=agent,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    "first, second",
    [
        pytest.param("red", "".join(["r", "ed"]), id="equal str, other object"),
        pytest.param("red", np.str_("red"), id="numpy str"),
        pytest.param(1, 1.0, id="int and float"),
        pytest.param(float("nan"), float("nan"), id="two nans"),
        pytest.param(("a", float("nan")), ("a", float("nan")), id="tuples holding nans"),
    ],
)
def test_check_agent_ids_takes_equal_agents_as_one(first: Any, second: Any) -> None:
    from episodes.episode.agent_ids import check_agent_ids

    check_agent_ids([_chunk(first), _chunk(second)], "f")  # no refusal


def test_check_agent_ids_reads_per_env_tuples() -> None:
    from episodes.episode.agent_ids import check_agent_ids

    check_agent_ids([(_chunk("red"),), (_chunk("red"), _chunk(None))], "f")
    with pytest.raises(ValueError, match="f: env 0's chunk 0 and env 1's chunk 1 share"):
        check_agent_ids([(_chunk("red"),), (_chunk(None), _chunk("blue"))], "f")


def test_random_policy_seed_zero_seeds_the_sampler() -> None:
    import gymnasium as gym

    from episodes.runner import RandomPolicy

    draws = [
        RandomPolicy(gym.spaces.MultiDiscrete([1000] * 8), seed=0)(None)[0].tolist()
        for _ in range(2)
    ]
    assert draws[0] == draws[1]


@pytest.mark.parametrize("key", [("a",), None, 1.5, b"vf"], ids=["tuple", "none", "float", "bytes"])
def test_check_outputs_refuses_every_key_that_is_no_str(key: Any) -> None:
    from episodes.runner.policy import check_outputs

    with pytest.raises(TypeError, match="named by str keys"):
        check_outputs(np.zeros(2), {"vf": np.zeros(2), key: np.zeros(2)}, 2, None)


class _TensorDictLike:
    """Has a TensorDict's ``batch_size`` and ``keys`` but does not register as a Mapping."""

    batch_size = (2,)
    shape = (2,)

    def keys(self) -> list[str]:
        return ["a"]


def test_check_no_mapping_refuses_a_tensordict_like_leaf() -> None:
    from episodes.runner.policy import check_no_mapping

    with pytest.raises(TypeError, match="got a _TensorDictLike, a mapping the runner"):
        check_no_mapping(_TensorDictLike(), "the policy's actions")


def test_metrics_add_time_refuses_a_bool_seconds() -> None:
    from episodes.runner import RunnerMetrics

    metrics = RunnerMetrics()
    with pytest.raises(ValueError, match="seconds must be a finite number >= 0, got True"):
        metrics.add_time(1, 1, True)
    assert (metrics.env_steps, metrics.sample_time_s) == (0, 0.0)


@pytest.mark.parametrize(
    "returns", [[True], np.array([False, True])], ids=["list of bool", "bool array"]
)
def test_metrics_add_episodes_refuses_bool_returns(returns: Any) -> None:
    from episodes.runner import RunnerMetrics

    metrics = RunnerMetrics()
    with pytest.raises(ValueError, match="episode returns must be a 1-D array of real numbers"):
        metrics.add_episodes(returns, [1] * len(returns))
    assert metrics.num_episodes == 0 and metrics.episode_returns == []


def test_metrics_mean_is_the_lists_however_the_episodes_were_added() -> None:
    from episodes.runner import RunnerMetrics

    values = [1e16, 1.0, -1e16, 1.0]
    batched, single = RunnerMetrics(), RunnerMetrics()
    batched.add_episodes(values[:2], [1, 1])
    batched.add_episodes(values[2:], [1, 1])
    for value in values:
        single.add_episode(value, 1)
    want = sum(values) / 4
    assert batched.reduce()["mean_episode_return"] == want
    assert single.reduce()["mean_episode_return"] == want


def test_metrics_reduce_without_time_and_after_a_reset() -> None:
    from episodes.runner import RunnerMetrics

    metrics = RunnerMetrics()
    assert metrics.reduce()["env_steps_per_s"] == 0.0
    metrics.add_time(4, 2, 0.5)
    first = metrics.reduce()
    assert (first["env_steps_per_s"], first["sample_time_s"]) == (8.0, 0.5)
    second = metrics.reduce()
    assert (second["sample_time_s"], second["env_steps_per_s"]) == (0.0, 0.0)
    assert (second["num_env_steps"], second["total_env_steps"]) == (0, 4)


def test_metrics_slot_is_named_after_its_attribute() -> None:
    from episodes.runner import RunnerMetrics
    from episodes.runner.metrics import MetricsSlot

    class Holder:
        stats = MetricsSlot()

    holder = Holder()
    with pytest.raises(AttributeError, match="stats"):
        _ = holder.stats
    with pytest.raises(TypeError, match="stats must be a RunnerMetrics, got dict"):
        holder.stats = {}  # type: ignore[assignment]
    metrics = RunnerMetrics()
    holder.stats = metrics
    assert holder.stats is metrics and holder.__dict__["_stats"] is metrics


def _looked_back() -> Any:
    import gymnasium as gym

    return SingleAgentEpisode(
        observations=[0, 1, 2, 3, 4],
        actions=[0, 1, 2, 0],
        rewards=[1.0, 2.0, 3.0, 4.0],
        infos=[{"i": k} for k in range(5)],
        extra_model_outputs={"v": [0.1, 0.2, 0.3, 0.4]},
        len_lookback_buffer=2,
        observation_space=gym.spaces.Discrete(5),
        action_space=gym.spaces.Discrete(3),
    )


@pytest.mark.parametrize(
    "read, want",
    [
        ("get_observations(-1, neg_index_as_lookback=True)", 1),
        ("get_observations(10, fill=3)", 3),
        ("get_observations(0, one_hot_discrete=True).tolist()", [0, 0, 1, 0, 0]),
        ("get_actions(-1, neg_index_as_lookback=True)", 1),
        ("get_actions(10, fill=2)", 2),
        ("get_actions(0, one_hot_discrete=True).tolist()", [0, 0, 1]),
        ("get_rewards(-1, neg_index_as_lookback=True)", 2.0),
        ("get_rewards(10, fill=-5.0)", -5.0),
        ("get_infos(-1, neg_index_as_lookback=True)", {"i": 1}),
        ("get_infos(10, fill={'f': 1})", {"f": 1}),
        ("get_extra_model_outputs('v', -1, neg_index_as_lookback=True)", 0.2),
        ("get_extra_model_outputs('v', 10, fill=9.0)", 9.0),
    ],
)
def test_episode_getters_pass_every_option_on(read: str, want: Any) -> None:
    assert eval(f"episode.{read}", {"episode": _looked_back()}) == want


@pytest.mark.parametrize(
    "column, value",
    [("observations", 3), ("actions", 2), ("rewards", 9.0)],
)
def test_episode_setters_reach_into_the_lookback(column: str, value: Any) -> None:
    episode = _looked_back()
    before = getattr(episode, f"get_{column}")(-1)
    getattr(episode, f"set_{column}")(new_data=value, at_indices=-1, neg_index_as_lookback=True)
    assert getattr(episode, f"get_{column}")(-1, neg_index_as_lookback=True) == value
    assert getattr(episode, f"get_{column}")(-1) == before


def test_episode_extra_setter_reaches_into_the_lookback() -> None:
    episode = _looked_back()
    episode.set_extra_model_outputs(
        key="v", new_data=7.0, at_indices=-1, neg_index_as_lookback=True
    )
    assert list(episode.get_extra_model_outputs("v")) == [0.3, 0.4]
    assert episode.get_extra_model_outputs("v", -1, neg_index_as_lookback=True) == 7.0


def test_an_episode_is_no_iterable() -> None:
    episode = _looked_back()
    with pytest.raises(TypeError, match="not iterable"):
        iter(episode)
    with pytest.raises(TypeError, match="not reversible"):
        reversed(episode)


@pytest.mark.parametrize("given", [(), "", []], ids=["empty tuple", "empty str", "empty list"])
def test_empty_extra_outputs_of_any_sequence_are_none(given: Any) -> None:
    episode = SingleAgentEpisode(
        observations=[0, 1], actions=[0], rewards=[1.0], extra_model_outputs=given
    )
    assert dict(episode.extra_model_outputs) == {}


@pytest.mark.parametrize(
    "given", [[("vf", [0.5])], (("vf", [0.5]),), "vf"], ids=["pairs", "tuple of pairs", "str"]
)
def test_extra_outputs_that_are_no_dict_are_refused(given: Any) -> None:
    from episodes.episode.given_columns import extra_columns

    with pytest.raises(TypeError, match="extra_model_outputs must be a dict of key -> column"):
        extra_columns(given)


def test_given_column_keeps_a_ready_buffers_own_space() -> None:
    import gymnasium as gym

    from episodes.buffer import InfiniteLookbackBuffer
    from episodes.episode.given_columns import given_column

    own = InfiniteLookbackBuffer([1, 2], 0, gym.spaces.Discrete(5))
    assert given_column(own, 0, gym.spaces.Discrete(3)).space == gym.spaces.Discrete(5)
    bare = InfiniteLookbackBuffer([1, 2], 0)
    assert given_column(bare, 0, gym.spaces.Discrete(3)).space == gym.spaces.Discrete(3)


def test_default_infos_of_an_observation_array() -> None:
    from episodes.episode.given_columns import default_infos

    assert default_infos(np.zeros((3, 2))) == [{}, {}, {}]
    assert default_infos(np.zeros(0)) == []


class _IntRows:
    """A 1-d array-like whose iteration gives Python ints, not items of its own type."""

    shape = (3,)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.arange(3)

    def __iter__(self) -> Any:
        return iter([0, 1, 2])

    def __len__(self) -> int:
        return 3


class _NoShape:
    """An array-like numpy cannot read (a device table), iterating its items."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("no host copy")

    def __iter__(self) -> Any:
        return iter([1, 2, 3])


class _Columns:
    """A 3 x 2 frame-like whose iteration gives its 2 columns, each of its own type."""

    shape = (3, 2)

    def __init__(self, top: bool = True) -> None:
        self.top = top

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.arange(6).reshape(3, 2)

    def __iter__(self) -> Any:
        return iter([_Columns(False), _Columns(False)] if self.top else [])


class _ListRowsSequence(Sequence):
    """A Sequence with ``__array__`` whose rows are lists: a sequence's items are its rows."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.array([[1, 2], [3, 4]])

    def __getitem__(self, i: Any) -> Any:
        return [[1, 2], [3, 4]][i]

    def __len__(self) -> int:
        return 2


def test_column_items_of_array_likes_keep_their_iterated_items() -> None:
    from episodes.episode.given_columns import column_items

    items = column_items(_IntRows())
    assert items == [0, 1, 2] and all(type(item) is int for item in items)
    assert column_items(_NoShape()) == [1, 2, 3]
    # a frame-like iterating its 2 columns (of its own type) holds numpy's 3 rows
    frame_rows = column_items(_Columns())
    assert [row.tolist() for row in frame_rows] == [[0, 1], [2, 3], [4, 5]]
    rows = column_items(_ListRowsSequence())
    assert rows == [[1, 2], [3, 4]] and all(type(row) is list for row in rows)


def test_column_items_of_a_parameter_are_its_tensor_rows() -> None:
    torch = pytest.importorskip("torch")
    from episodes.episode.given_columns import column_items

    rows = column_items(torch.nn.Parameter(torch.zeros(3, 2), requires_grad=False))
    assert len(rows) == 3 and all(isinstance(row, torch.Tensor) for row in rows)
