"""``add(on_evicted=...)``: chunks continuing an episode an earlier add evicted.

"raise" (the default) refuses the add, buffer unchanged, with the id on the error; "drop"
drops such chunks (their steps count as added) and stores the rest; "restart" stores them as
a new episode under the id, which leaves the evicted ids. Chunks of an episode the same add
evicts go with it in every mode. Checked against a plain-Python model of the buffer.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import (
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)
from episodes.runner import EnvRunner, RandomPolicy

from ._episodes import chunk, chunk_streams, make_episode_data
from .reference import RefBuffer, RefEpisode, assert_states_equal, check_transition_batch

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]
MODES = ["drop", "restart"]


class ModeRef(RefBuffer):
    """The plain-Python model with ``on_evicted``; extra model outputs kept per uid."""

    def __init__(self, capacity: int, on_evicted: str = "raise"):
        super().__init__(capacity)
        self.on_evicted = on_evicted
        self.num_evicted = 0
        self.logp: dict[int, float] = {}

    def _add(self, chunks: list[Any]) -> None:
        before = set(self.evicted)  # evicted by earlier adds
        for c in chunks:
            n = len(c)
            if n == 0:
                continue
            if c.id_ in before:
                if self.on_evicted == "raise":
                    raise ValueError(f"{c.id_} was evicted")
                if self.on_evicted == "drop":
                    self.added += n
                    continue
                before.discard(c.id_)  # restart: a new episode under the id
                self.evicted.remove(c.id_)
            self.added += n
            if c.id_ in self.evicted:  # evicted by an earlier chunk of this add
                continue
            ep = self.episodes.get(c.id_)
            if ep is None:
                ep = self.episodes[c.id_] = RefEpisode(c.id_, c.t_started)
                ep.obs.append(c.get_observations(0))
                ep.infos.append(c.get_infos(0))
            for i in range(n):
                ep.obs.append(c.get_observations(i + 1))
                ep.infos.append(c.get_infos(i + 1))
                ep.actions.append(c.get_actions(i))
                ep.rewards.append(float(c.get_rewards(i)))
                ep.uids.append(self.next_uid)
                self.logp[self.next_uid] = float(c.get_extra_model_outputs("logp", i))
                self.next_uid += 1
            ep.terminated, ep.truncated = c.is_terminated, c.is_truncated
            while self.num_timesteps > self.capacity and len(self.episodes) > 1:
                id_, _ = self.episodes.popitem(last=False)
                self.evicted.append(id_)
                self.num_evicted += 1


def _check_against(buf: Any, ref: ModeRef) -> None:
    assert buf.get_episode_ids() == list(ref.episodes)
    assert buf.get_evicted_ids() == ref.evicted
    assert buf.get_num_timesteps() == ref.num_timesteps
    assert buf.get_added_timesteps() == ref.added
    assert buf.get_num_episodes_evicted() == ref.num_evicted
    for ep, want in zip(buf.get_episodes(), ref.episodes.values()):
        assert (ep.id_, ep.t_started, len(ep)) == (want.id_, want.t_begin, len(want))
        np.testing.assert_array_equal(np.asarray(ep.get_observations()), np.asarray(want.obs))
        np.testing.assert_array_equal(np.asarray(ep.get_rewards()), np.float32(want.rewards))
        assert (ep.is_terminated, ep.is_truncated) == (want.terminated, want.truncated)
    uids = [u for ep in ref.episodes.values() for u in ep.uids]
    if uids:
        batch = buf.get_transitions(uids, n_step=3, gamma=0.5)
        check_transition_batch(ref, batch, 3, 3, 0.5)


def _evicted_a(cls: Any, capacity: int = 3) -> tuple[Any, dict[str, Any]]:
    """A buffer whose "a" (steps 0..2) was evicted by "b" (2 steps); "a"'s data."""
    data = make_episode_data(0, 8)
    buf = cls(capacity, seed=0)
    buf.add(chunk("a", data, 0, 2))
    buf.add(chunk("b", make_episode_data(1, 2), 0, 2))
    assert buf.get_episode_ids() == ["b"] and buf.get_evicted_ids() == ["a"]
    return buf, data


# --------------------------------------------------------------------------- the three modes
# [a's next chunk (steps 2..4), a new "c" of one step] into the buffer _evicted_a leaves:
# (mode, stored ids, evicted ids, steps stored, steps added, episodes evicted)
CASES = [
    ("drop", ["b", "c"], ["a"], 3, 7, 1),
    ("restart", ["a", "c"], ["b"], 3, 7, 2),  # a (2 steps from t=2) + b = 4 > 3: b goes
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("mode, ids, evicted, steps, added, num_evicted", CASES)
def test_modes_store_as_documented(cls, mode, ids, evicted, steps, added, num_evicted):
    buf, data = _evicted_a(cls)
    buf.add([chunk("a", data, 2, 4), chunk("c", make_episode_data(2, 1), 0, 1)], on_evicted=mode)
    assert buf.get_episode_ids() == ids and buf.get_evicted_ids() == evicted
    assert buf.get_num_timesteps() == steps and buf.get_added_timesteps() == added
    assert buf.get_num_episodes_evicted() == num_evicted
    if mode == "restart":
        (ep,) = [ep for ep in buf.get_episodes() if ep.id_ == "a"]
        assert ep.t_started == 2 and len(ep) == 2
        np.testing.assert_array_equal(ep.get_observations(), np.stack(data["obs"][2:5]))


@pytest.mark.parametrize("cls", BUFFERS)
def test_raise_is_the_default_and_names_the_id(cls):
    buf, data = _evicted_a(cls)
    state = buf.get_state()
    for kwargs in ({}, {"on_evicted": "raise"}):
        with pytest.raises(EvictedEpisodeError, match="on_evicted='drop'") as info:
            buf.add([chunk("c", make_episode_data(2, 1), 0, 1), chunk("a", data, 2, 4)], **kwargs)
        assert info.value.episode_id == "a"
        assert_states_equal(buf.get_state(), state)
    again = pickle.loads(pickle.dumps(info.value))  # e.g. from a runner process
    assert again.episode_id == "a" and str(again) == str(info.value)


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("bad", ["skip", "RAISE", "", None, 1, True, ["drop"], ("drop",)])
def test_other_values_are_refused_and_change_nothing(cls, bad):
    buf, data = _evicted_a(cls)
    state = buf.get_state()
    with pytest.raises(ValueError, match="'raise', 'drop' or 'restart'"):
        buf.add(chunk("a", data, 2, 4), on_evicted=bad)
    with pytest.raises(ValueError, match="'raise', 'drop' or 'restart'"):
        buf.add(chunk("c", make_episode_data(2, 1), 0, 1), on_evicted=bad)
    assert_states_equal(buf.get_state(), state)


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("mode", MODES)
def test_several_chunks_of_an_evicted_episode_in_one_add(cls, mode):
    data = make_episode_data(0, 8)
    buf = cls(10, seed=0)
    buf.add(chunk("a", data, 0, 2))
    buf.add(chunk("c", make_episode_data(2, 9), 0, 9))  # 11 > 10: a goes
    buf.add([chunk("a", data, 2, 4), chunk("a", data, 4, 7)], on_evicted=mode)
    assert buf.get_added_timesteps() == 2 + 9 + 5
    if mode == "drop":
        assert buf.get_episode_ids() == ["c"] and buf.get_evicted_ids() == ["a"]
        assert buf.get_num_timesteps() == 9
    else:  # one episode from t=2, 5 steps; 9 + 2 > 10: c goes
        assert buf.get_episode_ids() == ["a"] and buf.get_evicted_ids() == ["c"]
        (ep,) = buf.get_episodes()
        assert (ep.t_started, len(ep)) == (2, 5)
        np.testing.assert_array_equal(ep.get_observations(), np.stack(data["obs"][2:8]))


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "second, words",
    [
        ((5, 7, {}), "starts at t=5"),  # a gap after the first chunk
        ((4, 7, {"shift": 1.0}), "differs from the one"),  # another border observation
    ],
)
def test_chunks_of_an_evicted_episode_are_checked_against_each_other(cls, mode, second, words):
    buf, data = _evicted_a(cls)
    state = buf.get_state()
    a, b, how = second
    later = chunk("a", data, a, b)
    if how:
        later = SingleAgentEpisode(
            "a",
            observations=[o + how["shift"] for o in data["obs"][a : b + 1]],
            actions=data["actions"][a:b],
            rewards=data["rewards"][a:b],
            extra_model_outputs={"logp": data["logp"][a:b]},
            t_started=a,
            len_lookback_buffer=0,
        )
    with pytest.raises(ValueError, match=words):
        buf.add([chunk("a", data, 2, 4), later], on_evicted=mode)
    assert_states_equal(buf.get_state(), state)


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("mode", MODES)
def test_an_evicted_episode_ended_by_a_chunk_without_steps(cls, mode):
    buf, data = _evicted_a(cls)
    end = SingleAgentEpisode(
        "a", observations=[data["obs"][2]], t_started=2, terminated=True, len_lookback_buffer=0
    )
    buf.add(end, on_evicted=mode)  # nothing to store or restart: the id stays evicted
    assert buf.get_episode_ids() == ["b"] and buf.get_evicted_ids() == ["a"]
    assert buf.get_added_timesteps() == 4
    # After a chunk with steps in the same add, the end ends what that chunk began.
    end = SingleAgentEpisode(
        "a", observations=[data["obs"][4]], t_started=4, terminated=True, len_lookback_buffer=0
    )
    buf.add([chunk("a", data, 2, 4), end], on_evicted=mode)
    assert buf.get_added_timesteps() == 6
    if mode == "drop":
        assert buf.get_episode_ids() == ["b"] and buf.get_evicted_ids() == ["a"]
    else:  # 2 + 2 > 3: b goes
        assert buf.get_episode_ids() == ["a"] and buf.get_evicted_ids() == ["b"]
        (ep,) = buf.get_episodes()
        assert (ep.t_started, len(ep), ep.is_terminated) == (2, 2, True)
    with pytest.raises(ValueError, match="already done"):  # drop: a dropped end counts too
        buf.add([chunk("a", data, 2, 4), end, chunk("a", data, 4, 5)], on_evicted=mode)


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("mode", ["raise", *MODES])
def test_chunks_of_an_episode_this_add_evicts_go_with_it_in_every_mode(cls, mode):
    data = make_episode_data(0, 4)
    buf = cls(3, seed=0)
    buf.add(chunk("a", data, 0, 2))
    # "b" (3 steps) evicts "a"; a's next chunk goes with it, as had it come before "b".
    buf.add([chunk("b", make_episode_data(1, 3), 0, 3), chunk("a", data, 2, 4)], on_evicted=mode)
    assert buf.get_episode_ids() == ["b"] and buf.get_evicted_ids() == ["a"]
    assert buf.get_added_timesteps() == 7 and buf.get_num_episodes_evicted() == 1


def test_restarted_then_evicted_again():
    buf, data = _evicted_a(EpisodeReplayBuffer)
    buf.add(chunk("a", data, 2, 4), on_evicted="restart")  # b goes
    buf.add(chunk("d", make_episode_data(3, 3), 0, 3))  # a goes again
    assert buf.get_episode_ids() == ["d"] and buf.get_evicted_ids() == ["b", "a"]
    assert buf.get_num_episodes_evicted() == 3
    with pytest.raises(EvictedEpisodeError):
        buf.add(chunk("a", data, 4, 6))
    buf.add(chunk("a", data, 4, 6), on_evicted="restart")  # 3 + 2 > 3: d goes
    assert buf.get_episode_ids() == ["a"] and buf.get_evicted_ids() == ["b", "d"]
    assert buf.get_num_episodes_evicted() == 4 and buf.get_episodes()[0].t_started == 4


def test_prioritized_weight_stays_positional():
    buf, data = _evicted_a(PrioritizedEpisodeReplayBuffer)
    buf.add(chunk("a", data, 2, 4), 3.0, on_evicted="restart")
    assert buf.get_priorities(buf.get_episode_indices("a")).tolist() == [3.0, 3.0]


# ------------------------------------------------------------------- a restarted episode's samples
def _restarted() -> tuple[Any, ModeRef]:
    """A buffer holding "a" restarted at t=3 (6 steps, terminated) and "c"; the model of it."""
    data = make_episode_data(0, 9)
    first = [chunk("a", data, 0, 3)]
    later = [chunk("b", make_episode_data(1, 8), 0, 8)]  # 11 > 10: a goes
    last = [chunk("a", data, 3, 9, terminated=True), chunk("c", make_episode_data(2, 4), 0, 4)]
    buf, ref = EpisodeReplayBuffer(10, seed=3), ModeRef(10, "restart")
    for chunks in (first, later, last):  # the last: a restarts, 8 + 6 > 10: b goes
        buf.add(chunks, on_evicted="restart")
        ref.add(chunks)
    assert buf.get_episode_ids() == ["a", "c"] and buf.get_evicted_ids() == ["b"]
    assert ref.episodes["a"].t_begin == 3
    return buf, ref


def test_restarted_transitions_match_the_model():
    buf, ref = _restarted()
    _check_against(buf, ref)
    batch = buf.sample(64, n_step=(1, 4), gamma=0.9)
    check_transition_batch(ref, batch, 1, 3, 0.9)
    assert {tuple(o) for o in batch["obs"].tolist()} <= {
        tuple(o.tolist()) for ep in ref.episodes.values() for o in ep.obs
    }


def _want_row(ref: ModeRef, uid: int, lookback: int, length: int) -> dict[str, list[Any]]:
    ep, k = ref.where(uid)
    zero = np.zeros_like(ep.obs[0])
    want: dict[str, list[Any]] = {key: [] for key in ("obs", "next_obs", "actions", "rewards")}
    for key in ("mask", "is_first", "is_last", "is_terminated", "indices", "logp"):
        want[key] = []
    for p in range(k - lookback, k + length):
        inside = 0 <= p < len(ep)
        want["obs"].append(ep.obs[p] if inside else zero)
        want["next_obs"].append(ep.obs[p + 1] if inside else zero)
        want["actions"].append(ep.actions[p] if inside else 0)
        want["rewards"].append(ep.rewards[p] if inside else 0.0)
        want["logp"].append(ref.logp[ep.uids[p]] if inside else 0.0)
        want["mask"].append(inside)
        want["is_first"].append(inside and p == 0)
        want["is_last"].append(inside and p == len(ep) - 1)
        want["is_terminated"].append(inside and p == len(ep) - 1 and ep.terminated)
        want["indices"].append(ep.uids[p] if inside else -1)
    return want


@pytest.mark.parametrize("lookback", [0, 2, 5])
def test_restarted_sequences_match_the_model(lookback):
    buf, ref = _restarted()
    length = 3
    batch = buf.sample(
        64, batch_length_T=length, lookback=lookback, include_extra_model_outputs=True
    )
    seen = set()
    for i in range(64):
        uid = int(batch["indices"][i, lookback])
        seen.add(ref.where(uid)[0].id_)
        want = _want_row(ref, uid, lookback, length)
        for key, values in want.items():
            got = batch[key][i]
            if key in ("rewards", "logp"):
                np.testing.assert_allclose(got, np.float32(values), rtol=1e-6, err_msg=key)
            else:
                np.testing.assert_array_equal(got, np.asarray(values), err_msg=key)
    assert "a" in seen


def test_restarted_episode_samples_as_an_episode():
    buf, ref = _restarted()
    want = ref.episodes["a"]
    whole = [ep for ep in buf.sample(32, sample_episodes=True) if ep.id_ == "a"]
    assert whole
    for ep in whole:
        assert (ep.t_started, len(ep), ep.is_terminated) == (3, 6, True)
        np.testing.assert_array_equal(np.asarray(ep.get_observations()), np.asarray(want.obs))
        assert list(ep.get_actions()) == want.actions
    chunks = [ep for ep in buf.sample(64, sample_episodes=True, batch_length_T=2, lookback=4)]
    for ep in chunks:
        held = ref.episodes[ep.id_]
        k = ep.t_started - held.t_begin  # where the chunk starts in the stored episode
        assert ep.observations.lookback == min(4, k)  # no lookback before t=3: none stored
        all_obs = np.asarray(ep.observations.data)  # lookback, then the chunk's 3
        assert all_obs.shape[0] == ep.observations.lookback + 3
        lo = k - ep.observations.lookback
        np.testing.assert_array_equal(all_obs, np.asarray(held.obs[lo : k + 3]))
    assert any(ep.id_ == "a" and ep.t_started == 3 for ep in chunks)


def _all_transitions(buf: Any) -> dict[str, Any]:
    items = np.concatenate([buf.get_episode_indices(id_) for id_ in buf.get_episode_ids()])
    batch = buf.get_transitions(items, n_step=2, gamma=0.5)
    batch.pop("indices", None)
    return batch


@pytest.mark.parametrize("cls", BUFFERS)
def test_restarted_episode_state_and_save_round_trips(cls, tmp_path):
    data, other_data = make_episode_data(0, 8), make_episode_data(1, 8)
    buf = cls(6, seed=0)
    buf.add(chunk("a", data, 0, 2))
    buf.add(chunk("b", other_data, 0, 5))  # 7 > 6: a goes
    buf.add([chunk("a", data, 2, 3)], on_evicted="restart")  # 5 + 1 steps: both kept
    assert buf.get_episode_ids() == ["b", "a"] and buf.get_evicted_ids() == []
    state = buf.get_state()
    copy_ = cls(6)
    copy_.set_state(state)
    assert_states_equal(copy_.get_state(), state)
    buf.save(tmp_path / "saved")
    loaded = cls.load(tmp_path / "saved")
    for other in (copy_, loaded):
        assert other.get_episode_ids() == ["b", "a"] and other.get_evicted_ids() == []
        assert other.get_num_episodes_evicted() == 1
        eps = {ep.id_: ep for ep in other.get_episodes()}
        assert (eps["a"].t_started, len(eps["a"])) == (2, 1)
        np.testing.assert_array_equal(eps["a"].get_observations(), np.stack(data["obs"][2:4]))
        got, want = (_all_transitions(other), _all_transitions(buf))  # a load renumbers items
        assert_states_equal(got, want)
        other.add(chunk("a", data, 3, 5))  # a is stored there: the chunk continues it
        assert other.get_episode_ids() == ["a"] and other.get_evicted_ids() == ["b"]
        with pytest.raises(EvictedEpisodeError):  # b was evicted by that add
            other.add(chunk("b", other_data, 5, 7))


# ---------------------------------------------------------------------------- the runner's case
def _runner_adds(cls: Any, mode: str | None) -> tuple[Any, list[Any], list[Any]]:
    env = gym.make_vec("Pendulum-v1", 4, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    buf = cls(500, seed=0)
    ids: list[Any] = []  # in order of first appearance: env i's first episode is ids[i]
    errors = []
    for _ in range(6):
        chunks = runner.sample(50)
        ids += [c.id_ for c in chunks if c.id_ not in ids]
        before = buf.get_state()
        try:
            buf.add(chunks, **({} if mode is None else {"on_evicted": mode}))
        except EvictedEpisodeError as error:
            errors.append(error)
            assert_states_equal(buf.get_state(), before)
    env.close()
    return buf, ids, errors


@pytest.mark.parametrize("cls", BUFFERS)
def test_runner_with_a_capacity_below_its_running_episodes(cls):
    # 4 envs x 200-step Pendulum episodes, 50 steps per sample, capacity 500: the third
    # sample evicts env 0's running episode, whose next chunk comes with the fourth.
    buf, ids, errors = _runner_adds(cls, None)
    assert errors and errors[0].episode_id == ids[0]
    buf, ids, errors = _runner_adds(cls, "drop")
    assert not errors and len(ids) == 8
    assert buf.get_episode_ids() == ids[4:] and buf.get_evicted_ids() == ids[:4]
    assert (buf.get_num_timesteps(), buf.get_added_timesteps()) == (400, 1200)
    assert buf.get_num_episodes_evicted() == 4
    buf, ids, errors = _runner_adds(cls, "restart")
    assert not errors and len(ids) == 8
    assert buf.get_episode_ids() == [ids[0], *ids[4:]] and buf.get_evicted_ids() == ids[1:4]
    assert (buf.get_num_timesteps(), buf.get_added_timesteps()) == (450, 1200)
    assert buf.get_num_episodes_evicted() == 4
    ep = buf.get_episodes()[0]  # env 0's first episode from t=150 to its truncation at 200
    assert (ep.id_, ep.t_started, len(ep), ep.is_truncated) == (ids[0], 150, 50, True)


# ------------------------------------------------------------------- against the model, random
@st.composite
def runner_adds(draw: Any) -> list[list[SingleAgentEpisode]]:
    """A vector env's samples: per round, each env's chunks of ``steps`` steps, one add each."""
    num_envs, steps = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    rounds = draw(st.integers(1, 8))
    adds: list[list[SingleAgentEpisode]] = [[] for _ in range(rounds)]
    count = 0
    for _ in range(num_envs):
        t, left = 0, steps * rounds  # the steps this env runs
        while left:
            length = draw(st.integers(1, 12))
            end = draw(st.sampled_from(["terminated", "truncated"]))
            data = make_episode_data(count, length)
            id_, count = f"e{count}", count + 1
            a = 0
            while a < length and left:
                room = steps - t % steps  # left in this round
                b = min(length, a + room, a + left)
                last = b == length
                adds[t // steps].append(
                    chunk(
                        id_,
                        data,
                        a,
                        b,
                        terminated=last and end == "terminated",
                        truncated=last and end == "truncated",
                    )
                )
                t, left, a = t + b - a, left - (b - a), b
    for part in adds:  # a vector env's chunks arrive in no particular order
        order = draw(st.permutations(range(len(part))))
        part[:] = [part[i] for i in order]
    return adds


@settings(max_examples=80, deadline=None)
@given(
    adds=runner_adds(),
    capacity=st.integers(2, 16),
    mode=st.sampled_from(["raise", *MODES]),
    prioritized=st.booleans(),
)
def test_random_runner_samples_match_the_model(adds, capacity, mode, prioritized):
    cls = BUFFERS[prioritized]
    buf, ref = cls(capacity, seed=0), ModeRef(capacity, mode)
    for part in adds:
        try:
            ref.add(part)
        except ValueError:
            assert mode == "raise"
            state = buf.get_state()
            with pytest.raises(EvictedEpisodeError) as info:
                buf.add(part)
            assert info.value.episode_id in ref.evicted
            assert_states_equal(buf.get_state(), state)
            return  # the refused add's chunks are lost: later ones would leave gaps
        buf.add(copy.deepcopy(part), on_evicted=mode)
        _check_against(buf, ref)


@settings(max_examples=40, deadline=None)
@given(
    stream=chunk_streams(max_episodes=6, max_len=10),
    capacity=st.integers(2, 14),
    cuts=st.lists(st.integers(0, 40), max_size=10),
    mode=st.sampled_from(MODES),
)
def test_random_streams_match_the_model(stream, capacity, cuts, mode):
    buf, ref = EpisodeReplayBuffer(capacity, seed=0), ModeRef(capacity, mode)
    bounds = sorted({0, len(stream), *[c for c in cuts if c < len(stream)]})
    for lo, hi in zip(bounds, bounds[1:]):
        ref.add(stream[lo:hi])
        buf.add(stream[lo:hi], on_evicted=mode)
        _check_against(buf, ref)
