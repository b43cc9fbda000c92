"""from_dataset: episodes in dataset_info's order (first written piece), pieces added in batches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, dataset_info
from episodes.io.torch_data import TransitionDataset
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def piece(id_, a, b, done=False):
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([t]) for t in range(a, b + 1)],
        actions=[0] * (b - a),
        rewards=[float(t) for t in range(a, b)],
        t_started=a,
        terminated=done,
        len_lookback_buffer=0,
    )


def write(path, pieces):
    with DatasetWriter(path) as writer:
        for p in pieces:
            writer.write(p)
    return path


def joined_reference(path, capacity, cls=EpisodeReplayBuffer):
    """Each episode added joined (one add each), in dataset_info's order."""
    buf = cls(capacity, seed=0)
    for entry in dataset_info(path).episodes:
        pieces = [p for p in _read_all(path) if p.id_ == entry.id_]
        pieces.sort(key=lambda p: (p.t_started, len(p)))
        whole = pieces[0]
        for p in pieces[1:]:
            whole = SingleAgentEpisode(
                whole.id_,
                observations=[*whole.observations, *p.observations[1:]],
                actions=[*whole.actions, *p.actions],
                rewards=[*whole.rewards, *p.rewards],
                t_started=whole.t_started,
                terminated=p.is_terminated,
                len_lookback_buffer=0,
            )
        buf.add(whole)
    return buf


def _read_all(path):
    from episodes.io import read_episodes

    return list(read_episodes(path, numpy=False))


# Written orders: (id, start, end, done) per piece, in the order written.
ORDERS = {
    "later_piece_first": [("A", 3, 6, True), ("B", 0, 4, True), ("A", 0, 3, False)],
    "reversed_pieces": [
        ("A", 4, 6, True),
        ("A", 2, 4, False),
        ("B", 0, 5, True),
        ("A", 0, 2, False),
    ],
    "interleaved_in_time": [
        ("A", 0, 2, False),
        ("B", 0, 3, False),
        ("A", 2, 5, True),
        ("B", 3, 4, True),
    ],
    "second_episode_late_start": [
        ("A", 0, 3, True),
        ("B", 2, 4, True),
        ("C", 0, 2, True),
        ("B", 0, 2, False),
    ],
    # K's first written piece has no steps: K still comes first, as dataset_info lists it.
    "empty_first_piece": [("K", 0, 0, False), ("L", 0, 2, True), ("K", 0, 3, True)],
}


@pytest.mark.parametrize("name", list(ORDERS))
@pytest.mark.parametrize("capacity", [None, 3, 6, 9])
def test_episode_order_is_dataset_info_order(tmp_path, name, capacity):
    path = write(tmp_path / "d", [piece(*spec) for spec in ORDERS[name]])
    info_order = [e.id_ for e in dataset_info(path).episodes]
    data = TransitionDataset(path)
    assert list(dict.fromkeys(data.episode_steps(range(len(data)))[0].tolist())) == info_order
    buf = EpisodeReplayBuffer.from_dataset(path, capacity=capacity, seed=0)
    if capacity is None:
        assert buf.get_episode_ids() == info_order
        return
    ref = joined_reference(path, capacity)
    assert buf.get_episode_ids() == ref.get_episode_ids()
    assert buf.get_evicted_ids() == ref.get_evicted_ids()
    assert buf.get_counters() == ref.get_counters()


def test_later_piece_written_first_keeps_written_order(tmp_path):
    # The brief's case: A[3:6], B[0:4], A[0:3]; capacity 6 keeps B (A, 6 steps, went first).
    path = write(tmp_path / "d", [piece(*spec) for spec in ORDERS["later_piece_first"]])
    assert EpisodeReplayBuffer.from_dataset(path).get_episode_ids() == ["A", "B"]
    small = EpisodeReplayBuffer.from_dataset(path, capacity=6)
    assert small.get_episode_ids() == ["B"] and small.get_evicted_ids() == ["A"]


@st.composite
def datasets(draw):
    n = draw(st.integers(1, 6))
    pieces = []
    for k in range(n):
        length = draw(st.integers(1, 9))
        cuts = sorted(draw(st.sets(st.integers(1, length - 1), max_size=3))) if length > 1 else []
        bounds = [0, *cuts, length]
        done = draw(st.booleans())
        for a, b in zip(bounds, bounds[1:]):
            pieces.append(piece(f"e{k}", a, b, done and b == length))
    order = draw(st.permutations(range(len(pieces))))
    return [pieces[i] for i in order]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=datasets(), capacity=st.integers(1, 40), prioritized=st.booleans())
def test_matches_joined_episodes_in_dataset_info_order(
    tmp_path_factory, pieces, capacity, prioritized
):
    path = write(tmp_path_factory.mktemp("d") / "d", pieces)
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls.from_dataset(path, capacity=capacity, seed=0)
    ref = joined_reference(path, capacity, cls)
    assert buf.get_episode_ids() == ref.get_episode_ids()
    assert buf.get_evicted_ids() == ref.get_evicted_ids()
    assert buf.get_counters() == ref.get_counters()
    for got, want in zip(buf.get_episodes(), ref.get_episodes()):
        assert (got.t_started, len(got), got.is_terminated) == (
            want.t_started,
            len(want),
            want.is_terminated,
        )
        np.testing.assert_array_equal(got.get_rewards(), want.get_rewards())
        np.testing.assert_array_equal(got.get_observations(), want.get_observations())


def test_pieces_go_to_add_in_batches(tmp_path, monkeypatch):
    # A runner's dataset: many small pieces of interleaved episodes; far fewer adds than pieces.
    pieces = [piece(f"e{k % 50}", 2 * (k // 50), 2 * (k // 50) + 2) for k in range(600)]
    path = write(tmp_path / "d", pieces)
    calls = []
    add = EpisodeReplayBuffer.add

    def counted(self, episodes, **kwargs):
        calls.append(1)
        return add(self, episodes, **kwargs)

    monkeypatch.setattr(EpisodeReplayBuffer, "add", counted)
    buf = EpisodeReplayBuffer.from_dataset(path, seed=0)
    assert buf.get_num_timesteps() == 1200 and buf.get_num_episodes() == 50
    assert len(calls) <= 3
    # the same rows as adding the pieces one by one, in the order written
    ref = EpisodeReplayBuffer(1200, seed=0)
    for p in pieces:
        add(ref, p)
    assert buf.get_state().keys() == ref.get_state().keys()
    np.testing.assert_array_equal(buf.get_state()["steps"]["uid"], ref.get_state()["steps"]["uid"])
    np.testing.assert_array_equal(
        buf.sample(64, n_step=3)["rewards"], ref.sample(64, n_step=3)["rewards"]
    )


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("gap", "starts at t=8"),
        ("after_done", "is already done"),
    ],
)
def test_refusal_in_a_batch_names_dataset_and_episode(tmp_path, bad, words):
    pieces = [piece(f"e{k}", 0, 3) for k in range(20)]
    if bad == "gap":
        pieces.insert(10, piece("e3", 8, 9))
    else:
        pieces[3] = piece("e3", 0, 3, done=True)
        pieces.insert(10, piece("e3", 3, 4))
    path = write(tmp_path / "d", pieces)
    with pytest.raises(ValueError, match=f"dataset .*, episode 'e3': .*{words}"):
        EpisodeReplayBuffer.from_dataset(path)
