"""Review of session 51's changes: batch tokens, pipeline states, keyword hints, ids.

Each problem the review found is pinned here (fixed); the other tests pin what held under
adversarial checks (a refused ``add_dataset`` restores everything a later call can see,
``sequence_returns_to_go`` against a brute-force sum over every cell).
"""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import ConnectorPipeline
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.returns_to_go import sequence_returns_to_go


def _episode(id_, index, length, *, t0=0, terminated=True):
    return SingleAgentEpisode(
        id_,
        observations=[np.array([index, t], np.float32) for t in range(t0, t0 + length + 1)],
        actions=[0] * length,
        rewards=[float(index) + 0.25 * t for t in range(t0, t0 + length)],
        terminated=terminated,
        t_started=t0,
        len_lookback_buffer=0,
    )


def _filled(seed=0):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=seed)
    buf.add([_episode("a", 0, 10), _episode("b", 1, 8)])
    return buf


# ---------------------------------------------------------------------- ReplayBatch tokens
def test_a_batch_reordered_in_place_gets_its_rows_priorities_or_is_refused():
    buf = _filled()
    batch = buf.sample(4)
    order = np.array([3, 2, 1, 0])
    for key in list(batch):  # e.g. shuffled for minibatches, as a dict of columns
        batch[key] = batch[key][order]
    td = np.array([1.0, 2.0, 3.0, 4.0])  # one per row of the batch as it now is
    try:
        buf.update_priorities(td, batch)
    except ValueError:
        return  # refusing a batch whose rows changed is a fine answer
    firsts = {}
    for item, priority in zip(batch["indices"].tolist(), td.tolist(), strict=True):
        firsts[item] = priority  # a repeated index keeps its last priority
    got = buf.get_priorities(np.array(list(firsts))).tolist()
    assert got == list(firsts.values())


def test_a_batch_filtered_in_place_gets_its_rows_priorities_or_a_clear_refusal():
    buf = _filled()
    batch = buf.sample(4)
    keep = np.array([True, False, True, False])
    for key in list(batch):
        batch[key] = batch[key][keep]
    try:
        buf.update_priorities(np.array([5.0, 6.0]), batch)
    except ValueError as err:
        assert "batch" in str(err)
        return
    assert buf.get_priorities(batch["indices"]).tolist()[-1] == 6.0


COPIES = {
    "deepcopy": copy.deepcopy,
    "copy": copy.copy,
    "pickle": lambda buf: pickle.loads(pickle.dumps(buf)),
}


@pytest.mark.parametrize("how", list(COPIES))
def test_a_copys_batch_does_not_set_priorities_of_other_steps(how):
    first = _filled()
    first.sample(1)  # the token exists from the first sample on
    second = COPIES[how](first)
    first.add(_episode("x", 2, 5))  # ids 18.. are x's steps here
    second.add(_episode("y", 3, 5))  # and y's there
    batch = first.sample(16)
    new = batch["indices"][batch["indices"] >= 18]
    assert len(new)  # the batch names steps of x
    before = second.get_priorities(new).tolist()
    try:
        second.update_priorities(np.full(16, 9.0), batch)
    except ValueError:
        return
    assert second.get_priorities(new).tolist() == before  # y's steps untouched


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"device": "cpu"},
        {"n_step": 3},
        {"batch_length_T": 3},
        {"batch_length_T": 3, "lookback": 1, "pad": True, "device": "cpu"},
    ],
    ids=["transitions", "torch", "n-step", "sequences", "torch-padded-sequences"],
)
@pytest.mark.parametrize(
    "passed",
    [lambda b: b, copy.deepcopy, copy.copy, lambda b: pickle.loads(pickle.dumps(b))],
    ids=["as-is", "deepcopy", "copy", "pickled"],
)
def test_a_batch_and_its_copies_go_back_to_the_buffer_that_drew_them(kwargs, passed):
    buf = _filled()
    batch = buf.sample(4, **kwargs)
    later = buf.sample(2)  # not the last sample any more: found by item id
    buf.update_priorities(np.full(4, 7.0), passed(batch))
    assert buf.get_priorities(batch.priority_items).tolist() == [7.0] * 4
    assert later.source == batch.source


# ------------------------------------------------------------------------- add_dataset
def _state_seen(buf):
    state = buf.get_state()
    state.pop("layout")  # slot placement: set_state compacts
    extras = {
        name: copy.deepcopy(vars(buf).get(name))
        for name in ("_last_indices", "_no_last", "_sequences", "_batch_token", "_max_priority")
    }
    return state, extras


def _same(a, b):
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("capacity", [20, 1_000], ids=["evicting", "roomy"])
@pytest.mark.parametrize("last", ["transitions", "sequences", "episodes"])
def test_a_refused_add_dataset_restores_all_but_the_next_item_id(tmp_path, kind, capacity, last):
    buf = kind(capacity, seed=0)
    buf.add(_episode("gone", 9, 12))
    buf.add([_episode("on0", 10, 5), _episode("on1", 11, 4, terminated=False)])
    if last == "transitions":
        batch = buf.sample(4)
    elif last == "sequences":
        batch = buf.sample(2, batch_length_T=2)
    else:
        batch = buf.sample(2, sample_episodes=True)
    if kind is PrioritizedEpisodeReplayBuffer and last != "episodes":
        buf.update_priorities(np.arange(1.0, len(batch.priority_items) + 1) * 2, batch)
    state, extras = _state_seen(buf)
    with DatasetWriter(tmp_path / "d") as writer:
        for i in range(6):
            writer.write(_episode(f"ok{i}", i, 5))
        writer.write(_episode("on0", 10, 3))  # on0 is done: refused after 30 steps went in
    with pytest.raises(ValueError, match="already done"):
        buf.add_dataset(tmp_path / "d")
    after, after_extras = _state_seen(buf)
    assert after.pop("next_uid") > state.pop("next_uid")  # ids are never issued twice
    _same(state, after)
    _same(extras, after_extras)


# ------------------------------------------------------------------ sequence_returns_to_go
def _stream(rng, count):
    data = {i: rng.randint(1, 12) for i in range(count)}
    done = dict.fromkeys(data, 0)
    while any(done[i] < data[i] for i in data):
        i = rng.choice([i for i in data if done[i] < data[i]])
        a = done[i]
        b = rng.randint(a + 1, min(data[i], a + 4))
        end = b == data[i] and rng.random() < 0.6
        yield SingleAgentEpisode(
            f"e{i}",
            observations=[np.array([i, t], np.float32) for t in range(a, b + 1)],
            actions=[0] * (b - a),
            rewards=[float(np.float32(np.sin(i * 7.0 + t))) for t in range(a, b)],
            terminated=end,
            t_started=a,
            len_lookback_buffer=0,
        )
        done[i] = b


@pytest.mark.parametrize("seed", range(12))
def test_returns_to_go_equal_a_brute_force_sum_over_every_cell(seed):
    rng = random.Random(seed)
    kind = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer][seed % 2]
    buf = kind(rng.choice([7, 12, 40]), seed=seed)
    ends: dict[int, int] = {}
    for piece in _stream(rng, rng.randint(2, 7)):
        buf.add(piece, on_evicted="drop")  # interleaved pieces, evictions, compaction
        ends[int(piece.id_[1:])] = piece.t_started + len(piece)
        gamma = rng.choice([0.0, 0.5, 1.0])
        kwargs = {"lookback": rng.choice([0, 1]), "pad": rng.random() < 0.5}
        if rng.random() < 0.5:
            kwargs["device"] = "cpu"
        try:
            batch = buf.sample(6, batch_length_T=rng.randint(1, 5), **kwargs)
        except ValueError:
            continue  # no window fits yet
        rtg, steps = sequence_returns_to_go(buf, batch, gamma=gamma)
        obs, indices = np.asarray(batch["obs"]), np.asarray(batch["indices"])
        for b, j in np.ndindex(indices.shape):
            if indices[b, j] < 0:
                assert rtg[b, j] == 0.0 and steps[b, j] == 0
                continue
            episode, t = int(obs[b, j, 0]), int(obs[b, j, 1])
            expected = 0.0
            for u in range(ends[episode] - 1, t - 1, -1):
                expected = float(np.float32(np.sin(episode * 7.0 + u))) + gamma * expected
            assert steps[b, j] == t
            assert rtg[b, j] == pytest.approx(expected, rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------- pipeline states
class _InPlace:
    """A filter whose get_state hands out its array and set_state writes into it."""

    def __init__(self):
        self.mean = np.zeros(2)

    def __call__(self, episodes, batch):
        return batch

    def get_state(self):
        return {"mean": self.mean}

    def set_state(self, state):
        self.mean[:] = state["mean"]


class _Picky:
    def __init__(self):
        self.value = 0

    def __call__(self, episodes, batch):
        return batch

    def get_state(self):
        return {"value": self.value}

    def set_state(self, state):
        if state["value"] < 0:
            raise ValueError("negative")
        self.value = state["value"]


def test_a_refused_pipeline_state_rolls_back_a_connector_that_sets_in_place():
    pipe = ConnectorPipeline([_InPlace(), _Picky()])
    with pytest.raises(ValueError, match="negative"):
        pipe.set_state({"0:_InPlace": {"mean": np.ones(2)}, "1:_Picky": {"value": -1}})
    assert pipe[0].mean.tolist() == [0.0, 0.0]


def test_a_nested_pipelines_refusal_rolls_back_the_outer_connectors():
    inner = ConnectorPipeline([_Picky()])
    outer = ConnectorPipeline([_Picky(), inner, _Picky()])
    good = {"0:_Picky": {"value": 5}, "1:ConnectorPipeline": {"0:_Picky": {"value": 3}}}
    with pytest.raises(ValueError, match="negative"):
        outer.set_state({**good, "2:_Picky": {"value": -1}})
    assert [outer[0].value, inner[0].value, outer[2].value] == [0, 0, 0]


def test_a_nested_pipelines_key_mismatch_names_where_it_is():
    outer = ConnectorPipeline([_Picky(), ConnectorPipeline([_Picky()])])
    state = {"0:_Picky": {"value": 1}, "1:ConnectorPipeline": {"9:_Picky": {"value": 3}}}
    with pytest.raises(ValueError, match="1:ConnectorPipeline"):
        outer.set_state(state)


# ------------------------------------------------------------------------ RLlib keywords
def test_the_keyword_wrapper_lets_a_space_through_where_init_takes_one():
    import gymnasium as gym

    from episodes.connectors.rllib_keywords import explains_rllib_keywords

    class Clip:
        @explains_rllib_keywords
        def __init__(self, space, *, inference=False):
            self.space = space

    space = gym.spaces.Box(-1.0, 1.0, (2,))
    assert Clip(space).space is space


# ------------------------------------------------------------------------------ runner
@pytest.mark.parametrize("value", [2.0, "3", None], ids=["float", "str", "none"])
def test_a_num_steps_of_another_type_is_not_blamed_on_the_window(value):
    from episodes.runner.step_count import checked_num_steps

    with pytest.raises((TypeError, ValueError)) as info:
        checked_num_steps(value, 2)
    assert "vector_steps" not in str(info.value)


# --------------------------------------------------------------------------------- io ids
def test_a_tuple_id_holding_a_numpy_scalar_is_stored_as_its_python_value(tmp_path):
    from episodes.io import read_episodes

    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(_episode((np.int64(1), "a"), 0, 2))
    (back,) = read_episodes(tmp_path / "d")
    assert back.id_ == (1, "a") and type(back.id_[0]) is int
