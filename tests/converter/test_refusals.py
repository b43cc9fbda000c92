"""What the converter refuses, on both paths, before it touches a given storage.

Runner chunks take the fast path (read from the blocks); deep copies of them take the general
path. A refusal must be a clear error naming what is wrong, and a storage passed in must keep
its rows and its step.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner

GAMMA = 0.9


def policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    n = len(obs)
    return (obs[:, 2] > 0).astype(np.int64), {
        "vf_preds": obs[:, 1].astype(np.float32),
        "vf_pair": np.zeros((n, 2), np.float32),  # two numbers per step: not a value
        "action_logp": np.zeros(n, np.float32),
        "logits": np.zeros((n, 2), np.float32),
        "teacher": np.ones(n, np.int64),
        "teacher_pair": np.ones((n, 2), np.int64),  # not shaped like the actions
    }


def value_fn(obs: np.ndarray) -> np.ndarray:
    return obs.sum(axis=-1)


def chunks(steps: int = 6):
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    return EnvRunner(env, policy, seed=0).sample(steps)


PATHS = {"blocks": lambda c: c, "general": lambda c: [copy.deepcopy(x) for x in c]}


def _snapshot(storage: RolloutStorage) -> tuple[int, dict[str, torch.Tensor]]:
    return storage.step, {name: t.clone() for name, t in storage.tensors.items()}


# (case, keys, training type, storage the user passes or None, error, message)
def _storage(obs=(4,), dist=((2,),), training_type="rl") -> RolloutStorage:
    st = RolloutStorage(
        training_type, 3, 6, obs, (1,), distribution_params=dist if training_type == "rl" else None
    )
    st.write_block(0, rewards=torch.full((6, 3), 7.0))
    return st


REFUSALS = [
    ("values with two numbers a step", ColumnKeys(values="vf_pair"), "rl", None, "'vf_pair'"),
    (
        "privileged actions not shaped like the actions",
        ColumnKeys(privileged_actions="teacher_pair"),
        "distillation",
        None,
        "'teacher_pair'",
    ),
    (
        "values with two numbers a step, into a given storage",
        ColumnKeys(values="vf_pair", distribution=("logits",)),
        "rl",
        lambda: _storage(),
        "'vf_pair'",
    ),
    (
        "observations of another size",
        ColumnKeys(distribution=("logits",)),
        "rl",
        lambda: _storage(obs=(3,)),
        "observations",
    ),
    (
        "distribution parameters of another size",
        ColumnKeys(distribution=("logits",)),
        "rl",
        lambda: _storage(dist=((5,),)),
        "distribution_params",
    ),
    (
        "one distribution parameter for a storage of two",
        ColumnKeys(distribution=("logits",)),
        "rl",
        lambda: _storage(dist=((2,), (2,))),
        "distribution_params are 2 parts, these chunks' 1 parts",
    ),
    (
        "dict observations for a storage of one tensor",
        ColumnKeys(distribution=("logits",)),
        "rl",
        lambda: _storage(obs={"policy": (4,), "extra": (1,)}),
        "observations are",
    ),
    (
        "a storage of the other training type",
        ColumnKeys(privileged_actions="teacher"),
        "distillation",
        lambda: _storage(),
        "training_type",
    ),
]


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize(
    ("case", "keys", "training_type", "given", "message"),
    REFUSALS,
    ids=[case[0] for case in REFUSALS],
)
def test_refusals_name_the_field_and_leave_a_given_storage_unchanged(
    path, case, keys, training_type, given, message
):
    storage = given() if given else None
    before = _snapshot(storage) if storage is not None else None
    with pytest.raises(ValueError, match=message):
        episodes_to_rollout(
            PATHS[path](chunks()),
            gamma=GAMMA,
            value_fn=value_fn,
            keys=keys,
            training_type=training_type,
            storage=storage,
        )
    if storage is not None:
        step, tensors = _snapshot(storage)
        assert step == before[0]
        assert all(torch.equal(tensors[name], before[1][name]) for name in tensors)


@pytest.mark.parametrize("path", list(PATHS))
def test_distillation_ignores_distribution_keys_on_both_paths(path):
    # The general path looked the distribution keys up among extra outputs it had not read.
    keys = ColumnKeys(privileged_actions="teacher", distribution=("logits",))
    sample = chunks()
    rollout = episodes_to_rollout(
        PATHS[path](sample), gamma=GAMMA, keys=keys, training_type="distillation"
    )
    assert rollout.storage.distribution_params is None
    assert torch.equal(rollout.storage.privileged_actions, torch.ones(6, 3, 1, dtype=torch.int64))
