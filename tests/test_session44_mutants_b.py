"""Behaviour that hand-made mutants of ``episodes.converter.from_blocks`` and
``episodes.runner.finals`` showed no test pinned (session 44).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
The runner's chunks take the converter's block path; the same chunks as a plain list take the
general path, and the two must agree.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.runner import EnvRunner
from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv

MODES = ["NEXT_STEP", "SAME_STEP", "DISABLED"]


class Scripted(gym.Env):  # type: ignore[type-arg]
    """Sub-env ``index``: episodes of ``length`` steps ending ``ending`` (term, trunc, both).

    Step ``c`` of the env's life (counted over its episodes) observes ``[c, index]`` and pays
    ``c``; a reset observes ``[c + 0.5, index]``, so a final observation and the next
    episode's first one always differ.
    """

    metadata: dict[str, Any] = {}

    def __init__(self, index: int, length: int, ending: str):
        self.index, self.length, self.ending = index, length, ending
        self.observation_space = spaces.Box(-1e6, 1e6, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.count = 0
        self.t = 0

    def _obs(self, c: float) -> np.ndarray:
        return np.array([c, self.index], np.float32)

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(self.count + 0.5), {}

    def step(self, action: Any) -> Any:
        self.count += 1
        self.t += 1
        end = self.t >= self.length
        terminated = end and self.ending in ("term", "both")
        truncated = end and self.ending in ("trunc", "both")
        return self._obs(self.count), float(self.count), terminated, truncated, {}


def scripted(plan: list[tuple[int, str]], mode: str = "NEXT_STEP") -> gym.vector.VectorEnv:
    fns = [lambda i=i, s=s: Scripted(i, *s) for i, s in enumerate(plan)]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=getattr(gym.vector.AutoresetMode, mode))


def rows(obs: Any) -> int:
    """The batch size of (nested) observations: that of their first array."""
    while isinstance(obs, (dict, tuple)):
        obs = next(
            part for part in (obs.values() if isinstance(obs, dict) else obs) if rows_in(part)
        )
    return len(obs)


def rows_in(part: Any) -> bool:
    return not isinstance(part, (dict, tuple)) or any(
        rows_in(p) for p in (part.values() if isinstance(part, dict) else part)
    )


def policy(obs: Any) -> Any:
    n = rows(obs)
    outs = {"vf_preds": np.zeros(n, np.float32), "action_logp": np.zeros(n, np.float32)}
    return np.zeros(n, np.int64), outs


def counting(obs: np.ndarray) -> Any:
    """For the scripted env: action ``c mod 2``, value ``c``, log-prob ``-index``."""
    outs = {"vf_preds": obs[:, 0].copy(), "action_logp": -obs[:, 1]}
    return obs[:, 0].astype(np.int64) % 2, outs


def value_fn(obs: Any) -> Any:
    """One distinct value per observation: ``10 * c + index`` (numpy or torch, exact)."""
    return obs[..., 0] * 10.0 + obs[..., 1]


class PaysOnReset(TensorVectorEnv):
    """The scripted vector env as tensors (a device recording), paying 100 on reset steps."""

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        self.resetting = np.zeros(env.num_envs, bool)

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        rewards = rewards + 100.0 * torch.from_numpy(self.resetting)
        self.resetting = (terminated | truncated).numpy()
        return obs, rewards, terminated, truncated, infos


def assert_same_rollout(fast: Any, general: Any) -> None:
    assert fast.storage.tensors.keys() == general.storage.tensors.keys()
    for name, tensor in general.storage.tensors.items():
        assert torch.equal(fast.storage.tensors[name], tensor), name
    assert torch.equal(fast.last_values, general.last_values)


def both_paths(chunks: Any, **kwargs: Any) -> tuple[Any, Any]:
    """The block path's rollout (no chunk built), then the general path's on the same chunks."""
    fast = episodes_to_rollout(chunks, **kwargs)
    assert chunks.built() == []
    return fast, episodes_to_rollout(list(chunks), **kwargs)


class Spaced(gym.Env):  # type: ignore[type-arg]
    """Random observations of ``space``; no episode ends."""

    metadata: dict[str, Any] = {}

    def __init__(self, space: gym.Space[Any]):
        self.observation_space = space
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> Any:
        return self.observation_space.sample(), 1.0, False, False, {}


def spaced(space: gym.Space[Any]) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: Spaced(space)] * 2)


# ------------------------------------------------------------------ from_blocks: observations


STORABLE = {
    # Mutant: flat_observations taking only "iuf" dtypes (bool observations refused).
    "bool box": spaces.Box(0, 1, (3,), dtype=np.bool_),
    "dict of floats and ints": spaces.Dict(
        {"a": spaces.Discrete(3), "b": spaces.Box(-1.0, 1.0, (2,), np.float32)}
    ),
}


@pytest.mark.parametrize("name", list(STORABLE))
def test_storable_observations_take_the_block_path_like_the_general_one(name):
    chunks = EnvRunner(spaced(STORABLE[name]), policy, seed=0).sample(4)
    calls = []

    def values(obs: Any) -> np.ndarray:
        calls.append(obs)
        return np.zeros(2)

    fast, general = both_paths(chunks, gamma=0.9, value_fn=values)
    assert_same_rollout(fast, general)
    assert len(calls) == 2  # one batched call per path: the two still-running envs


UNSTORABLE = {
    "tuple": (
        spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Discrete(3))),
        "observations are a tuple of parts: pass obs_fn to make them one array (or a dict of "
        "arrays) per step, what a given obs_fn must return, or record them with a Dict space",
    ),
    # Mutant: the advice to record with a Dict space given for dict observations too.
    "dict with a tuple part": (
        spaces.Dict(
            {"a": spaces.Box(-1.0, 1.0, (2,), np.float32), "t": spaces.Tuple((spaces.Discrete(2),))}
        ),
        "observations are a dict whose parts are not all arrays ('t' a tuple): pass obs_fn to "
        "make them one array (or a dict of arrays) per step, what a given obs_fn must return",
    ),
}


@pytest.mark.parametrize("name", list(UNSTORABLE))
@pytest.mark.parametrize("path", ["blocks", "list"])
def test_unstorable_observations_are_refused_before_the_value_call(name, path):
    space, words = UNSTORABLE[name]
    chunks = EnvRunner(spaced(space), policy, seed=0).sample(3)
    calls = []

    def values(obs: Any) -> np.ndarray:
        calls.append(obs)
        return np.zeros(2)

    given = chunks if path == "blocks" else list(chunks)
    with pytest.raises(TypeError) as error:
        episodes_to_rollout(given, gamma=0.9, value_fn=values)
    assert str(error.value).endswith(words)
    assert calls == []


# ------------------------------------------------------------------ from_blocks: which path


def teacher_policy(obs: Any) -> Any:
    n = len(obs)
    return np.zeros(n, np.int64), {"teacher": np.ones(n, np.int64)}


def test_distillation_reads_only_the_teacher_outputs_from_the_blocks():
    # Mutant: fast_value_fn checking the rl keys (values, log-probs) for distillation: this
    # policy records none, so every chunk was built for the general path.
    chunks = EnvRunner(scripted([(2, "trunc"), (3, "term")]), teacher_policy, seed=0).sample(5)
    kwargs = dict(
        gamma=0.9, keys=ColumnKeys(privileged_actions="teacher"), training_type="distillation"
    )
    fast, general = both_paths(chunks, **kwargs)
    assert_same_rollout(fast, general)
    assert fast.storage.privileged_actions.unique().tolist() == [1]


ADVICE = (
    ": pass obs_fn to make them one array (or a dict of arrays) per step, what a given obs_fn must"
    " return"
)
NOT_ARRAYS = {
    # obs_fn -> the refusal's words, the same on both paths, before the value call.
    # Mutant: the refusal naming only tuple parts, not list ones.
    "dict with a list part": (
        lambda o: {"a": o, "t": [o]},
        "are a dict whose parts are not all arrays ('t' a list)" + ADVICE,
    ),
    # Mutant: no words for a part nested deeper than the dict's own parts.
    "dict with a deeper tuple": (
        lambda o: {"a": o, "t": {"u": (o,)}},
        "are a dict whose parts are not all arrays (a part nested deeper)" + ADVICE,
    ),
    "list": (
        lambda o: [o, o],
        "are a list of parts" + ADVICE + ", or record them with a Dict space",
    ),
}


@pytest.mark.parametrize("name", list(NOT_ARRAYS))
@pytest.mark.parametrize("path", ["blocks", "list"])
def test_obs_fn_outputs_the_storage_cannot_hold_are_refused_alike(name, path):
    obs_fn, words = NOT_ARRAYS[name]
    chunks = EnvRunner(scripted([(3, "trunc"), (2, "trunc")]), policy, seed=0).sample(3)
    calls = []

    def values(obs: Any) -> np.ndarray:
        calls.append(obs)
        return np.zeros(len(calls))

    given = chunks if path == "blocks" else list(chunks)
    with pytest.raises(TypeError) as error:
        episodes_to_rollout(given, gamma=0.9, value_fn=values, obs_fn=obs_fn)
    assert words in str(error.value)
    assert calls == []


# ------------------------------------------------------------------ from_blocks: bootstrap


def scripted_columns(
    plan: list[tuple[int, str]], mode: str, window: str, steps: int, calls: int, gamma: float
) -> list[dict[str, np.ndarray]]:
    """What each ``sample(steps)`` call of a runner on ``scripted(plan, mode)`` must store.

    Worked out from the script alone: a cell's reward is the step's count, plus ``gamma * V``
    of the final observation ``[c, i]`` where a truncation (alone) ends the episode; a reset
    step of a next-step env in a ``vector_steps`` window is a dead cell (reward 0, done, no
    mask); an env whose last chunk is still running at the window's end leaves ``V`` of its last
    observation (a reset step is no chunk's).
    """
    n = len(plan)
    count, fresh, reset_next = [0] * n, [True] * n, [False] * n
    out = []
    for _ in range(calls):
        col = {
            "obs": np.zeros((steps, n, 2)),
            "rewards": np.zeros((steps, n)),
            "dones": np.zeros((steps, n), bool),
            "mask": np.ones((steps, n), bool),
            "last": np.zeros(n),
        }
        for i, (length, ending) in enumerate(plan):
            for t in range(steps):
                if reset_next[i]:
                    reset_next[i] = False
                    if window == "vector_steps":
                        col["dones"][t, i], col["mask"][t, i] = True, False
                        continue
                col["obs"][t, i] = [count[i] + (0.5 if fresh[i] else 0.0), i]
                count[i] += 1
                c = count[i]
                end = c % length == 0
                bonus = gamma * (10.0 * c + i) if end and ending == "trunc" else 0.0
                col["rewards"][t, i], col["dones"][t, i] = c + bonus, end
                fresh[i] = end
                reset_next[i] = end and mode == "NEXT_STEP"
            if not col["dones"][-1, i]:  # a reset step ending the window ends none
                col["last"][i] = 10.0 * count[i] + i
        out.append(col)
    return out


SCRIPTS = {
    # Mutant: no value call when only one value is needed (count < 2, not count == 0).
    "one truncation, no env running": [(3, "trunc")],
    "one env running": [(7, "term")],
    # Mutant: the truncated cells bootstrapped only when there are two or more.
    "one truncation and one running": [(2, "trunc"), (9, "term")],
    "every ending": [(2, "trunc"), (3, "term"), (4, "both"), (9, "trunc")],
    # Mutant: Finals.index_of looking up the row before each ending: the same entry unless the
    # env also ended there, as one-step episodes do.
    "one-step episodes": [(1, "trunc"), (1, "term"), (2, "trunc")],
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_block_path_stores_what_the_script_says(name, window, mode):
    plan, steps, gamma = SCRIPTS[name], 3, 0.5
    runner = EnvRunner(scripted(plan, mode), counting, seed=0, window=window)
    assert_scripted(runner, plan, mode, window, steps, gamma)


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_a_torch_recording_stores_what_the_script_says(name, window):
    # Mutant: mask_dead_cells leaving a torch recording's reset-step rewards as the env paid.
    plan, steps, gamma = SCRIPTS[name], 3, 0.5
    env = PaysOnReset(scripted(plan, "NEXT_STEP"))
    runner = EnvRunner(env, TensorPolicy(counting), seed=0, window=window)
    assert_scripted(runner, plan, "NEXT_STEP", window, steps, gamma)


def assert_scripted(
    runner: EnvRunner, plan: Any, mode: str, window: str, steps: int, gamma: float
) -> None:
    """Three ``sample(steps)`` calls through the block path store what ``scripted_columns`` says."""
    for want in scripted_columns(plan, mode, window, steps, 3, gamma):
        chunks = runner.sample(steps)
        rollout = episodes_to_rollout(chunks, gamma=gamma, value_fn=value_fn)
        assert chunks.built() == []
        storage, mask = rollout.storage, want["mask"]
        assert storage.rewards[..., 0].numpy().tolist() == want["rewards"].tolist()
        assert storage.dones[..., 0].numpy().astype(bool).tolist() == want["dones"].tolist()
        assert storage.observations.numpy()[mask].tolist() == want["obs"][mask].tolist()
        assert rollout.last_values[:, 0].tolist() == want["last"].tolist()
        valid = np.ones_like(mask) if rollout.mask is None else rollout.mask.numpy()
        assert valid.astype(bool).tolist() == mask.tolist()
        # The policy's outputs at each valid cell follow from its observation.
        counts, index = want["obs"][mask, 0], want["obs"][mask, 1]
        assert storage.actions[..., 0].numpy()[mask].tolist() == (counts.astype(int) % 2).tolist()
        assert storage.values[..., 0].numpy()[mask].tolist() == counts.tolist()
        assert storage.actions_log_prob[..., 0].numpy()[mask].tolist() == (-index).tolist()


def store_values(chunks: Any, keys: ColumnKeys) -> list[int]:
    """``V(last observation)`` into the chunks that need one; their indices.

    Those are the chunks that ended truncated (not terminated) and each env's last chunk
    where it still runs: found on a copy, so that only they are built here.
    """
    seen = copy.deepcopy(chunks)
    last = {int(env): k for k, env in enumerate(seen.env_indices)}
    needed = [
        k
        for k, chunk in enumerate(seen)
        if (chunk.is_truncated and not chunk.is_terminated)
        or (not chunk.is_done and last[int(seen.env_indices[k])] == k)
    ]
    for k in needed:
        final = np.asarray(chunks[k].get_observations(-1))[None]
        chunks[k].custom_data[keys.bootstrap_value] = float(value_fn(final)[0])
    return needed


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_stored_values_bootstrap_like_value_fn_building_only_their_chunks(window, mode):
    # Mutants: bootstrap_chunks counting as running an env whose last chunk ended with one
    # flag (terminated | truncated read as &), or truncated and terminated ones as cut.
    plan, steps, gamma, keys = SCRIPTS["every ending"], 3, 0.5, ColumnKeys()
    runner = EnvRunner(scripted(plan, mode), counting, seed=0, window=window)
    for want in scripted_columns(plan, mode, window, steps, 4, gamma):
        chunks = runner.sample(steps)
        needed = store_values(chunks, keys)
        rollout = episodes_to_rollout(chunks, gamma=gamma, keys=keys)
        assert chunks.built() == needed
        assert rollout.storage.rewards[..., 0].numpy().tolist() == want["rewards"].tolist()
        assert rollout.last_values[:, 0].tolist() == want["last"].tolist()


# ------------------------------------------------------------------ runner.finals


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lookback", [0, 2])
@pytest.mark.parametrize("numpy_episodes", [True, False])
@pytest.mark.parametrize("name", ["every ending", "one-step episodes"])
def test_each_chunk_ends_on_its_own_final_observation(name, mode, lookback, numpy_episodes):
    # Same-step and disabled autoreset keep the final observations apart from the blocks
    # (Finals); a chunk that ended must end on its own, never on the next episode's first
    # nor on an earlier ending's (Finals.index_of keys by env and row).
    plan = SCRIPTS[name]
    runner = EnvRunner(
        scripted(plan, mode),
        counting,
        seed=0,
        len_lookback_buffer=lookback,
        numpy_episodes=numpy_episodes,
    )
    ended = 0
    for _ in range(4):
        chunks = runner.sample(5)
        for env, chunk in zip(chunks.env_indices.tolist(), chunks):
            obs = np.asarray(chunk.get_observations())
            rewards = np.asarray(chunk.get_rewards())
            # After the step paying c the env observes [c, env]: the final observation too.
            assert obs[1:, 0].tolist() == rewards.tolist()
            assert obs[:, 1].tolist() == [env] * len(obs)
            if chunk.t_started == 0:  # the episode's first observation: a reset's
                assert obs[0, 0] % 1 == 0.5
            ended += chunk.is_done
    assert ended > 10
