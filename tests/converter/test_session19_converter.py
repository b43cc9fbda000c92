"""Converter fixes of hunt round 19: what ``obs_fn`` and ``value_fn`` hand back is checked.

* An ``obs_fn`` that changes the leading ``[T, N]`` axes is refused by name, before a given
  storage is cleared (contract §8: check first, then mutate), on every path.
* ``obs_fn`` never gets a view of a runner's blocks: one that works in place leaves the
  chunks, and storages converted earlier, as they were (as on the general path).
* A ``value_fn`` returning a tensor without dense data (meta, sparse) is the documented
  ``ValueError`` starting "value_fn returned".
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout
from episodes.runner import EnvRunner


def _chunk(steps: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.full(3, i, np.float32) for i in range(steps + 1)],
        actions=[np.zeros(2, np.float32)] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.5] * steps, "action_logp": [0.0] * steps},
    )


def _zeros(obs: np.ndarray) -> np.ndarray:
    return np.zeros(len(obs))


class _Policy:
    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        n = len(obs)
        outputs = {"vf_preds": np.zeros(n, np.float32), "action_logp": np.zeros(n, np.float32)}
        return np.ones(n, np.int64), outputs


def _sample(window: str = "transitions", steps: int = 4):
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    return EnvRunner(env, _Policy(), seed=0, window=window).sample(steps)


def _general(steps: int = 4) -> list[list[SingleAgentEpisode]]:
    return [[_chunk(steps)], [_chunk(steps)]]


BAD_OBS_FNS = {
    "one row short": lambda obs: obs[:-1],
    "axes swapped": lambda obs: np.swapaxes(obs, 0, 1),
    "rows flattened": lambda obs: obs.reshape(-1, obs.shape[-1]),
}


@pytest.mark.parametrize("path", ["general", "runner blocks"])
@pytest.mark.parametrize("name", list(BAD_OBS_FNS))
def test_obs_fn_changing_leading_axes_is_refused_before_the_storage_is_cleared(path, name):
    make = _general if path == "general" else _sample
    storage = episodes_to_rollout(make(), gamma=0.9, value_fn=_zeros).storage
    storage.valid = torch.ones(4, 2, dtype=torch.bool)
    held = {k: v.clone() for k, v in storage.tensors.items()}
    with pytest.raises(ValueError, match="obs_fn returned a leaf of shape"):
        episodes_to_rollout(
            make(), gamma=0.9, value_fn=_zeros, storage=storage, obs_fn=BAD_OBS_FNS[name]
        )
    assert storage.step == 4 and storage.valid is not None
    assert all(torch.equal(held[k], v) for k, v in storage.tensors.items())


def test_obs_fn_changing_the_rows_of_a_batch_is_refused():
    with pytest.raises(ValueError, match="obs_fn returned a leaf of shape"):
        episodes_to_batch([_chunk(3)], obs_fn=lambda obs: obs[:2])


def test_obs_fn_on_bootstrap_observations_must_keep_the_rows():
    # One env's last observation bootstraps: obs_fn sees a [1, B, ...] batch there.
    def drop_envs(obs: np.ndarray) -> np.ndarray:
        return obs[:, :1] if obs.shape[0] == 1 else obs

    with pytest.raises(ValueError, match="obs_fn returned a leaf of shape"):
        episodes_to_rollout(_general(), gamma=0.9, value_fn=_zeros, obs_fn=drop_envs)


def _scale_in_place(obs: np.ndarray) -> np.ndarray:
    obs *= 1000.0
    return obs


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_obs_fn_working_in_place_leaves_chunks_and_earlier_storages_alone(window):
    sample = _sample(window)
    before = [copy.deepcopy(chunk) for chunk in sample]
    first = episodes_to_rollout(sample, gamma=0.99, value_fn=_zeros, obs_fn=_scale_in_place)
    held = first.storage.observations.clone()
    second = episodes_to_rollout(sample, gamma=0.99, value_fn=_zeros, obs_fn=_scale_in_place)
    assert all(a == b for a, b in zip(sample, before, strict=True))
    assert sample.unchanged()
    assert torch.equal(first.storage.observations, held)
    assert torch.equal(second.storage.observations, held)
    general = episodes_to_rollout(
        [[copy.deepcopy(c)] for c in before], gamma=0.99, value_fn=_zeros, obs_fn=_scale_in_place
    )
    assert torch.equal(general.storage.observations, held)


def _meta(obs: np.ndarray) -> torch.Tensor:
    return torch.zeros(len(obs), device="meta")


def _sparse(obs: np.ndarray) -> torch.Tensor:
    return torch.zeros(len(obs)).to_sparse()


@pytest.mark.parametrize("path", ["general", "runner blocks"])
@pytest.mark.parametrize(
    ("value_fn", "said"), [(_meta, "meta device"), (_sparse, "sparse_coo tensor")]
)
def test_value_fn_tensor_without_dense_data_is_refused(path, value_fn, said):
    make = _general if path == "general" else _sample
    storage = episodes_to_rollout(make(), gamma=0.9, value_fn=_zeros).storage
    held = {k: v.clone() for k, v in storage.tensors.items()}
    with pytest.raises(ValueError, match=f"value_fn returned .*{said}"):
        episodes_to_rollout(make(), gamma=0.9, value_fn=value_fn, storage=storage)
    assert all(torch.equal(held[k], v) for k, v in storage.tensors.items())


def _text_chunk(numpy: bool) -> SingleAgentEpisode:
    space = gym.spaces.Text(5)
    chunk = SingleAgentEpisode(
        observations=["ab", "cd", "ef"],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        observation_space=space,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.5, 0.5], "action_logp": [0.0, 0.0]},
    )
    return chunk.to_numpy() if numpy else chunk


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_text_observations_are_refused_before_value_fn(numpy):
    seen = []

    def value_fn(obs):
        seen.append(obs)
        return np.zeros(len(obs))

    with pytest.raises(TypeError, match="observations hold <U5 values: pass obs_fn"):
        episodes_to_rollout([[_text_chunk(numpy)]], gamma=0.9, value_fn=value_fn)
    assert seen == []
    encoded = episodes_to_rollout(
        [[_text_chunk(numpy)]],
        gamma=0.9,
        value_fn=value_fn,
        obs_fn=lambda obs: np.char.str_len(obs).astype(np.float32)[..., None],
    )
    assert encoded.storage.observations.flatten().tolist() == [2.0, 2.0]
