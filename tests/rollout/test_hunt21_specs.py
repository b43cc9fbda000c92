"""RolloutStorage's specs: numpy ints in hidden-state shapes, negative sizes, a dtype's name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from episodes.rollout import RolloutStorage


def _storage(**given: Any) -> RolloutStorage:
    args: dict[str, Any] = dict(
        training_type="rl",
        num_envs=4,
        num_transitions_per_env=3,
        observations=(5,),
        actions_shape=(2,),
    )
    args.update(given)
    return RolloutStorage(**args)


HIDDEN_TAKEN = {
    "numpy-int-pair": ((np.int64(2), np.int64(8)), [(2, 8)]),
    "array-pair": (np.array([2, 8]), [(2, 8)]),
    "lstm-with-numpy-ints": (((np.int64(2), 8), (2, np.int32(6))), [(2, 8), (2, 6)]),
    "torch-size": (torch.Size([1, 3]), [(1, 3)]),
    "plain-pair": ((1, 16), [(1, 16)]),
}


@pytest.mark.parametrize("case", list(HIDDEN_TAKEN))
def test_hidden_state_shapes_take_numpy_ints_as_other_shapes_do(case: str) -> None:
    spec, shapes = HIDDEN_TAKEN[case]
    storage = _storage(actor_hidden_state=spec)
    saved = storage.saved_hidden_states_actor
    assert saved is not None
    assert [(s.shape[1], s.shape[3]) for s in saved] == shapes
    assert all(s.shape[0] == 3 and s.shape[2] == 4 for s in saved)


REFUSED = {
    "negative-observation": (dict(observations=(-3,)), ValueError, r"^observations: sizes"),
    "negative-action": (dict(actions_shape=(-1,)), ValueError, r"^actions_shape: sizes"),
    "negative-dict-leaf": (
        dict(observations={"a": ((2, -1), torch.float32)}),
        ValueError,
        r"^observations\['a'\]: sizes must be >= 0, got \(2, -1\)",
    ),
    "negative-distribution": (
        dict(distribution_params=[(-2,)]),
        ValueError,
        r"^distribution_params\[0\]: sizes",
    ),
    "negative-hidden": (dict(actor_hidden_state=(1, -4)), ValueError, r"^actor_hidden_state: "),
    "int-hidden": (dict(critic_hidden_state=4), TypeError, r"^critic_hidden_state: expected"),
    "three-numbers-hidden": (
        dict(actor_hidden_state=(1, 2, 3)),
        TypeError,
        r"^actor_hidden_state: cannot interpret hidden-state spec 1",
    ),
    "dtype-name": (dict(actions_dtype="int64"), TypeError, r"^actions_dtype must be a torch"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_specs_name_their_argument(case: str) -> None:
    given, error, message = REFUSED[case]
    with pytest.raises(error, match=message):
        _storage(**given)


def test_zero_sizes_stay_allowed() -> None:
    storage = _storage(observations=(0,), actor_hidden_state=(1, 0))
    assert storage.observations.shape == (3, 4, 0)
