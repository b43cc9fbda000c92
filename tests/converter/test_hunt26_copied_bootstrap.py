"""A copied or pickled ``SampledChunks`` bootstraps from the values stored in its chunks'
``custom_data`` as the original does (the copy carried them for chunks it had not built, and
the fast path looked at built chunks only: a vector-steps window with reset steps was refused,
a default window took the general path)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, make_vec
from tests.runner.test_batched_equals_per_step import KEYS

COPIES = [
    ("pickle", lambda x: pickle.loads(pickle.dumps(x))),
    ("deepcopy", copy.deepcopy),
    ("copy", copy.copy),
]


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("name, copied", COPIES, ids=[c[0] for c in COPIES])
def test_a_copy_bootstraps_from_the_stored_values(window, name, copied):
    env = make_vec(EnvSpec("box", "discrete", 0.2, 0.3, 0.3), 4, "NextStep")
    runner = EnvRunner(env, Policy(env.single_action_space, False), seed=0, window=window)
    runner.sample(5)
    chunks = runner.sample(6)
    for k, chunk in enumerate(chunks):  # a recurrent critic's way: V(last obs) stored
        if not chunk.is_terminated:
            chunk.custom_data["bootstrap_value"] = 0.25 * k
    want = episodes_to_rollout(chunks, gamma=0.9, keys=KEYS)
    back = copied(chunks)
    got = episodes_to_rollout(back, gamma=0.9, keys=KEYS)
    for field, tensor in want.storage.tensors.items():
        assert torch.equal(got.storage.tensors[field], tensor), (name, field)
    assert torch.equal(got.last_values, want.last_values)
    assert back.unchanged()  # the fast path read the blocks


INDICES = [
    ("last", -1, None),
    ("first counted back", -4, None),
    ("past the end", 4, IndexError),
    ("before the start", -5, IndexError),
    ("a float", 1.0, TypeError),
    ("a bool", True, TypeError),
]


@pytest.mark.parametrize("name, index, error", INDICES, ids=[i[0] for i in INDICES])
def test_stored_custom_data_reads_an_index_as_indexing_does(name, index, error):
    env = make_vec(EnvSpec("box", "discrete", 0.0, 0.0, 0.3), 4, "NextStep")
    chunks = EnvRunner(env, Policy(env.single_action_space, False), seed=0).sample(3)
    assert len(chunks) == 4
    for k in range(4):
        chunks[k].custom_data["bootstrap_value"] = float(k)
    for copied in (chunks, copy.deepcopy(chunks)):
        if error is not None:
            with pytest.raises(error):
                copied.stored_custom_data(index)
            continue
        want = chunks[index].custom_data
        assert copied.stored_custom_data(index) == want, name
