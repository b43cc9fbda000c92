"""Converter bugs a hunt found, pinned: one table or focused test per bug.

Runner chunks take the fast path (read from the blocks); deep copies of them take the general
path, so the refusals are checked on both. A refused conversion must leave a given storage
as it was.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import bootstrap_truncated_rewards, episodes_to_batch, episodes_to_rollout
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner

GAMMA = 0.9
PATHS = {"blocks": lambda c: c, "general": lambda c: [copy.deepcopy(x) for x in c]}


def policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    n = len(obs)
    return (obs[:, 2] > 0).astype(np.int64), {
        "vf_preds": obs[:, 1].astype(np.float32),
        "action_logp": np.zeros(n, np.float32),
    }


def value_fn(obs: np.ndarray) -> np.ndarray:
    return np.asarray(obs).sum(axis=-1)


def runner_chunks(steps: int = 6):
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    return EnvRunner(env, policy, seed=0).sample(steps)


def snapshot(storage: RolloutStorage) -> tuple[int, dict[str, torch.Tensor]]:
    return storage.step, {name: t.clone() for name, t in storage.tensors.items()}


def assert_unchanged(storage: RolloutStorage, before: tuple[int, dict[str, torch.Tensor]]) -> None:
    step, tensors = before
    assert storage.step == step
    for name, tensor in storage.tensors.items():
        assert torch.equal(tensor, tensors[name]), name


# ----------------------------------------------------------------- 1. list items are rows
def list_episode(obs_space: gym.Space, observations: list, actions: list) -> SingleAgentEpisode:
    n = len(actions)
    return SingleAgentEpisode(
        observations=observations,
        actions=actions,
        rewards=[1.0] * n,
        observation_space=obs_space,
        action_space=gym.spaces.Box(-1, 1, (2,), np.float32),
        len_lookback_buffer=0,
        truncated=True,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
    )


BOX = gym.spaces.Box(-50, 50, (2,), np.float32)
LIST_ITEMS = {
    "box": (BOX, [[0.0, 10.0], [1.0, 11.0], [2.0, 12.0]]),
    "box of ints as lists": (
        gym.spaces.Box(-50, 50, (3,), np.int64),
        [[0, 10, 20], [1, 11, 21], [2, 12, 22]],
    ),
    "dict of a box": (
        gym.spaces.Dict({"pos": BOX}),
        [{"pos": [0.0, 10.0]}, {"pos": [1.0, 11.0]}, {"pos": [2.0, 12.0]}],
    ),
}


def _equal(a, b) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            _equal(a[key], b[key])
        return
    assert isinstance(a, (np.ndarray, torch.Tensor)), type(a)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert (a == b).all()


@pytest.mark.parametrize("case", LIST_ITEMS, ids=str)
def test_list_mode_items_convert_as_the_numpyd_episode(case: str) -> None:
    space, observations = LIST_ITEMS[case]
    actions = [[0.5, -0.5], [0.25, -0.25]]

    def make() -> SingleAgentEpisode:
        return list_episode(space, copy.deepcopy(observations), copy.deepcopy(actions))

    listed, numpyd = make(), make().to_numpy()
    assert not listed.observations.finalized
    want, got = episodes_to_batch([numpyd]), episodes_to_batch([listed])
    for column in ("obs", "next_obs", "actions"):
        _equal(got[column], want[column])
    seen = []

    def values(obs):  # the final observation is a row too: one value per chunk
        seen.append(obs)
        leaf = obs["pos"] if isinstance(obs, dict) else obs
        return np.asarray(leaf, np.float64).sum(axis=-1)

    want_r = episodes_to_rollout([numpyd], gamma=GAMMA, value_fn=values)
    got_r = episodes_to_rollout([listed], gamma=GAMMA, value_fn=values)
    _equal(seen[1], seen[0])
    for name, tensor in want_r.storage.tensors.items():
        _equal(got_r.storage.tensors[name], tensor)


# ------------------------------------------------- 2. a storage field that would truncate
def _int_obs_storage() -> RolloutStorage:
    return RolloutStorage("rl", 3, 6, ((4,), torch.int64), (1,), distribution_params=())


def _bool_action_storage() -> RolloutStorage:
    return RolloutStorage("rl", 3, 6, (4,), (1,), distribution_params=(), actions_dtype=torch.bool)


def _float16_storage() -> RolloutStorage:  # narrower, same kind: the storage's precision
    return RolloutStorage(
        "rl", 3, 6, ((4,), torch.float16), (1,), distribution_params=(), dtype=torch.float16
    )


# (case, storage, message or None when it is taken)
STORAGE_DTYPES = [
    ("float observations into int ones", _int_obs_storage, "observations are torch.int64"),
    ("int actions into bool ones", _bool_action_storage, "actions are torch.bool"),
    ("float32 into float16", _float16_storage, None),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("case", "make", "message"), STORAGE_DTYPES, ids=[c[0] for c in STORAGE_DTYPES]
)
def test_a_storage_field_that_would_lose_values_is_refused(path, case, make, message) -> None:
    chunks = PATHS[path](runner_chunks())
    storage = make()
    storage.write_block(0, rewards=torch.full((6, 3), 7.0))
    before = snapshot(storage)
    if message is None:
        episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_fn, storage=storage)
        return
    with pytest.raises(ValueError, match=message):
        episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_fn, storage=storage)
    assert_unchanged(storage, before)


def test_float_values_are_not_truncated_into_an_earlier_rollouts_int_storage() -> None:
    def ep(actions, obs):
        return SingleAgentEpisode(
            observations=obs,
            actions=actions,
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
            terminated=True,
            extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
        )

    zero = lambda o: np.zeros(len(o))  # noqa: E731
    storage = episodes_to_rollout([ep([0, 1], [0, 1, 2])], gamma=GAMMA, value_fn=zero).storage
    before = snapshot(storage)
    floats = ep([np.float32([0.7]), np.float32([-0.9])], [np.float32(x) for x in (0.25, 1.5, 2.75)])
    with pytest.raises(ValueError, match="cannot hold these chunks'"):
        episodes_to_rollout([floats], gamma=GAMMA, value_fn=zero, storage=storage)
    assert_unchanged(storage, before)


# ------------------------------------------------------ 3. chunks after a finished chunk
def chunk(t0: int, n: int, **flags) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "A",
        observations=[np.float32([i]) for i in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
        t_started=t0,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        **flags,
    )


# (case, the env's chunks, refused)
TIME_ORDER = [
    ("ongoing chunk twice", lambda: [chunk(0, 3), chunk(0, 3)], True),
    ("truncated chunk twice", lambda: [chunk(0, 3, truncated=True)] * 2, True),
    ("terminated chunk twice", lambda: [chunk(0, 3, terminated=True)] * 2, True),
    ("steps after termination", lambda: [chunk(0, 3, terminated=True), chunk(3, 3)], True),
    ("steps after truncation", lambda: [chunk(0, 3, truncated=True), chunk(3, 3)], True),
    ("an earlier chunk after a later one", lambda: [chunk(3, 3), chunk(0, 3)], True),
    ("a continuation", lambda: [chunk(0, 3), chunk(3, 3, terminated=True)], False),
]


@pytest.mark.parametrize(("case", "group", "refused"), TIME_ORDER, ids=[c[0] for c in TIME_ORDER])
def test_chunks_of_one_episode_go_in_time_order(case, group, refused) -> None:
    def vf(o):
        return np.asarray(o)[:, 0]

    if refused:
        with pytest.raises(ValueError, match="time order"):
            episodes_to_rollout([group()], gamma=GAMMA, value_fn=vf)
    else:
        assert episodes_to_rollout([group()], gamma=GAMMA, value_fn=vf).storage.step == 6


# ------------------------------------------------- 5. dtype=None follows a given storage
def float64_episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.float64([0.1])] * 3,
        actions=[0, 1],
        rewards=[0.1, 0.1],
        truncated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.1, 0.1], "action_logp": [0.1, 0.1]},
    )


@pytest.mark.parametrize("path", PATHS)
def test_refilling_a_storage_keeps_its_float_dtype(path: str) -> None:
    def vf(o):
        return np.full(len(o), 0.1)

    fresh = episodes_to_rollout([float64_episode()], gamma=GAMMA, value_fn=vf, dtype=torch.float64)
    again = episodes_to_rollout(
        [float64_episode()], gamma=GAMMA, value_fn=vf, storage=fresh.storage
    )
    assert again.last_values.dtype == torch.float64
    want = episodes_to_rollout([float64_episode()], gamma=GAMMA, value_fn=vf, dtype=torch.float64)
    for name, tensor in want.storage.tensors.items():
        assert torch.equal(again.storage.tensors[name], tensor), name
    # From the runner's blocks as from chunks; without a storage the default stays float32.
    chunks = runner_chunks()
    first = episodes_to_rollout(PATHS[path](chunks), gamma=GAMMA, value_fn=value_fn)
    assert first.storage.rewards.dtype == first.last_values.dtype == torch.float32
    wide = episodes_to_rollout(
        PATHS[path](chunks), gamma=GAMMA, value_fn=value_fn, dtype=torch.float64
    )
    refill = episodes_to_rollout(
        PATHS[path](chunks), gamma=GAMMA, value_fn=value_fn, storage=wide.storage, copy=True
    )
    assert refill.last_values.dtype == torch.float64
    assert refill.storage.rewards.dtype == torch.float64


# -------------------------------------------------------- 6. ids of other types stay apart
def id_episode(id_) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_, observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )


@pytest.mark.parametrize(
    ("ids", "dtype"),
    [((1, True), object), ((1, "1"), object), ((1, 1.0), object), ((1, 2), np.int64)],
    ids=repr,
)
def test_episodes_to_batch_keeps_ids_of_other_types_apart(ids, dtype) -> None:
    eps_id = episodes_to_batch([id_episode(i) for i in ids])["eps_id"]
    assert eps_id.dtype == dtype
    assert [(type(i), i) for i in eps_id.tolist()] == [(type(i), i) for i in ids]


# ------------------------------------------------------------------ 7. gamma is checked
BAD_GAMMAS = [float("nan"), 2.0, -1.0, True, "0.9", None]


def truncated_episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.float32([0.0])] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        truncated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
    )


@pytest.mark.parametrize("gamma", BAD_GAMMAS, ids=repr)
def test_a_gamma_outside_0_1_is_refused(gamma) -> None:
    with pytest.raises(ValueError, match=r"gamma must be a float in \[0, 1\]"):
        episodes_to_rollout([truncated_episode()], gamma=gamma, value_fn=lambda o: np.ones(len(o)))
    with pytest.raises(ValueError, match=r"gamma must be a float in \[0, 1\]"):
        bootstrap_truncated_rewards(np.ones(2), np.array([False, True]), np.ones(2), gamma)


@pytest.mark.parametrize("path", PATHS)
def test_a_bad_gamma_is_refused_on_both_paths(path: str) -> None:
    chunks = PATHS[path](runner_chunks())
    with pytest.raises(ValueError, match="gamma"):
        episodes_to_rollout(chunks, gamma=float("nan"), value_fn=value_fn)
    for gamma in (0, 1, np.float32(0.5)):  # the edges and numpy numbers are fine
        episodes_to_rollout(chunks, gamma=gamma, value_fn=value_fn)


# ---------------------------------------------------------- 8. the float dtype is a float
NOT_FLOAT = [torch.int64, torch.int32, torch.bool, torch.complex64, "float32", np.float32]


@pytest.mark.parametrize("dtype", NOT_FLOAT, ids=str)
def test_a_non_float_dtype_is_refused(dtype) -> None:
    with pytest.raises(ValueError, match="floating-point"):
        episodes_to_rollout(
            [truncated_episode()], gamma=GAMMA, value_fn=lambda o: np.ones(len(o)), dtype=dtype
        )
    with pytest.raises(ValueError, match="floating-point"):
        RolloutStorage("rl", 1, 2, (1,), (1,), dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_every_float_dtype_is_taken(dtype) -> None:
    rollout = episodes_to_rollout(
        [truncated_episode()], gamma=GAMMA, value_fn=lambda o: np.ones(len(o)), dtype=dtype
    )
    assert rollout.storage.rewards.dtype == rollout.last_values.dtype == dtype


# ------------------------------------------------------- 9. Tuple observations: a clear error
class TupleObsEnv(gym.Env):
    observation_space = gym.spaces.Tuple(
        (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(5))
    )
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return (np.zeros(2, np.float32), 0), {}

    def step(self, action):
        return (np.ones(2, np.float32), 1), 1.0, False, False, {}


def tuple_policy(obs):
    n = len(obs[0])
    return np.zeros(n, np.int64), {
        "vf_preds": np.zeros(n, np.float32),
        "action_logp": np.zeros(n, np.float32),
    }


def tuple_values(obs):
    return np.zeros(len(obs[0]))


@pytest.mark.parametrize("path", PATHS)
def test_tuple_observations_say_what_the_storage_holds(path: str) -> None:
    env = gym.vector.SyncVectorEnv([TupleObsEnv, TupleObsEnv])
    chunks = PATHS[path](EnvRunner(env, tuple_policy, seed=0).sample(4))
    with pytest.raises(TypeError, match="a tensor or a dict of tensors per observation") as err:
        episodes_to_rollout(chunks, gamma=GAMMA, value_fn=tuple_values)
    assert "obs_fn" in str(err.value) and "Dict space" in str(err.value)
    assert len(str(err.value)) < 400  # no tensors in the message

    def joined(obs):  # what the error asks for: one array per step
        return np.concatenate([obs[0], np.asarray(obs[1], np.float32)[..., None]], axis=-1)

    rollout = episodes_to_rollout(
        chunks, gamma=GAMMA, value_fn=lambda o: np.zeros(len(o)), obs_fn=joined
    )
    assert tuple(rollout.storage.observations.shape) == (4, 2, 3)


def test_bootstrapping_integer_rewards_keeps_the_fraction():
    from episodes.converter import bootstrap_truncated_rewards

    out = bootstrap_truncated_rewards(
        np.array([1, 1]), np.array([False, True]), np.array([0.0, 5.0]), 0.9
    )
    assert out.dtype == np.float64 and out.tolist() == [1.0, 5.5]  # was [1, 5]
    floats = np.array([1.0, 1.0], np.float32)
    assert bootstrap_truncated_rewards(floats, np.array([0, 1], bool), np.ones(2), 0.5).dtype == (
        np.float32
    )


@pytest.mark.parametrize(
    "wrap", [iter, reversed, lambda c: (x for x in c)], ids=["iter", "reversed", "generator"]
)
def test_chunks_given_as_an_iterator_are_read_once(wrap):
    # The grouping read the iterator twice: the second pass found nothing ("got []").
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")

    def policy(obs):
        n = len(obs)
        return np.zeros(n, np.int64), {"vf_preds": np.zeros(n), "action_logp": np.zeros(n)}

    chunks = EnvRunner(env, policy, seed=0).sample(4)
    listed = [copy.deepcopy(c) for c in chunks]
    order = list(wrap(list(range(len(listed)))))
    value = lambda obs: np.asarray(obs, np.float64).sum(-1)  # noqa: E731
    expected = episodes_to_rollout([listed[i] for i in order], gamma=0.9, value_fn=value)
    got = episodes_to_rollout(wrap(listed), gamma=0.9, value_fn=value)
    assert torch.equal(got.storage.observations, expected.storage.observations)
    assert torch.equal(got.storage.rewards, expected.storage.rewards)
