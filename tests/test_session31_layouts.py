"""Layouts numpy columns hold: native byte order, records of their own dtype, no masked arrays,
and ``copy=False`` reads of equivalent dtypes."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner

torch = pytest.importorskip("torch")


class _BigEndianEnv(VectorEnv):  # type: ignore[misc]
    """Big-endian observations and rewards; every episode lasts 3 steps."""

    def __init__(self, mode: AutoresetMode, n: int = 2):
        self.num_envs = n
        self.single_observation_space = gym.spaces.Box(-1e3, 1e3, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.metadata = {"autoreset_mode": mode}
        self.mode, self.k = mode, 0

    def _obs(self) -> np.ndarray:
        return np.full((self.num_envs, 2), self.k, ">f4")

    def reset(self, *, seed=None, options=None):  # noqa: ANN001, ANN202
        self.k = 0
        return self._obs(), {}

    def step(self, actions):  # noqa: ANN001, ANN202
        n, infos = self.num_envs, {}
        if self.mode is AutoresetMode.NEXT_STEP and self.k == 3:
            self.k = 0
            flags = np.zeros(n, bool)
            return self._obs(), np.zeros(n, ">f8"), flags, flags, {}
        self.k += 1
        ended = np.full(n, self.k == 3)
        if self.mode is AutoresetMode.SAME_STEP and self.k == 3:
            finals = np.empty(n, dtype=object)
            finals[:] = list(self._obs())
            infos = {"final_obs": finals, "_final_obs": ended.copy()}
            self.k = 0
        return self._obs(), np.ones(n, ">f8"), ended, np.zeros(n, bool), infos


def _big_endian_policy(obs):  # noqa: ANN001, ANN202
    n = len(obs)
    return np.zeros(n, ">i8"), {"vf_preds": np.zeros(n, ">f4"), "action_logp": np.zeros(n, ">f4")}


def _build(numpy_first: bool) -> SingleAgentEpisode:
    box, discrete = gym.spaces.Box(-5, 5, (2,), np.float32), gym.spaces.Discrete(2)
    ep = SingleAgentEpisode("x", observation_space=box, action_space=discrete)
    if numpy_first:
        ep.to_numpy()
    ep.add_env_reset(np.zeros(2, ">f4"))
    ep.add_env_step(np.ones(2, ">f4"), np.array(1, ">i8"), np.array(0.5, ">f4"))
    ep.add_env_step(np.ones(2, ">f4"), np.array(0, ">i8"), np.array(1.5, ">f4"))
    return ep if numpy_first else ep.to_numpy()


def test_numpy_columns_take_native_byte_order() -> None:
    # A: numpy'd before its steps or after, an episode holds the same native dtypes.
    first, after = _build(True), _build(False)
    for ep in (first, after):
        columns = (ep.get_observations(), ep.get_actions(), ep.get_rewards())
        assert [c.dtype.str[1:] for c in columns] == ["f4", "i8", "f4"]
        assert all(c.dtype.isnative for c in columns)
    assert first == after


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_runner_blocks_are_native(mode: AutoresetMode) -> None:
    # A: a big-endian env and policy record native chunks (one dtype in every chunk of an
    # episode), and the converter's fast path over the blocks gives what the general one does.
    from episodes.converter import episodes_to_rollout

    runner = EnvRunner(_BigEndianEnv(mode), _big_endian_policy, seed=0)
    chunks = runner.sample(5)
    later = runner.sample(2)
    for chunk in [*chunks, *later]:
        leaves = [
            chunk.get_observations(),
            chunk.get_actions(),
            chunk.get_rewards(),
            chunk.get_extra_model_outputs("vf_preds"),
        ]
        assert all(leaf.dtype.isnative for leaf in leaves)
        assert chunk.get_observations().dtype == np.float32
    fast = episodes_to_rollout(chunks, gamma=0.99, value_fn=lambda o: np.zeros(len(o)))
    general = episodes_to_rollout(list(chunks), gamma=0.99, value_fn=lambda o: np.zeros(len(o)))
    assert torch.equal(fast.storage.observations, general.storage.observations)
    assert torch.equal(fast.storage.actions, general.storage.actions)


def test_torch_env_records_big_endian_numpy_outputs() -> None:
    # A: a torch env's recorder moves big-endian numpy outputs to the device, natively.
    from episodes.envs.torch_cartpole import TorchCartPole

    def policy(obs):  # noqa: ANN001, ANN202
        n = len(obs)
        return np.zeros(n, np.int64), {"vf": np.zeros(n, ">f4"), "k": np.arange(n).astype(">i8")}

    chunk = EnvRunner(TorchCartPole(2, device="cpu"), policy, seed=0).sample(3)[1]
    assert chunk.get_extra_model_outputs("vf").dtype == np.float32
    assert chunk.get_extra_model_outputs("k").tolist() == [1, 1, 1]


def test_replay_columns_are_native(tmp_path) -> None:  # noqa: ANN001
    # A: a chunk of big-endian columns (wrapped arrays keep their byte order) is stored
    # natively: device samples work, and every read path gives the same dtypes.
    ep = SingleAgentEpisode(
        "a",
        observations=InfiniteLookbackBuffer(np.arange(10, dtype=">f8").reshape(5, 2)),
        actions=InfiniteLookbackBuffer(np.arange(4, dtype=">i4")),
        rewards=InfiniteLookbackBuffer(np.ones(4, ">f4")),
        extra_model_outputs={"e": InfiniteLookbackBuffer(np.zeros((4, 2), ">f8"))},
        len_lookback_buffer=0,
        terminated=True,
    )
    buf = EpisodeReplayBuffer(capacity=100, seed=0)
    buf.add(ep)
    buf.save(tmp_path / "rb")
    for b in (buf, EpisodeReplayBuffer.load(tmp_path / "rb")):
        sample = b.sample(2, n_step=1)
        assert (sample["obs"].dtype, sample["actions"].dtype) == (np.float64, np.int32)
        assert b.sample(2, n_step=1, device="cpu")["obs"].dtype == torch.float64
        assert b.sample(2, batch_length_T=2, device="cpu")["obs"].dtype == torch.float64
        assert b.get_episodes()[0].get_observations().tolist() == ep.get_observations().tolist()


def test_torch_datasets_give_native_items(tmp_path) -> None:  # noqa: ANN001
    # A: a dataset's big-endian leaves (stored raw) come out native, so a DataLoader collates.
    from torch.utils.data import DataLoader

    from episodes.io.torch_data import SequenceDataset, TransitionDataset

    obs = np.arange(10, dtype=">f4").reshape(5, 2)
    ep = SingleAgentEpisode(
        "a",
        observations=InfiniteLookbackBuffer(obs),
        actions=[0, 1, 0, 1],
        rewards=[1.0] * 4,
        extra_model_outputs={"vf": InfiniteLookbackBuffer(np.arange(4, dtype=">f8"))},
        terminated=True,
        len_lookback_buffer=0,
    ).to_numpy()
    with DatasetWriter(tmp_path) as writer:
        writer.write(ep)
    for data in (TransitionDataset(tmp_path), SequenceDataset(tmp_path, length=2)):
        batch = next(iter(DataLoader(data, batch_size=2)))
        assert batch["obs"].dtype == torch.float32
        assert batch["obs"].reshape(-1).tolist()[:2] == [0.0, 1.0]
    assert TransitionDataset(tmp_path)[1]["extra_model_outputs"]["vf"].dtype == np.float64


def test_ray_blocks_of_big_endian_columns_hold_their_values() -> None:
    # A: Ray's blocks of big-endian step columns: no bytes read as native, no Arrow refusal.
    pytest.importorskip("ray")
    from episodes.distributed.data import _numeric_block

    table = _numeric_block(
        {"obs": np.arange(6, dtype=">f4").reshape(3, 2), "action": np.array([0, 1, 2], ">i8")}
    )
    assert table.column("action").to_pylist() == [0, 1, 2]
    assert np.asarray(table.column("obs").combine_chunks().to_numpy()).tolist() == [
        [0.0, 1.0],
        [2.0, 3.0],
        [4.0, 5.0],
    ]


_RECORD = np.dtype([("a", "f4"), ("b", "i4")])


def _records() -> SingleAgentEpisode:
    rec = np.array((1.5, 7), _RECORD)[()]
    return SingleAgentEpisode(
        "s", observations=[rec, rec], actions=[0], rewards=[1.0], len_lookback_buffer=0
    ).to_numpy()


@pytest.mark.parametrize(
    "write",
    [
        lambda ep: ep.add_env_step(5.9, 0, 1.0),
        lambda ep: ep.set_observations(new_data=-2.5, at_indices=0),
        lambda ep: ep.set_observations(new_data=np.array([1.0, 2.0]), at_indices=slice(0, 2)),
        lambda ep: ep.observations.extend(np.array([1.0, 2.0])),
        lambda ep: ep.set_observations(
            new_data=np.array((3.5, 1), [("a", "f8"), ("b", "i8")])[()], at_indices=0
        ),
    ],
    ids=["step", "set", "set-batch", "extend-batch", "other-record"],
)
def test_record_columns_take_records_only(write) -> None:  # noqa: ANN001
    # B: a plain number is no record (numpy would broadcast it into every field).
    ep = _records()
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match="not a record of the column's structured dtype"):
        write(ep)
    assert ep == before and ep.get_observations().tolist() == before.get_observations().tolist()
    big = np.array((3.5, 1), _RECORD.newbyteorder(">"))[()]  # the same record, byte-swapped
    ep.set_observations(new_data=big, at_indices=0)
    assert ep.get_observations().tolist()[0] == (3.5, 1)


def _masked(t: float) -> np.ma.MaskedArray:
    return np.ma.masked_array([t, -999.0], mask=[False, True])


def _plain_episode(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "m", observations=[np.zeros(2)] * 3, actions=[0, 0], rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )  # fmt: skip
    return ep.to_numpy() if numpy else ep


def _list_masked() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "m", observations=[_masked(t) for t in range(3)], actions=[0, 0], rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )  # fmt: skip


_MASKED_WRITES = {
    "to_numpy": (_list_masked, lambda ep: ep.to_numpy()),
    "add_env_step": (lambda: _plain_episode(True), lambda ep: ep.add_env_step(_masked(1), 0, 1)),
    "nested-step": (
        lambda: SingleAgentEpisode("n", observations=[{"x": np.zeros(2)}]).to_numpy(),
        lambda ep: ep.add_env_step({"x": _masked(1.0)}, 0, 1.0),
    ),
    "set": (
        lambda: _plain_episode(True),
        lambda ep: ep.set_observations(new_data=[np.ones(2), _masked(2.0)], at_indices=[0, 1]),
    ),
    "extend": (
        lambda: _plain_episode(True),
        lambda ep: ep.observations.extend([np.ones(2), _masked(2.0)]),
    ),
    "wrapped": (
        lambda: _plain_episode(True),
        lambda ep: InfiniteLookbackBuffer(np.ma.masked_array(np.ones(3), mask=[0, 1, 0])),
    ),
}


@pytest.mark.parametrize("case", list(_MASKED_WRITES))
def test_masked_arrays_are_refused_in_numpy_columns(case: str) -> None:
    # C: a numpy column would drop the mask (masked values read back as data), as the writer
    # says; refused, the episode unchanged.
    make, write = _MASKED_WRITES[case]
    ep = make()
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match="masked array with masked entries"):
        write(ep)
    assert ep.is_numpy == before.is_numpy and len(ep) == len(before)
    if ep.is_numpy:
        assert ep == before


def test_masked_arrays_are_refused_by_replay_add() -> None:
    # C: replay add refuses them as it refuses other values it cannot store (TypeError).
    buf = EpisodeReplayBuffer(capacity=10)
    with pytest.raises(TypeError, match="masked array with masked entries"):
        buf.add(_list_masked())
    assert buf.get_num_timesteps() == 0
    nothing_masked = SingleAgentEpisode(
        "p", observations=[np.ma.masked_array([t, 0.0]) for t in range(3)], actions=[0, 0],
        rewards=[1.0, 1.0], len_lookback_buffer=0,
    )  # fmt: skip
    buf.add(nothing_masked)  # none masked: the plain array it holds
    assert buf.get_num_timesteps() == 2


@pytest.mark.parametrize(
    ("column", "dtype"),
    [
        (np.arange(4, dtype=np.int64), "q"),
        (np.array(["ab", "c"]), "<U2"),
        (np.array([1, 2], "M8[s]"), "M8[s]"),
        (np.arange(3, dtype=">f4"), ">f4"),
    ],
    ids=["int64-q", "str", "datetime", "big-endian"],
)
def test_asarray_copy_false_takes_views_of_equivalent_dtypes(column, dtype) -> None:  # noqa: ANN001
    # D: numpy gives a new view object for an equivalent dtype; no copy is needed.
    buf = InfiniteLookbackBuffer(column)
    view = np.asarray(buf, dtype=dtype, copy=False)
    assert np.shares_memory(view, column) and view.tolist() == column.tolist()
    with pytest.raises(ValueError, match="without a copy"):  # the other byte order needs one
        np.asarray(buf, dtype=column.dtype.newbyteorder("S"), copy=False)
