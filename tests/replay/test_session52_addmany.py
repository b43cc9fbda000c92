"""``add`` of many tiny rollouts: evictions batched, the usual chunk read quickly, nothing else.

``add`` enters chunks and evictions in the table in plan order but writes the rows in batches
and marks every evicted slot dead once, at the end (``episodes.replay.applying``). These tests
pin that against the one-eviction-at-a-time path (still taken by a subclass with its own
``_write`` or ``_evict``) and against adding the same chunks one call per chunk: the same
state, the same samples from the same seed. The quick reading of numpy'd columns
(``episodes.replay.quick_rows``) is pinned against the general one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.errors import EmptyBufferError
from episodes.replay.ingest import prepare

OBS_SPACE = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
ACT_SPACE = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


class OneByOne(EpisodeReplayBuffer):
    """Its own ``_evict``: ``add`` writes before and evicts at each eviction, as it did."""

    def _evict(self, id_: Any) -> None:
        super()._evict(id_)


class PrioritizedOneByOne(PrioritizedEpisodeReplayBuffer):
    def _evict(self, id_: Any) -> None:
        super()._evict(id_)


# ---------------------------------------------------------------------------- the rollouts
# One operation: (continue a running episode? which one, steps 0-5, end: 0 runs, 1 terminated,
# 2 truncated, numpy'd?, an info?). Steps 0 only ends an episode (its last observation again).
OPS = st.tuples(
    st.booleans(),
    st.integers(0, 50),
    st.integers(0, 5),
    st.sampled_from([0, 0, 1, 2]),
    st.booleans(),
    st.booleans(),
)
PLANS = st.lists(st.lists(OPS, min_size=1, max_size=12), min_size=1, max_size=6)


def _chunks(plan: list[list[tuple[Any, ...]]]) -> list[list[SingleAgentEpisode]]:
    """The plan's adds as chunks: new episodes and continuations of running ones, all valid."""
    rng = np.random.default_rng(len(plan))
    running: dict[str, tuple[int, np.ndarray]] = {}  # id -> (t_end, last observation)
    adds, fresh = [], 0
    for ops in plan:
        chunks = []
        for go_on, pick, steps, end, numpy, info in ops:
            if go_on and running:
                id_ = sorted(running)[pick % len(running)]
                t0, first = running.pop(id_)
            elif steps:
                id_, t0, first = f"e{fresh}", 3 * fresh, rng.normal(size=4).astype(np.float32)
                fresh += 1
            else:
                continue
            if not steps and not end:
                running[id_] = (t0, first)  # a chunk without steps that ends nothing: skipped
                continue
            obs = [first, *rng.normal(size=(steps, 4)).astype(np.float32)]
            infos = [{"k": t0 + i} if info and i == 1 else {} for i in range(steps + 1)]
            episode = SingleAgentEpisode(
                id_,
                observations=obs,
                actions=list(rng.uniform(-1, 1, (steps, 1)).astype(np.float32)),
                rewards=list(rng.normal(size=steps)),
                infos=infos,
                terminated=end == 1,
                truncated=end == 2,
                t_started=t0,
                len_lookback_buffer=0,
                observation_space=OBS_SPACE,
                action_space=ACT_SPACE,
            )
            chunks.append(episode.to_numpy() if numpy else episode)
            if not end:
                running[id_] = (t0 + steps, obs[-1])
        adds.append(chunks)
    return adds


def _assert_same(a: Any, b: Any) -> None:
    np.testing.assert_equal(a.get_state(), b.get_state())


def _samples(buffer: EpisodeReplayBuffer, prioritized: bool) -> list[Any]:
    """Transitions, sequences and episodes drawn; a refusal (none fits) by its words."""
    draws: list[Any] = [  # transitions last: a prioritized buffer's next update is theirs
        {"batch_length_T": 2},
        {"sample_episodes": True},
        {"beta": 0.5} if prioritized else {"n_step": 2},
    ]
    out = []
    for kwargs in draws:
        try:
            drawn = buffer.sample(4, **kwargs)
        except EmptyBufferError as error:
            out.append(str(error))
            continue
        if kwargs.get("sample_episodes"):
            drawn = [(ep.id_, ep.t_started, ep.get_observations().tolist()) for ep in drawn]
        out.append(drawn)
    return out


KINDS = [
    pytest.param(EpisodeReplayBuffer, OneByOne, False, id="plain"),
    pytest.param(PrioritizedEpisodeReplayBuffer, PrioritizedOneByOne, True, id="prioritized"),
]


@pytest.mark.parametrize(("fast", "slow", "prioritized"), KINDS)
@settings(max_examples=25, deadline=None)
@given(plan=PLANS, capacity=st.integers(1, 30), restart=st.booleans())
def test_batched_evictions_leave_what_one_eviction_at_a_time_leaves(
    fast, slow, prioritized, plan, capacity, restart
):
    on_evicted = "restart" if restart else "drop"
    a, b = fast(capacity, seed=3), slow(capacity, seed=3)
    sampled = False
    for k, chunks in enumerate(_chunks(plan)):
        kwargs = {"weight": 0.5 + k} if prioritized and k % 2 else {}
        a.add(chunks, on_evicted=on_evicted, **kwargs)
        b.add(chunks, on_evicted=on_evicted, **kwargs)
        if sampled:  # the last sample's items, some evicted since: non-uniform leaves
            a.update_priorities(np.linspace(0.1, 3.0, 4))
            b.update_priorities(np.linspace(0.1, 3.0, 4))
        _assert_same(a, b)
        np.testing.assert_equal(_samples(a, prioritized), _samples(b, prioritized))
        sampled = prioritized and len(a) > 0
        _assert_same(a, b)


def _logical(state: dict[str, Any]) -> dict[str, Any]:
    """A state less where its rows lie (compactions follow the adds, not the contents)."""
    return {key: value for key, value in state.items() if key != "layout"}


@pytest.mark.parametrize(("fast", "slow", "prioritized"), KINDS)
@settings(max_examples=25, deadline=None)
@given(plan=PLANS, capacity=st.integers(1, 30))
def test_one_add_of_many_chunks_stores_what_one_add_per_chunk_stores(
    fast, slow, prioritized, plan, capacity
):
    a, b = fast(capacity, seed=5), fast(capacity, seed=5)
    for chunks in _chunks(plan):
        a.add(chunks, on_evicted="drop")
        for chunk in chunks:
            b.add(chunk, on_evicted="drop")
        np.testing.assert_equal(_logical(a.get_state()), _logical(b.get_state()))
        assert [len(ep) for ep in a.get_episodes()] == [len(ep) for ep in b.get_episodes()]
    # The same rows at the same places once both are compacted: the same draws.
    for buffer in (a, b):
        buffer._compact()
    np.testing.assert_equal(_samples(a, prioritized), _samples(b, prioritized))
    states = [buffer.get_state() for buffer in (a, b)]
    for state in states:
        del state["layout"]["size"]  # rows allocated: the adds' sizes decide
    np.testing.assert_equal(*states)


# ------------------------------------------------------------------- the quick reading
def _general(monkeypatch: pytest.MonkeyPatch, episode: SingleAgentEpisode) -> Any:
    from episodes.replay import ingest, quick_rows

    with monkeypatch.context() as patch:
        patch.setattr(ingest, "quick_rows", lambda *args: None)
        patch.setattr(ingest, "rewards_as_float32", quick_rows.float32_rewards)
        return prepare(episode)


def _episode(obs: Any, actions: Any, rewards: Any, **kw: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "x", observations=obs, actions=actions, rewards=rewards, len_lookback_buffer=0, **kw
    ).to_numpy()


QUICK_CASES = {
    "float32 box": (np.zeros((3, 4), np.float32), np.zeros((2, 1), np.float32), [1.0, 2.0], {}),
    "float64 rewards": (np.ones((3, 2)), np.arange(2), np.array([1e-300, -3.5]), {}),
    "float16 rewards": (np.ones((3, 2)), np.arange(2), np.array([1, 2], np.float16), {}),
    "int rewards": (np.ones((3, 2)), np.arange(2), np.array([2**40, -1]), {}),
    "float32 rewards": (np.ones((3, 2)), np.arange(2), np.array([1, 2], np.float32), {}),
    "big-endian obs": (np.ones((3, 2), ">f4"), np.arange(2), [0.0, 1.0], {}),
    "discrete actions": (
        np.ones((3, 2)),
        np.array([0, 1]),
        [0.0, 1.0],
        {"action_space": gym.spaces.Discrete(2)},
    ),
    "multi-binary obs": (
        np.ones((3, 2), np.int8),
        np.arange(2),
        [0.0, 1.0],
        {"observation_space": gym.spaces.MultiBinary(2)},
    ),
    "complex obs": (np.ones((3, 2), np.complex64), np.arange(2), [0.0, 1.0], {}),
    "bool actions": (np.ones((3, 1)), np.array([True, False]), [0.0, 1.0], {}),
}


@pytest.mark.parametrize("case", list(QUICK_CASES))
def test_the_quick_reading_gives_the_general_readings_chunk(case, monkeypatch):
    obs, actions, rewards, kw = QUICK_CASES[case]
    episode = _episode(list(obs), list(actions), list(rewards), **kw)
    quick, general = prepare(episode), _general(monkeypatch, episode)
    for name in ("obs", "actions", "rewards"):
        got, want = getattr(quick, name), getattr(general, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name


REFUSED = {
    "rewards past float32": (
        [1e39, 0.0],
        ValueError,
        "rewards hold values a float32 column cannot (they overflow to inf)",
    ),
    "complex rewards": ([1j, 0.0], TypeError, "rewards must be real numbers, got dtype complex128"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_rewards_the_quick_reading_passes_on_are_refused_in_the_general_words(case):
    rewards, error, words = REFUSED[case]
    episode = _episode([np.zeros(2)] * 3, [0, 1], rewards)
    buffer = EpisodeReplayBuffer(10)
    with pytest.raises(error) as raised:
        buffer.add([episode])
    assert str(raised.value) == f"chunk 0 (episode 'x'): {words}"
    assert buffer.get_state()["num_timesteps"] == 0 and buffer.get_added_timesteps() == 0


def test_infinite_float64_rewards_are_stored_as_given():
    episode = _episode([np.zeros(2)] * 3, [0, 1], [np.inf, -np.inf])
    buffer = EpisodeReplayBuffer(10)
    buffer.add(episode)
    assert buffer.get_state()["steps"]["rewards"].tolist() == [np.inf, -np.inf]


def test_a_thousand_tiny_rollouts_into_a_full_buffer_evict_oldest_first():
    def rollouts(tag: str, count: int) -> list[SingleAgentEpisode]:
        return [
            SingleAgentEpisode(
                f"{tag}{i}",
                observations=[np.full(4, i, np.float32)] * 6,
                actions=[np.zeros(1, np.float32)] * 5,
                rewards=[float(i)] * 5,
                terminated=bool(i % 2),
                len_lookback_buffer=0,
            ).to_numpy()
            for i in range(count)
        ]

    buffer = PrioritizedEpisodeReplayBuffer(500, seed=0)
    buffer.add(rollouts("old", 100))
    buffer.add(rollouts("new", 1000))
    assert buffer.get_episode_ids() == [f"new{i}" for i in range(900, 1000)]
    assert buffer.get_evicted_ids()[:2] == ["old0", "old1"]
    assert buffer.get_evicted_ids()[-1] == "new899"
    assert buffer.get_num_episodes_evicted() == 1000
    assert buffer.get_added_timesteps() == 5500 and buffer.get_num_timesteps() == 500
    assert buffer._tree.total == pytest.approx(500.0)  # the evicted steps' leaves are zero
    assert set(buffer.sample(64)["rewards"].tolist()) <= set(map(float, range(900, 1000)))
