"""Pinned differences from RLlib 2.60 in ``batch_length_T`` sequences and episode chunks.

One test per docs/deviations.md replay row (the row's key is in the comment after the test's
name). OUR behaviour is asserted, and RLlib 2.60's too, so a test fails the day RLlib changes
(then revisit the row and docs/replay.md's "Differences from RLlib 2.60"). RLlib draws from
its own generator; it is seeded, and the rows compared are picked by their first observation.
Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_replay_session13.py
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402
from ray.rllib.utils.replay_buffers.episode_replay_buffer import (  # noqa: E402
    EpisodeReplayBuffer as RBuffer,
)
from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (  # noqa: E402
    PrioritizedEpisodeReplayBuffer as RPrioritized,
)

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.replay import (  # noqa: E402
    EmptyBufferError,
    EpisodeReplayBuffer,
    PrioritizedEpisodeReplayBuffer,
)

ROOT = Path(__file__).resolve().parents[2]


def test_every_tagged_replay_row_is_pinned():
    text = (ROOT / "docs" / "deviations.md").read_text()
    table = text.split("# Replay buffers")[1]
    tags = re.findall(r"^\|[^|\n]*\[([a-z0-9-]+)\] \|", table, flags=re.MULTILINE)
    assert "chunk-count" in tags and "episode-include-flags" in tags
    tests = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    assert [tag for tag in tags if f'# "{tag}"' not in tests] == []


def _twins(length: int, terminated: bool = True) -> tuple[EpisodeReplayBuffer, RBuffer]:
    """Both buffers holding one episode: observations t, actions 10 + t, rewards 100 + t."""
    kwargs = dict(
        observations=[np.array([float(t)], np.float32) for t in range(length + 1)],
        actions=[10 + t for t in range(length)],
        rewards=[100.0 + t for t in range(length)],
        terminated=terminated,
        len_lookback_buffer=0,
    )
    ours, theirs = EpisodeReplayBuffer(100, seed=0), RBuffer(capacity=100)
    ours.add(OSAE("a", **kwargs))
    theirs.add(RSAE(id_="a", **kwargs))
    theirs.rng = np.random.default_rng(0)
    return ours, theirs


def _rows_from(batch: dict, first_obs: float) -> dict:
    """The rows of a ``[B, T, 1]`` batch whose first observation is ``first_obs``."""
    rows = np.asarray(batch["obs"])[:, 0, 0] == first_obs
    assert rows.any()
    return {key: np.asarray(value)[rows][0].squeeze().tolist() for key, value in batch.items()}


def test_sequence_rewards_are_the_reward_after_the_action():  # "seq-reward-alignment"
    ours, theirs = _twins(4)
    rl = _rows_from(theirs.sample(batch_size_B=32, batch_length_T=4), 0.0)
    assert rl["actions"] == [10, 11, 12, 13]
    assert rl["rewards"] == [0.0, 100.0, 101.0, 102.0]  # RLlib: the reward that led to o_t
    mine = _rows_from(ours.sample(8, batch_length_T=4), 0.0)
    assert mine["actions"] == [10, 11, 12, 13]
    assert mine["rewards"] == [100.0, 101.0, 102.0, 103.0]  # ours: r_{t+1}, after a_t
    assert mine["next_obs"] == [1.0, 2.0, 3.0, 4.0]
    # A row starting mid-episode: RLlib's first reward is the previous step's.
    assert _rows_from(theirs.sample(batch_size_B=32, batch_length_T=2), 2.0)["rewards"] == [
        101.0,
        102.0,
    ]


def test_sequences_never_cross_an_episode_border():  # "seq-episode-border"
    ours, theirs = _twins(2)
    rl = _rows_from(theirs.sample(batch_size_B=32, batch_length_T=4), 0.0)
    # RLlib: the terminal observation is a step of its own (the last action repeated), and
    # the row runs on into an episode drawn next (here the same one), marked by is_first.
    assert rl["obs"] == [0.0, 1.0, 2.0, 0.0] and rl["actions"] == [10, 11, 11, 10]
    assert rl["is_first"] == [True, False, False, True]
    assert rl["is_last"] == [False, False, True, True]
    assert rl["is_terminated"] == [False, False, True, False]
    # Ours: no 4-step row fits in a 2-step episode; with pad the row stops at the border.
    with pytest.raises(EmptyBufferError, match="batch_length_T=4"):
        ours.sample(8, batch_length_T=4)
    mine = _rows_from(ours.sample(16, batch_length_T=4, pad=True), 0.0)
    assert mine["obs"] == [0.0, 1.0, 0.0, 0.0] and mine["mask"] == [True, True, False, False]
    assert mine["is_first"] == [True, False, False, False]
    assert mine["is_last"] == [False, True, False, False]
    assert mine["is_terminated"] == [False, True, False, False]  # the transition into o_T
    assert mine["next_obs"][:2] == [1.0, 2.0]


def test_chunk_starts_leave_room_for_the_whole_chunk():  # "chunk-starts"
    ours, theirs = _twins(4)
    rl = theirs.sample(batch_size_B=400, batch_length_T=3, sample_episodes=True, n_step=1)
    # RLlib: a start from every step; chunks near the end are cut short.
    assert sorted({(ep.t_started, len(ep)) for ep in rl}) == [(0, 3), (1, 3), (2, 2), (3, 1)]
    mine = ours.sample(400, batch_length_T=3, sample_episodes=True)
    assert sorted({(ep.t_started, len(ep)) for ep in mine}) == [(0, 3), (1, 3)]
    # Longer than any episode: RLlib returns shorter chunks, ours refuses.
    assert {len(ep) for ep in theirs.sample(8, batch_length_T=5, sample_episodes=True, n_step=1)}
    with pytest.raises(EmptyBufferError, match="episode chunk"):
        ours.sample(8, batch_length_T=5, sample_episodes=True)


def test_chunk_count_is_the_batch_size():  # "chunk-count"
    ours, theirs = _twins(10)
    rl = theirs.sample(batch_size_B=12, batch_length_T=3, sample_episodes=True, n_step=1)
    # RLlib counts each chunk as its length + 1 towards batch_size_B: at most 12 / 2 chunks.
    assert len(rl) <= 6
    assert len(ours.sample(12, batch_length_T=3, sample_episodes=True)) == 12


def test_sampled_timesteps_count_items():  # "seq-sampled-timesteps"
    ours, theirs = _twins(10, terminated=False)
    theirs.sample(batch_size_B=4, batch_length_T=3)
    ours.sample(4, batch_length_T=3)
    assert theirs.get_sampled_timesteps() == 12  # RLlib: B * T
    assert ours.get_sampled_timesteps() == 4  # ours: items (sequences)
    theirs.sample(batch_size_B=4, batch_length_T=3, sample_episodes=True, n_step=1)
    ours.sample(4, batch_length_T=3, sample_episodes=True)
    assert theirs.get_sampled_timesteps() == 16 and ours.get_sampled_timesteps() == 8  # + B


@pytest.mark.parametrize("n_step", [(1, 2), 3], ids=["range-of-one", "three"])
def test_sequences_refuse_an_n_step(n_step):  # "seq-n-step"
    ours, theirs = _twins(10)
    # RLlib's sequences (no sample_episodes) ignore n_step; its chunks assert n_step == 1.
    assert np.asarray(theirs.sample(batch_size_B=2, batch_length_T=3, n_step=n_step)["obs"]).shape[
        :2
    ] == (2, 3)
    with pytest.raises(AssertionError, match="n-step must be 1"):
        theirs.sample(batch_size_B=2, batch_length_T=3, sample_episodes=True, n_step=n_step)
    for sample_episodes in (False, True):
        with pytest.raises(ValueError, match="n_step applies to transitions"):
            ours.sample(2, batch_length_T=3, n_step=n_step, sample_episodes=sample_episodes)


def _twins_with_vf(prioritized: bool = False):
    """Both buffers holding one 6-step episode with a recorded ``vf`` extra model output."""
    kwargs = dict(
        observations=[np.array([float(t)], np.float32) for t in range(7)],
        actions=[0] * 6,
        rewards=[1.0] * 6,
        infos=[{"t": t} for t in range(7)],
        extra_model_outputs={"vf": [0.5] * 6},
        terminated=True,
        len_lookback_buffer=0,
    )
    ours = (PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer)(100, seed=0)
    theirs = (RPrioritized if prioritized else RBuffer)(capacity=100)
    ours.add(OSAE("a", **kwargs))
    theirs.add(RSAE(id_="a", **kwargs))
    theirs.rng = np.random.default_rng(0)
    return ours, theirs


@pytest.mark.parametrize("length", [None, 3], ids=["whole-or-one-step", "chunks"])
def test_sampled_episodes_carry_no_n_step_or_weights(length):  # "episode-n-step-weights"
    ours, theirs = _twins_with_vf()
    rl = theirs.sample(4, sample_episodes=True, n_step=1, batch_length_T=length)
    # RLlib: every sampled episode carries n_step (the asked n) and weights extras.
    assert {"n_step", "weights"} <= set(rl[0].extra_model_outputs)
    assert np.asarray(rl[0].get_extra_model_outputs("n_step")).tolist() == [1] * len(rl[0])
    # Ours: the recorded extras only; n_step, discounts and weights are transition columns.
    mine = ours.sample(4, sample_episodes=True, batch_length_T=length)
    assert [sorted(ep.extra_model_outputs) for ep in mine] == [["vf"]] * 4
    assert {"n_step", "discounts", "weights"} <= set(ours.sample(4, n_step=2))


def test_prioritized_weights_are_for_transitions_only():  # "episode-n-step-weights"
    ours, theirs = _twins_with_vf(prioritized=True)
    # RLlib's prioritized buffer returns one-step episodes, with beta's weights as extras.
    rl = theirs.sample(4, beta=0.4, n_step=1)
    assert all(len(ep) == 1 and "weights" in ep.extra_model_outputs for ep in rl)
    # Ours: a transition batch carries the weights, a sequence batch one per sequence (its
    # start's); beta with episodes is refused.
    assert ours.sample(4, beta=0.4)["weights"].shape == (4,)
    assert ours.sample(4, beta=0.4, batch_length_T=2)["weights"].shape == (4,)
    for kwargs in (dict(sample_episodes=True), dict(sample_episodes=True, batch_length_T=2)):
        with pytest.raises(ValueError, match="beta applies to transitions"):
            ours.sample(4, beta=0.4, **kwargs)


def test_include_flags_with_sampled_episodes():  # "episode-include-flags"
    ours, theirs = _twins_with_vf()
    # RLlib: one-step episodes carry the recorded extras only when asked; chunks always.
    plain = theirs.sample(4, sample_episodes=True, n_step=1)
    asked = theirs.sample(4, sample_episodes=True, n_step=1, include_extra_model_outputs=True)
    assert "vf" not in plain[0].extra_model_outputs and "vf" in asked[0].extra_model_outputs
    chunk = theirs.sample(4, sample_episodes=True, n_step=1, batch_length_T=2)[0]
    assert "vf" in chunk.extra_model_outputs
    # Its prioritized buffer's episodes carry the infos only with include_infos.
    _, prioritized = _twins_with_vf(prioritized=True)
    assert prioritized.sample(2, n_step=1)[0].get_infos() == [{}, {}]
    assert prioritized.sample(2, n_step=1, include_infos=True)[0].get_infos()[0] != {}
    # Ours: sampled episodes always carry both, and the flags, which would change nothing,
    # are refused.
    mine = ours.sample(2, sample_episodes=True)[0]
    assert list(mine.extra_model_outputs) == ["vf"] and mine.get_infos()[0] == {"t": 0}
    for flag in ("include_infos", "include_extra_model_outputs"):
        with pytest.raises(ValueError, match=flag):
            ours.sample(2, sample_episodes=True, **{flag: True})
