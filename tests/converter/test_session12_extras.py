"""Extra outputs a storage cannot hold, and the vector-steps refusal's wording, pinned.

A structured (dict / tuple) extra output, or one of strings, named in ``ColumnKeys`` was refused
differently by the two paths of ``episodes_to_rollout``: the fast path (a runner's
``SampledChunks``) raised a ``TypeError`` only after writing observations and actions into a
given storage (docs/api.md: a refused conversion leaves it as it was, on the fast path too),
the general path numpy's ``AxisError`` from stacking the envs. Both now run one check
(``refusals.check_storable_extra``) before anything is written, and raise the same ``ValueError``.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.runner import EnvRunner


def policy(obs: Any) -> tuple[np.ndarray, dict[str, Any]]:
    n = len(obs)
    return (obs[:, 2] > 0).astype(np.int64), {
        "vf": np.zeros(n, np.float32),
        "logp": np.zeros(n),
        "logits": np.full((n, 2), 3.0, np.float32),
        "dist": {"mean": np.zeros((n, 2), np.float32), "std": np.ones((n, 2), np.float32)},
        "tup": (np.zeros((n, 2), np.float32),),
        "label": np.array(["a"] * n),
        "cplx": np.zeros(n, np.complex64),
    }


def zero_values(obs: Any) -> np.ndarray:
    return np.zeros(len(obs))


def runner(window: str | None = None) -> EnvRunner:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    return EnvRunner(env, policy, seed=0, **({} if window is None else {"window": window}))


GOOD = ColumnKeys(values="vf", log_probs="logp", distribution=("logits",))

# (case id, keys, the key refused, what the message says it holds)
REFUSED = [
    ("dict-distribution", ColumnKeys("vf", "logp", ("dist",)), "dist", "a dict"),
    ("tuple-distribution", ColumnKeys("vf", "logp", ("tup",)), "tup", "a tuple of 1 part "),
    ("string-log-probs", ColumnKeys("vf", "label", ("logits",)), "label", "strings"),
    ("dict-values", ColumnKeys("dist", "logp"), "dist", "a dict"),
    ("complex-values", ColumnKeys("cplx", "logp"), "cplx", "complex numbers"),
]


def both_paths(chunks: Any) -> list[tuple[str, Any]]:
    return [("fast", chunks), ("general", list(chunks))]


@pytest.mark.parametrize("path", ["fast", "general"])
@pytest.mark.parametrize(
    "keys, key, what", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
def test_refused_extra_leaves_a_given_storage_unchanged(
    path: str, keys: ColumnKeys, key: str, what: str
) -> None:
    sampler = runner()
    storage = episodes_to_rollout(
        sampler.sample(4), gamma=0.9, value_fn=zero_values, keys=GOOD, copy=True
    ).storage
    before = {name: t.clone() for name, t in storage.tensors.items()}
    chunks = dict(both_paths(sampler.sample(4)))[path]
    with pytest.raises(ValueError, match=f"extra output {key!r} holds {what}"):
        episodes_to_rollout(chunks, gamma=0.9, value_fn=zero_values, keys=keys, storage=storage)
    changed = [n for n, t in storage.tensors.items() if not torch.equal(t, before[n])]
    assert changed == []


@pytest.mark.parametrize("keys", [case[1] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_both_paths_raise_the_same_error(keys: ColumnKeys) -> None:
    errors = []
    for _, chunks in both_paths(runner().sample(4)):
        with pytest.raises(Exception) as caught:
            episodes_to_rollout(chunks, gamma=0.9, value_fn=zero_values, keys=keys)
        errors.append((caught.type, str(caught.value)))
    assert errors[0] == errors[1]
    assert errors[0][0] is ValueError


def test_side_by_side_parts_are_checked_too() -> None:
    class Group(list):  # a GroupSample's shape: its runners' own samples
        def __init__(self, parts: list[Any]):
            super().__init__(c for part in parts for c in part)
            self.parts = parts

        def side_by_side(self) -> list[Any]:
            return self.parts

    group = Group([runner().sample(4), runner().sample(4)])
    with pytest.raises(ValueError, match="extra output 'dist' holds a dict"):
        episodes_to_rollout(
            group, gamma=0.9, value_fn=zero_values, keys=ColumnKeys("vf", "logp", ("dist",))
        )


def test_device_recording_refuses_alike() -> None:
    from episodes.envs.torch_cartpole import TorchCartPole

    def torch_policy(obs: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        zeros = torch.zeros(len(obs))
        return zeros.long(), {
            "vf_preds": zeros,
            "action_logp": zeros,
            "dist": {"mean": torch.zeros(len(obs), 2)},
        }

    chunks = EnvRunner(TorchCartPole(2, device="cpu"), torch_policy, seed=0).sample(3)
    keys = ColumnKeys(distribution=("dist",))
    messages = []
    for _, eps in both_paths(chunks):
        with pytest.raises(ValueError, match="extra output 'dist' holds a dict") as caught:
            episodes_to_rollout(eps, gamma=0.9, value_fn=lambda o: torch.zeros(len(o)), keys=keys)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_valid_extras_still_convert_alike() -> None:
    chunks = runner().sample(6)
    fast, general = (
        episodes_to_rollout(eps, gamma=0.9, value_fn=zero_values, keys=GOOD)
        for _, eps in both_paths(chunks)
    )
    for name, tensor in fast.storage.tensors.items():
        assert torch.equal(tensor, general.storage.tensors[name]), name


@pytest.mark.parametrize(
    "rows, refused",
    [
        (np.zeros((3, 2), np.float32), None),
        (np.zeros(3, bool), None),
        (np.zeros(3, np.uint8), None),
        ([0.5, 0.25], None),  # a list is one array
        (torch.zeros(3, 2, dtype=torch.bfloat16), None),
        ({"mean": np.zeros(3)}, "a dict (keys ['mean'])"),
        ((np.zeros(3), np.zeros(3)), "a tuple of 2 parts"),
        (np.array(["a", "b"]), "strings"),
        (np.array([b"a"]), "bytes"),
        (np.array([None, 1.0], dtype=object), "Python objects"),
        (np.zeros(2, np.complex128), "complex numbers"),
        (torch.zeros(2, dtype=torch.complex64), "complex numbers"),
    ],
    ids=[
        "float",
        "bool",
        "uint",
        "list",
        "torch-bfloat16",
        "dict",
        "tuple",
        "strings",
        "bytes",
        "objects",
        "complex",
        "torch-complex",
    ],
)
def test_check_storable_extra(rows: Any, refused: str | None) -> None:
    from episodes.converter.refusals import check_storable_extra

    if refused is None:
        check_storable_extra("k", rows)
    else:
        with pytest.raises(ValueError, match=re.escape(f"extra output 'k' holds {refused}")):
            check_storable_extra("k", rows)


def test_vector_steps_refusal_names_setters() -> None:
    sampler = runner("vector_steps")
    chunks = sampler.sample(40)
    while chunks.recording.dead_cells() is None:
        chunks = sampler.sample(40)
    keys = ColumnKeys("vf", "logp")
    episodes_to_rollout(chunks, gamma=0.9, value_fn=zero_values, keys=keys)  # untouched: fine
    chunks[0].set_rewards(new_data=0.5, at_indices=0)  # a setter: copy on write
    with pytest.raises(ValueError, match="no setter, append, concat, pop or replaced column"):
        episodes_to_rollout(chunks, gamma=0.9, value_fn=zero_values, keys=keys)
