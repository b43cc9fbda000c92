"""Replay sampling: ``gamma`` where it has no effect, batch-size errors, sequence infos.

- ``gamma`` given with ``batch_length_T`` or ``sample_episodes`` (nothing discounted there) is
  a ``ValueError``, as ``n_step`` is; leaving it out (None) stays accepted everywhere;
- a bad ``batch_size_B`` is refused by that name, not as ``num_items``;
- with ``include_infos`` a sequence column holds the info of its ``next_obs``, as a transition
  batch does (the episode's final info at its last stored step), and ``{}`` where padded.

The comparisons with RLlib 2.60 are in tests/differential/test_session33_rllib_replay_moved.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EmptyBufferError, EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _chunk(id_: str, t0: int, n: int, **flags: Any) -> SingleAgentEpisode:
    """Steps ``t0 .. t0 + n`` of an episode: observation ``t``, info ``{"id", "t"}``."""
    return SingleAgentEpisode(
        id_,
        observations=[np.array([t], np.float32) for t in range(t0, t0 + n + 1)],
        actions=[t % 3 for t in range(t0, t0 + n)],
        rewards=[float(t) for t in range(t0, t0 + n)],
        infos=[{"id": id_, "t": t} for t in range(t0, t0 + n + 1)],
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    )


def _buffer(cls: type = EpisodeReplayBuffer) -> EpisodeReplayBuffer:
    buf = cls(100, seed=0)
    # "a" arrives in two chunks with "b" between them; "c" is ongoing.
    buf.add([_chunk("a", 0, 3), _chunk("b", 0, 4, truncated=True), _chunk("a", 3, 2)])
    buf.add([_chunk("a", 5, 0, terminated=True), _chunk("c", 0, 3)])
    return buf


def _state(buf: EpisodeReplayBuffer) -> tuple[Any, ...]:
    return buf.rng.bit_generator.state, buf.get_sampled_timesteps(), buf.get_num_timesteps()


# ------------------------------------------------------------------------------------ gamma
UNITS = {
    "sequences": dict(batch_length_T=2),
    "padded-sequences": dict(batch_length_T=2, pad=True, lookback=1),
    "whole-episodes": dict(sample_episodes=True),
    "episode-chunks": dict(sample_episodes=True, batch_length_T=2),
}
GAMMAS = {
    "half": 0.5,
    "zero": 0.0,
    "rllib-default": 0.99,
    "one": 1.0,
    "numpy": np.float32(0.9),
    "bad": "0.9",
}


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("unit", list(UNITS))
@pytest.mark.parametrize("gamma", list(GAMMAS))
def test_gamma_given_where_nothing_is_discounted_is_refused(cls, unit, gamma):
    buf = _buffer(cls)
    before = _state(buf)
    with pytest.raises(ValueError, match=r"^gamma applies to transitions .* got "):
        buf.sample(2, gamma=GAMMAS[gamma], **UNITS[unit])
    assert _state(buf) == before  # nothing drawn, nothing counted
    with pytest.raises(ValueError, match="^gamma applies to transitions"):  # before emptiness
        cls(10).sample(2, gamma=GAMMAS[gamma], **UNITS[unit])


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("unit", list(UNITS))
def test_gamma_left_out_is_taken_everywhere(cls, unit):
    left_out = _buffer(cls).sample(3, **UNITS[unit])
    none = _buffer(cls).sample(3, gamma=None, **UNITS[unit])
    if isinstance(left_out, list):
        assert [(ep.id_, ep.t_started, len(ep)) for ep in left_out] == [
            (ep.id_, ep.t_started, len(ep)) for ep in none
        ]
    else:
        assert left_out["indices"].tolist() == none["indices"].tolist()
    with pytest.raises(EmptyBufferError):
        cls(10).sample(2, **UNITS[unit])


@pytest.mark.parametrize("cls", BUFFERS)
def test_transitions_still_discount_by_gamma(cls):
    def batch(**kwargs: Any) -> dict[str, np.ndarray]:
        return _buffer(cls).sample(16, n_step=2, **kwargs)

    default, none, given = batch(), batch(gamma=None), batch(gamma=0.99)
    np.testing.assert_array_equal(default["discounts"], none["discounts"])
    np.testing.assert_array_equal(default["discounts"], given["discounts"])
    half = batch(gamma=0.5)
    np.testing.assert_allclose(half["discounts"], 0.5 ** half["n_step"])
    for bad in (1.5, "0.9", True):
        with pytest.raises(ValueError, match="gamma must be a float in"):
            _buffer(cls).sample(2, gamma=bad)


# ------------------------------------------------------------------------------- batch size
BATCH_SIZES = {
    "batch_size_B-zero": (dict(batch_size_B=0), "batch_size_B must be an int >= 1, got 0"),
    "batch_size_B-str": (dict(batch_size_B="2"), "batch_size_B must be an int >= 1, got '2'"),
    "batch_size_B-float": (dict(batch_size_B=2.0), "batch_size_B must be an int >= 1, got 2.0"),
    "num_items-zero": (dict(num_items=0), "num_items must be an int >= 1, got 0"),
    "num_items-negative": (dict(num_items=-3), "num_items must be an int >= 1, got -3"),
    "both": (dict(num_items=2, batch_size_B=2), "give num_items or batch_size_B, not both"),
}


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("case", list(BATCH_SIZES))
def test_a_bad_batch_size_is_named_as_given(cls, case):
    kwargs, message = BATCH_SIZES[case]
    for buf in (_buffer(cls), cls(10)):  # on an empty buffer too
        before = _state(buf)
        with pytest.raises(ValueError) as error:
            buf.sample(**kwargs)
        assert str(error.value) == message
        assert _state(buf) == before
    assert len(_buffer(cls).sample(batch_size_B=np.int64(3))["obs"]) == 3


# ------------------------------------------------------------------------------ sequence infos
def _info_of_next_obs(buf: EpisodeReplayBuffer) -> dict[int, Any]:
    """Item index -> info of its next observation, read from one-step transition batches."""
    out: dict[int, Any] = {}
    while len(out) < buf.get_num_timesteps():
        batch = buf.sample(64, include_infos=True)
        out.update(zip(batch["indices"].tolist(), batch["infos"].tolist()))
    return out


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize(
    ("T", "lookback", "pad"),
    [(1, 0, False), (3, 0, False), (2, 2, False), (4, 3, True), (6, 0, True)],
    ids=["one", "three", "lookback", "lookback-padded", "padded"],
)
def test_sequence_infos_are_those_of_next_obs(cls, T, lookback, pad):
    buf = _buffer(cls)
    want = _info_of_next_obs(buf)
    seq = buf.sample(64, batch_length_T=T, lookback=lookback, pad=pad, include_infos=True)
    infos, mask, indices = seq["infos"], seq["mask"], seq["indices"]
    assert infos.shape == mask.shape and infos.dtype == object
    for b, j in zip(*np.nonzero(mask)):
        info = infos[b, j]
        assert info == want[int(indices[b, j])]
        assert info == {"id": info["id"], "t": int(seq["next_obs"][b, j, 0])}  # next_obs's
    assert all(info == {} for info in infos[~mask].tolist())
    if pad or lookback:
        assert (~mask).any()


def test_sequence_infos_hold_the_final_info_and_cells_are_fresh():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_chunk("a", 0, 2, terminated=True))  # the repro's three-observation episode
    seq = buf.sample(4, batch_length_T=2, include_infos=True)
    assert seq["next_obs"][:, :, 0].tolist() == [[1.0, 2.0]] * 4
    assert seq["infos"].tolist() == [[{"id": "a", "t": 1}, {"id": "a", "t": 2}]] * 4
    assert seq["is_terminated"][:, 1].all()  # the final info beside the terminal flag
    rows = {0: [{"id": "a", "t": 1}, {"id": "a", "t": 2}, {}], 1: [{"id": "a", "t": 2}, {}, {}]}

    def padded() -> np.ndarray:
        batch = buf.sample(8, batch_length_T=3, pad=True, include_infos=True)
        assert set(batch["indices"][:, 0].tolist()) == {0, 1}  # seed 0 draws both starts
        for start, row in zip(batch["indices"][:, 0].tolist(), batch["infos"].tolist()):
            assert row == rows[start]
        return batch["infos"]

    infos = padded()
    assert infos[0, 2] is not infos[1, 2]  # a new dict in every cell
    seq["infos"][0, 1]["t"] = 99
    infos[0, 2]["x"] = 1
    padded()  # the buffer holds what it held


def test_sequence_infos_follow_a_later_chunk_of_the_episode():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_chunk("a", 0, 2))
    assert buf.sample(2, batch_length_T=2, include_infos=True)["infos"][0, 1] == {"id": "a", "t": 2}
    head = _chunk("a", 2, 2)
    head.infos[0] = {"id": "a", "t": 2}
    buf.add(head)
    seq = buf.sample(32, batch_length_T=4, include_infos=True)
    assert seq["infos"].tolist() == [[{"id": "a", "t": t} for t in range(1, 5)]] * 32
