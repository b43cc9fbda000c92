"""``MeanStdFilter`` against a brute-force reference: what is counted, and the rows written.

- the episode ids a filter remembers: an id seen again (even with nothing new) stays among
  the recent ones, so short episodes coming and going do not push a long one out and let
  its steps count twice;
- hypothesis: random chunks of a few episodes (slices with lookbacks, cuts, concatenations,
  list or numpy'd, Box or nested Dict/Tuple spaces), given to shared learner/acting filters,
  frozen twins, with state round trips and resets between calls, equal a reference that keeps every
  counted (episode id, t) in a dict and takes numpy's mean and variance.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import tree
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import MeanStdFilter

BOX = gym.spaces.Box(-100.0, 100.0, (2,), np.float32)
NESTED = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(-100.0, 100.0, (2,), np.float32),
        "extra": gym.spaces.Tuple((gym.spaces.Box(0, 255, (), np.uint8),)),
    }
)
STEPS = 12


def _obs(space, value):
    """An observation of ``space`` from a float ``[3]`` row."""
    if space is BOX:
        return value[:2].astype(np.float32)
    return {"pos": value[:2].astype(np.float32), "extra": (np.uint8(value[2] % 256),)}


def _flat(obs):
    return np.concatenate([np.ravel(np.asarray(leaf, np.float64)) for leaf in tree.flatten(obs)])


def _whole(id_, space, seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(5.0, 3.0, (STEPS + 1, 3)) * [1.0, 1.0, 0.0] + [0, 0, seed * 7 + 1]
    values[:, 2] += np.arange(STEPS + 1) * 3
    obs = [_obs(space, v) for v in values]
    return SingleAgentEpisode(
        id_=id_,
        observations=obs,
        actions=[0] * STEPS,
        rewards=[0.0] * STEPS,
        observation_space=space,
        len_lookback_buffer=0,
    )


# --- the remembered episode ids ----------------------------------------------------------


def _track(monkeypatch, n):
    # The globals the call reads: with --doctest-modules the module may be imported twice,
    # and patching the other copy would change nothing.
    monkeypatch.setitem(MeanStdFilter.__call__.__globals__, "TRACKED_EPISODES", n)


def _short(i):
    return _whole(f"short{i}", BOX, 100 + i).slice(slice(0, 1))


def _seen_again_with_nothing_new(long):
    # The long episode comes back (as a learner replays it) without new steps, and grows now
    # and then: each time it is given whole, from its first step.
    return [long.slice(slice(0, 1 + call // 3)) for call in range(9)]


def _grows_every_call(long):
    return [long.slice(slice(0, 1 + call)) for call in range(9)]


@pytest.mark.parametrize(
    "chunks", [_seen_again_with_nothing_new, _grows_every_call], ids=lambda f: f.__name__[1:]
)
def test_long_episode_among_short_ones_is_counted_once(monkeypatch, chunks):
    _track(monkeypatch, 3)
    long = _whole("long", BOX, 0)
    filt = MeanStdFilter()
    seen = {}
    for call, chunk in enumerate(chunks(long)):
        shorts = [_short(2 * call), _short(2 * call + 1)]  # each seen in one call only
        filt([chunk, *shorts], {})
        for ep in (chunk, *shorts):
            for t in range(len(ep) + 1):
                seen[ep.id_, ep.t_started + t] = _flat(ep.get_observations(t))
    rows = np.stack(list(seen.values()))
    assert filt.count == len(seen)
    np.testing.assert_allclose(filt.mean, rows.mean(0), rtol=1e-12)
    np.testing.assert_allclose(filt.var, rows.var(0, ddof=1), rtol=1e-12)


def test_remembered_ids_stay_bounded_and_the_most_recent_are_kept(monkeypatch):
    _track(monkeypatch, 3)
    long = _whole("long", BOX, 0)
    filt = MeanStdFilter()
    for call in range(6):
        filt([long.slice(slice(0, 2)), _short(call)], {})
    assert list(filt._s.counted) == ["short4", "long", "short5"]


# --- brute-force reference ---------------------------------------------------------------


class _Reference:
    """Every counted observation by (id, t), without a bound on the ids remembered."""

    def __init__(self):
        self.marks = {}
        self.seen = []

    def count(self, ep):
        start = max(self.marks.get(ep.id_, ep.t_started), ep.t_started)
        for t in range(start, ep.t + 1):
            self.seen.append(_flat(ep.get_observations(t - ep.t_started)))
        self.marks[ep.id_] = max(self.marks.get(ep.id_, 0), ep.t + 1)

    def rows(self, ep, inference, eps=1e-6, clip=10.0):
        seen = np.stack(self.seen)
        std = seen.std(0, ddof=1) if len(seen) > 1 else np.zeros(seen.shape[1])
        ts = [len(ep)] if inference else range(len(ep))
        raw = np.stack([_flat(ep.get_observations(t)) for t in ts])
        return np.clip((raw - seen.mean(0)) / (std + eps), -clip, clip)


def _chunk(whole, kind, start, stop, lookback):
    if kind == "slice":
        return whole.slice(slice(start, stop), len_lookback_buffer=min(lookback, start))
    first = whole.slice(slice(start, (start + stop) // 2), len_lookback_buffer=0)
    if kind == "cut":  # the successor chunk, grown step by step as a runner records it
        nxt = first.cut(len_lookback_buffer=min(lookback, len(first)))
        for t in range(first.t + 1, stop + 1):
            nxt.add_env_step(whole.get_observations(t), 0, 0.0)
        return nxt
    rest = first.cut()
    for t in range(first.t + 1, stop + 1):
        rest.add_env_step(whole.get_observations(t), 0, 0.0)
    first.concat_episode(rest)
    return first


_CALL = st.tuples(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # which episode
            st.sampled_from(["slice", "cut", "concat"]),
            st.integers(0, STEPS - 1),
            st.integers(1, STEPS),
            st.integers(0, 3),  # lookback
            st.booleans(),  # numpy'd
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["learner", "acting", "frozen", "state round trip", "reset"]),
)


@settings(max_examples=60, deadline=None)
@given(space=st.sampled_from([BOX, NESTED]), calls=st.lists(_CALL, min_size=1, max_size=6))
def test_random_chunks_equal_the_reference(space, calls):
    wholes = [_whole(f"e{i}", space, i) for i in range(3)]
    learner = MeanStdFilter()
    acting, frozen = learner.shared(inference=True), learner.shared(update=False)
    ref = _Reference()
    for items, who in calls:
        eps = []
        for which, kind, start, length, lookback, numpy in items:
            stop = min(start + length, STEPS)
            ep = _chunk(wholes[which], kind, start, stop, lookback)
            eps.append(ep.to_numpy() if numpy else ep)
        if who == "state round trip":  # a synced state changes nothing, nor do its lists
            state = learner.get_state()
            learner.set_state(tree.map_structure(lambda x: np.asarray(x).tolist(), state))
            continue
        if who == "reset":  # forgets the statistics and the episodes, for every twin
            acting.reset()
            ref = _Reference()
            continue
        filt = {"learner": learner, "acting": acting, "frozen": frozen}[who]
        if who != "frozen":
            for ep in eps:
                ref.count(ep)
        if not ref.seen:
            continue  # a frozen filter before any observation: no statistics to compare
        out = filt(eps, {})
        assert filt.count == len(ref.seen)
        want = np.concatenate([ref.rows(ep, filt.inference) for ep in eps])
        got = out.get("obs")
        got = np.zeros((0, want.shape[1])) if got is None else got
        flat = np.concatenate(
            [np.asarray(leaf, np.float64).reshape(len(want), -1) for leaf in tree.flatten(got)],
            axis=1,
        )
        np.testing.assert_allclose(flat, want, rtol=1e-5, atol=1e-4)
    if ref.seen:
        seen = np.stack(ref.seen)
        np.testing.assert_allclose(_flat(learner.mean), seen.mean(0), rtol=1e-9, atol=1e-9)


# --- states read back from JSON ----------------------------------------------------------

PAIR = gym.spaces.Tuple((gym.spaces.Box(-9, 9, (2,)), gym.spaces.Box(-9, 9, (2,))))
JSON_SPACES = {
    "tuple of equal boxes": PAIR,
    "dict holding one": gym.spaces.Dict({"pair": PAIR, "x": gym.spaces.Box(-9, 9, (2,))}),
}


def _as_json(state):
    plain = tree.map_structure(lambda x: x.tolist() if isinstance(x, np.ndarray) else x, state)
    return json.loads(json.dumps(plain))


@pytest.mark.parametrize("space", list(JSON_SPACES.values()), ids=list(JSON_SPACES))
def test_json_state_of_a_tuple_space_is_taken_back(space):
    # JSON makes the Tuple's two equally shaped leaves one list of lists: a filter that knows
    # its layout reads it as the tuple it was, not as one (2, 2) array it refuses.
    space.seed(0)
    obs = [space.sample() for _ in range(5)]
    ep = SingleAgentEpisode(
        observations=obs,
        actions=[0] * 4,
        rewards=[0.0] * 4,
        observation_space=space,
        len_lookback_buffer=0,
    )
    filt = MeanStdFilter()
    filt([ep], {})
    state = filt.get_state()
    filt.set_state(_as_json(state))
    back = filt.get_state()
    assert back["count"] == 5
    tree.map_structure(np.testing.assert_array_equal, back["mean"], state["mean"])
    tree.map_structure(np.testing.assert_array_equal, back["m2"], state["m2"])
    twin, plain = MeanStdFilter(), MeanStdFilter()
    twin([ep], {})
    plain([ep], {})
    twin.merge(_as_json(state))
    plain.merge(state)
    assert twin.count == plain.count == 10
    np.testing.assert_allclose(_flat(twin.var), _flat(plain.var))
