"""Imitation learning from datasets: padded sequence windows, expert relabelling, aggregation.

A recurrent or transformer behaviour-cloning policy trains on fixed-length windows, and an
expert's episodes are often shorter than the window: ``SequenceDataset(pad=True)`` gives every
step a window, padded past its episode's end with zeros and a ``mask``, as the replay
buffers' ``pad=True`` does. DAgger rounds relabel a learner's chunks with the expert's actions
and append them to the dataset the learner trains on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode  # noqa: E402
from episodes.io import DatasetWriter, dataset_info  # noqa: E402
from episodes.io.torch_data import NoWindowsWarning, SequenceDataset  # noqa: E402
from episodes.io.window_padding import padded_window  # noqa: E402
from episodes.runner import EnvRunner  # noqa: E402
from tests.io._pieces import numbered_piece  # noqa: E402


def _expected(pieces: list[tuple[int, int, int, str]], length: int) -> list[dict[str, Any]]:
    """Padded windows by hand: per episode (number, t0, t1, end), one per step, in order."""
    out = []
    for number, t0, t1, end in pieces:
        for t in range(t0, t1):
            steps = min(length, t1 - t)
            obs = [[number, s] for s in range(t, t + steps + 1)] + [[0, 0]] * (length - steps)
            done = [False] * length
            if t + steps == t1:
                done[steps - 1] = True
            out.append(
                {
                    "obs": obs,
                    "actions": [s % 3 for s in range(t, t + steps)] + [0] * (length - steps),
                    "rewards": [float(s) for s in range(t, t + steps)] + [0.0] * (length - steps),
                    "terminated": done if end == "terminated" else [False] * length,
                    "truncated": done if end == "truncated" else [False] * length,
                    "mask": [True] * steps + [False] * (length - steps),
                }
            )
    return out


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    keys = ("obs", "actions", "rewards", "terminated", "truncated", "mask")
    return {key: np.asarray(item[key]).tolist() for key in keys}


PAD_CASES = {
    # name: (pieces written (number, id, t0, t1, end), episodes as read, length)
    "short episode": ([(0, "a", 0, 3, "terminated")], [(0, 0, 3, "terminated")], 5),
    "exactly the length": ([(0, "a", 0, 4, "truncated")], [(0, 0, 4, "truncated")], 4),
    "longer, ends padded": ([(0, "a", 0, 6, "terminated")], [(0, 0, 6, "terminated")], 4),
    "running episode": ([(0, "a", 2, 5, "")], [(0, 2, 5, "")], 4),
    "two pieces joined": (
        [(0, "a", 0, 2, ""), (0, "a", 2, 5, "truncated")],
        [(0, 0, 5, "truncated")],
        4,
    ),
    "two episodes": (
        [(0, "a", 0, 2, "terminated"), (1, "b", 0, 6, "terminated")],
        [(0, 0, 2, "terminated"), (1, 0, 6, "terminated")],
        3,
    ),
    "length one": ([(0, "a", 0, 3, "terminated")], [(0, 0, 3, "terminated")], 1),
}


@pytest.mark.parametrize("name", list(PAD_CASES))
def test_padded_windows_table(tmp_path, name):
    written, episodes, length = PAD_CASES[name]
    with DatasetWriter(tmp_path) as w:
        for number, id_, t0, t1, end in written:
            w.write(numbered_piece(id_, t0, t1, end, number))
    data = SequenceDataset(tmp_path, length=length, pad=True)
    want = _expected(episodes, length)
    assert len(data) == len(want)
    assert [_plain(data[i]) for i in range(len(data))] == want
    # The windows' first steps, as the replay buffers name them.
    _, t = data.episode_steps(range(len(data)))
    assert t.tolist() == [t0 + k for _, t0, t1, _ in episodes for k in range(t1 - t0)]


def test_short_episodes_give_windows_only_padded(tmp_path):
    with DatasetWriter(tmp_path) as w:
        w.write(numbered_piece("a", 0, 3, "terminated"))
    with pytest.warns(NoWindowsWarning):
        assert len(SequenceDataset(tmp_path, length=5)) == 0
    assert len(SequenceDataset(tmp_path, length=5, pad=True)) == 3


def test_unpadded_items_keep_their_keys(tmp_path):
    with DatasetWriter(tmp_path) as w:
        w.write(numbered_piece("a", 0, 6, "terminated"))
    plain = SequenceDataset(tmp_path, length=3)
    padded = SequenceDataset(tmp_path, length=3, pad=True)
    assert "mask" not in plain[0] and len(plain) == 4
    for i in range(len(plain)):  # a full window is the same item, with an all-True mask
        item = padded[i]
        assert item["mask"].tolist() == [True] * 3
        assert _plain({**plain[i], "mask": item["mask"]}) == _plain(item)


@pytest.mark.parametrize("pad", ["yes", 1, None])
def test_pad_must_be_a_flag(tmp_path, pad):
    with DatasetWriter(tmp_path) as w:
        w.write(numbered_piece("a", 0, 3, "terminated"))
    with pytest.raises(TypeError, match="pad"):
        SequenceDataset(tmp_path, length=2, pad=pad)


def test_padded_nested_observations_and_extras_collate(tmp_path):
    space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-9, 9, (2,), np.float32), "k": gym.spaces.Discrete(9)}
    )
    with DatasetWriter(tmp_path) as w:
        for id_, n in (("a", 2), ("b", 5)):
            obs = [{"pos": np.float32([t, -t]), "k": t} for t in range(n + 1)]
            w.write(
                SingleAgentEpisode(
                    id_,
                    observations=obs,
                    observation_space=space,
                    actions=[np.float32([t, 1]) for t in range(n)],
                    rewards=[1.0] * n,
                    extra_model_outputs={"expert": [np.float32([t, 1]) for t in range(n)]},
                    terminated=True,
                    len_lookback_buffer=0,
                ).to_numpy()
            )
    data = SequenceDataset(tmp_path, length=4, pad=True)
    batch = next(iter(torch.utils.data.DataLoader(data, batch_size=len(data))))
    assert batch["obs"]["pos"].shape == (7, 5, 2) and batch["obs"]["k"].shape == (7, 5)
    assert batch["actions"].shape == (7, 4, 2) and batch["mask"].shape == (7, 4)
    assert batch["obs"]["pos"].dtype == torch.float32
    first = data[0]  # episode "a" from t=0: 2 steps, 3 observations, then zeros
    assert first["obs"]["k"].tolist() == [0, 1, 2, 0, 0]
    assert first["extra_model_outputs"]["expert"][:, 0].tolist() == [0, 1, 0, 0]
    # The expert column matches the actions wherever the mask says a step is real.
    mask = batch["mask"]
    assert torch.equal(batch["extra_model_outputs"]["expert"][mask], batch["actions"][mask])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lengths=st.lists(st.integers(0, 7), min_size=1, max_size=4),
    length=st.integers(1, 6),
    cut=st.integers(0, 7),
)
def test_padded_windows_cover_every_step(tmp_path_factory, lengths, length, cut):
    """Episodes written in one or two pieces: one window per step, as written whole."""
    path = tmp_path_factory.mktemp("pad")
    episodes = []
    with DatasetWriter(path) as w:
        for number, n in enumerate(lengths):
            end = "terminated" if number % 2 else "truncated"
            c = min(cut, n)
            if 0 < c < n:  # two pieces that continue one another
                w.write(numbered_piece(number, 0, c, "", number))
                w.write(numbered_piece(number, c, n, end, number))
            else:
                w.write(numbered_piece(number, 0, n, end, number))
            episodes.append((number, 0, n, end))
    data = SequenceDataset(path, length=length, pad=True)
    want = _expected(episodes, length)
    assert [_plain(data[i]) for i in range(len(data))] == want


def test_padded_window_pads_each_leaf():
    item = {
        "obs": {"a": np.arange(3), "b": (np.ones((3, 2), np.float32),)},
        "actions": np.array([1, 2]),
        "terminated": np.array([False, True]),
    }
    out = padded_window(item, 4, 2)
    assert out["obs"]["a"].tolist() == [0, 1, 2, 0, 0]
    assert out["obs"]["b"][0].shape == (5, 2) and out["obs"]["b"][0].dtype == np.float32
    assert out["actions"].tolist() == [1, 2, 0, 0]
    assert out["terminated"].tolist() == [False, True, False, False]
    assert out["mask"].tolist() == [True, True, False, False]


def _cartpole_expert(obs: np.ndarray) -> np.ndarray:
    return (obs[..., 2] + 0.5 * obs[..., 3] > 0).astype(np.int64)


def test_dagger_rounds_relabel_and_append(tmp_path):
    """Learner chunks relabelled with the expert's actions, appended round after round."""

    def vector_env() -> Any:
        return gym.vector.SyncVectorEnv(
            [lambda: gym.make("CartPole-v1", max_episode_steps=25)] * 2,
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )

    runner = EnvRunner(vector_env(), lambda o: (_cartpole_expert(o), {}), seed=0)
    with DatasetWriter(tmp_path) as w:
        w.write_many(runner.sample(30))
    rng = np.random.default_rng(0)
    steps = 60
    for round_ in range(2):
        learner = EnvRunner(
            vector_env(), lambda o: (rng.integers(0, 2, len(o)), {}), seed=round_ + 1
        )
        for _ in range(2):
            chunks = learner.sample(10)
            with DatasetWriter(tmp_path) as w:
                for chunk in chunks:
                    chunk.set_actions(new_data=_cartpole_expert(chunk.get_observations()[:-1]))
                    w.write(chunk)
            steps += 20
    info = dataset_info(tmp_path)
    assert info.num_steps == steps
    ids = [summary.id_ for summary in info.episodes]
    assert len(set(ids)) == len(ids)
    data = SequenceDataset(tmp_path, length=8, pad=True)
    assert len(data) == steps
    for batch in torch.utils.data.DataLoader(data, batch_size=16, shuffle=True):
        mask = batch["mask"]
        expert = _cartpole_expert(batch["obs"][:, :-1].numpy())
        assert (torch.as_tensor(expert)[mask] == batch["actions"][mask]).all()


def test_setting_an_unknown_extra_output_says_how_to_add_one():
    chunk = numbered_piece("a", 0, 3, "terminated")
    with pytest.raises(AssertionError, match=r"to add one, assign extra_model_outputs\['expert'\]"):
        chunk.set_extra_model_outputs(key="expert", new_data=np.zeros(3))
    assert "expert" not in chunk.extra_model_outputs
    # What the message says works: a column of one value per stored action.
    lookback = chunk.actions.lookback
    chunk.extra_model_outputs["expert"] = InfiniteLookbackBuffer(
        np.arange(3, dtype=np.int64), lookback=lookback
    )
    chunk.validate()
    assert chunk.get_extra_model_outputs("expert").tolist() == [0, 1, 2]


def test_a_pickle_without_pad_reads_unpadded(tmp_path):
    """A dataset pickled by a build before ``pad`` (no such field) reads as before."""
    with DatasetWriter(tmp_path) as w:
        w.write(numbered_piece("a", 0, 4, "terminated"))
    data = SequenceDataset(tmp_path, length=2)
    state = data.__getstate__()
    del state["pad"]
    old = SequenceDataset.__new__(SequenceDataset)
    old.__setstate__(state)
    assert len(old) == 3 and "mask" not in old[2]
    assert old[2]["obs"][:, 1].tolist() == [2, 3, 4]
