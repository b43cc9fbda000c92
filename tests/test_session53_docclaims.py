"""Claims of the session-53 docs, checked where no other test holds them.

The quickstart's "Coming from CleanRL" says a Box whose dtype a script set to a numpy scalar
type (``envs.single_observation_space.dtype = np.float32``, as CleanRL's SAC and TD3 do)
"works". The runner recorded with it, but everything that saved the chunk's space (a chunk's
``get_state``, a replay buffer's ``get_state`` and ``save``, the dataset writers) read
``space.dtype.isnative`` and crashed (fixed: the space's dtype is read through ``np.dtype``).

replay.md's MBPO recipe and api.md say ``add_rollouts`` stores what ``add`` of one episode per
rollout stores; api.md says ``load_episodes`` gives an id asked twice as two episodes sharing
nothing. Those hold; the cases below are the ones the other tests leave out (torch inputs,
mutable parts of episodes loaded twice).
"""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
torch = pytest.importorskip("torch")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import DatasetWriter, EpisodeWriter, load_episodes  # noqa: E402
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer  # noqa: E402
from episodes.runner import EnvRunner, RandomPolicy  # noqa: E402
from episodes.spaces import space_from_dict, space_to_dict  # noqa: E402
from tests.replay._nested import same_state  # noqa: E402

# gymnasium warns where a float32-labelled Box is built from float64 bounds: not our claim
pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered")

RETYPED = (
    "quickstart.md, Coming from CleanRL: `envs.single_observation_space.dtype = np.float32` "
    "'works (the space's checks read np.dtype(space.dtype))'; saving the space still reads "
    "space.dtype.isnative: AttributeError"
)


class Float64Env(gym.Env):
    """Float64 observations, as MuJoCo's: what CleanRL's scripts relabel float32."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 2), {}

    def step(self, action):
        self.t += 1
        return self.np_random.uniform(-1, 1, 2), float(action[0]), False, self.t >= 3, {}


def retyped_chunks() -> list[SingleAgentEpisode]:
    envs = gym.vector.SyncVectorEnv([Float64Env for _ in range(2)])
    envs.single_observation_space.dtype = np.float32  # CleanRL's sac/td3 scripts do this
    runner = EnvRunner(envs, RandomPolicy(envs.action_space, seed=0), seed=0)
    return list(runner.sample(4))


def observations(chunk: SingleAgentEpisode) -> np.ndarray:
    return np.asarray(chunk.get_observations(), np.float64)


def test_retyped_space_records_float64_as_the_env_returns_it():
    chunks = retyped_chunks()
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(chunks)
    assert buf.sample(4)["obs"].dtype == np.float64  # "float64 stays float64"


def test_retyped_space_round_trips_through_space_to_dict():
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
    space.dtype = np.float32
    back = space_from_dict(space_to_dict(space))
    assert back.shape == (2,) and np.dtype(back.dtype) == np.float32


def test_retyped_space_chunk_state_round_trips():
    chunk = retyped_chunks()[0]
    back = SingleAgentEpisode.from_state(chunk.get_state())
    assert np.array_equal(observations(back), observations(chunk))


def test_retyped_space_replay_buffer_saves(tmp_path):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(retyped_chunks())
    buf.save(tmp_path / "buf")
    assert EpisodeReplayBuffer.load(tmp_path / "buf").get_num_timesteps() == 8


@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter], ids=["v2", "v1"])
def test_retyped_space_chunks_are_written_and_loaded(writer, tmp_path):
    chunks = retyped_chunks()
    with writer(tmp_path / "data") as w:
        w.write_many(chunks)
    back = load_episodes(tmp_path / "data", [c.id_ for c in chunks])
    for got, want in zip(back, chunks):
        assert np.allclose(observations(got), observations(want), atol=1e-6)


@pytest.mark.parametrize(
    "cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer], ids=["uniform", "prioritized"]
)
def test_add_rollouts_takes_torch_tensors_as_it_takes_numpy(cls):
    rng = np.random.default_rng(0)
    b, h = 3, 4
    arrays = {
        "observations": rng.normal(size=(b, h + 1, 2)).astype(np.float32),
        "actions": rng.integers(0, 3, (b, h)),
        "rewards": rng.normal(size=(b, h)).astype(np.float32),
        "terminated": rng.random((b, h)) < 0.3,
        "truncated": rng.random((b, h)) < 0.2,
        "lengths": rng.integers(1, h + 1, b),
    }
    by_numpy, by_torch = cls(50, seed=1), cls(50, seed=1)
    by_numpy.add_rollouts(**arrays, ids=["a", "b", "c"])
    by_torch.add_rollouts(**{k: torch.as_tensor(v) for k, v in arrays.items()}, ids=["a", "b", "c"])
    assert by_torch.get_num_timesteps() == by_numpy.get_num_timesteps()
    for got, want in zip(by_torch.get_episodes(), by_numpy.get_episodes()):
        assert got.id_ == want.id_ and len(got) == len(want)
        assert got.is_terminated == want.is_terminated and got.is_truncated == want.is_truncated
        assert np.array_equal(got.get_observations(), want.get_observations())
        assert np.array_equal(got.get_actions(), want.get_actions())
        assert np.array_equal(got.get_rewards(), want.get_rewards())
    x, y = by_torch.sample(8, n_step=2), by_numpy.sample(8, n_step=2)
    for key in y:
        assert np.array_equal(x[key], y[key]), key


@pytest.mark.parametrize("size", [3, 300_000], ids=["small", "memory-mapped"])
@pytest.mark.parametrize("numpy", [None, True, False])
@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter], ids=["v2", "v1"])
def test_an_id_given_twice_gives_two_episodes_sharing_nothing(writer, numpy, size, tmp_path):
    first = SingleAgentEpisode(
        "a",
        observations=[np.zeros(size, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        infos=[{"k": [1]}] * 3,
        len_lookback_buffer=0,
    )
    second = first.cut()
    second.add_env_step(np.zeros(size, np.float32), 1, 1.0, infos={"k": [1]}, terminated=True)
    other = SingleAgentEpisode("b", observations=[np.zeros(size, np.float32)])
    with writer(tmp_path / "data") as w:
        w.write_many([second, other, first])
    x, y = load_episodes(tmp_path / "data", ["a", "a"], numpy=numpy)
    ox, oy = x.get_observations(), y.get_observations()
    ax = ox if isinstance(ox, np.ndarray) else ox[0]
    ay = oy if isinstance(oy, np.ndarray) else oy[0]
    assert not np.shares_memory(ax, ay)
    ax[..., 0] = 5.0
    assert ay[..., 0].max() == 0.0
    x.get_infos(0)["k"].append(2)
    assert y.get_infos(0)["k"] == [1]


def test_add_rollouts_refuses_extras_that_are_no_mapping_by_name():
    buf = EpisodeReplayBuffer(8, seed=0)
    obs, actions, rewards = np.zeros((2, 4, 2), np.float32), np.zeros((2, 3)), np.ones((2, 3))
    buf.add_rollouts(obs, actions, rewards, ids=["s0", "s1"])
    before = buf.get_state()
    with pytest.raises(TypeError, match="extra_model_outputs"):
        buf.add_rollouts(obs, actions, rewards, extra_model_outputs=[("v", np.zeros((2, 3)))])
    same_state(buf.get_state(), before)
