"""Review of MeanStdFilter and the returns-to-go additions: the cases it found (fixed).

Each test states the behaviour the docs promise, which the code missed before the fix.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import ConnectorPipeline, MeanStdFilter

BOX = gym.spaces.Box(-100.0, 100.0, (2,), np.float32)
OBS = np.arange(10, dtype=np.float32).reshape(5, 2)  # columns 0, 2, .., 8 and 1, 3, .., 9


def _episode(obs=OBS, *, space=BOX):
    n = len(obs) - 1
    return SingleAgentEpisode(
        id_="e",
        observations=list(obs),
        actions=[0] * n,
        rewards=[0.0] * n,
        observation_space=space,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("other", ["zero_state", "frozen_filter"])
def test_merge_of_nothing_counted_leaves_readable_statistics(other):
    if other == "zero_state":
        given = {"count": 0, "mean": np.zeros(2), "m2": np.zeros(2)}
    else:
        given = MeanStdFilter(update=False)
        given([_episode()], {})  # rows written, nothing counted
    filt = MeanStdFilter()
    filt.merge(given)
    assert filt.count == 0
    state = filt.get_state()
    assert state["count"] == 0
    assert filt.var is None or not np.asarray(filt.var).any()


@pytest.mark.parametrize("count", [0, 1])
def test_state_without_deviations_does_not_skew_later_variance(count):
    filt = MeanStdFilter()
    state = {"count": count, "mean": OBS[0].astype(np.float64), "m2": np.full(2, 100.0)}
    try:
        filt.set_state(state)
    except ValueError:
        return  # refusing a state no stream gives is fine
    filt([_episode(OBS[1:] if count else OBS)], {})
    assert filt.count == 5
    np.testing.assert_allclose(filt.var, OBS.astype(np.float64).var(0, ddof=1))


def test_refused_pipeline_state_leaves_fresh_filter_unchanged():
    first, second = MeanStdFilter(), MeanStdFilter()
    pipe = ConnectorPipeline([first, second])
    bad = {
        "0:MeanStdFilter": {"count": 3, "mean": np.zeros(5), "m2": np.ones(5)},
        "1:MeanStdFilter": {"count": -1, "mean": np.zeros(5), "m2": np.ones(5)},
    }
    with pytest.raises(ValueError):
        pipe.set_state(bad)
    assert first.mean is None  # as before: no layout
    assert first([_episode()], {})["obs"].shape == (4, 2)


def test_state_of_lists_is_refused_or_read_as_arrays():
    filt = MeanStdFilter()
    try:
        filt.set_state({"count": 3, "mean": [0.0, 0.0], "m2": [2.0, 2.0]})
    except (TypeError, ValueError):
        return  # a clear refusal is fine
    assert filt([_episode()], {})["obs"].shape == (4, 2)


def test_normalize_of_empty_box_observations():
    space = gym.spaces.Box(-1.0, 1.0, (0,), np.float32)
    filt = MeanStdFilter()
    rows = filt([_episode([np.zeros(0, np.float32)] * 3, space=space)], {})["obs"]
    assert rows.shape == (2, 0)
    assert filt.normalize(np.zeros((4, 0), np.float32)).shape == (4, 0)


@pytest.mark.parametrize("bad", [np.inf, np.nan], ids=["inf", "nan"])
def test_gamma_zero_returns_to_go_agree_with_the_dataset(tmp_path, bad):
    from episodes.io import DatasetWriter
    from episodes.io.torch_data import SequenceDataset
    from episodes.replay import EpisodeReplayBuffer
    from episodes.replay.returns_to_go import sequence_returns_to_go

    episode = SingleAgentEpisode(
        "a",
        observations=[0, 1, 2, 3],
        actions=[0] * 3,
        rewards=[0.5, bad, 1.0],
        terminated=True,
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "data") as writer:
        writer.write(episode)
    item = SequenceDataset(tmp_path / "data", length=3, returns_to_go=0.0)[0]
    np.testing.assert_array_equal(item["returns_to_go"], [0.5, bad, 1.0])
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "data", seed=0)
    rtg, _ = sequence_returns_to_go(buf, buf.sample(1, batch_length_T=3), gamma=0.0)
    np.testing.assert_array_equal(rtg[0], item["returns_to_go"])
