"""Runner chunks where users take them: to disk and back, and from async vector envs.

A chunk is a lazy view into the runner's blocks; written to a dataset and read back it must be
the same episode (data, lookback, flags, ids, ``t_started``). An ``AsyncVectorEnv`` (sub-envs
in processes, observations in shared memory that the next step overwrites) must record what a
``SyncVectorEnv`` with the same seed records.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes.io import DatasetWriter, read_episodes
from episodes.runner import EnvRunner

MODES = ["NextStep", "SameStep", "Disabled"]


def policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    actions = (obs[:, 1] > 0.5).astype(np.int64)  # deterministic; poles fall in ~10 steps
    return actions, {"vf_preds": obs[:, 0].astype(np.float32), "logits": obs[:, :2].copy()}


def cartpole(mode: str, how: str = "sync", **kwargs) -> gym.vector.VectorEnv:
    return gym.make_vec(
        "CartPole-v1",
        3,
        vectorization_mode=how,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode(mode), **kwargs},
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_chunks_round_trip_through_a_dataset(tmp_path, mode, window):
    if window == "vector_steps" and mode != "NextStep":
        pytest.skip("same-step and disabled windows are vector steps already")
    runner = EnvRunner(cartpole(mode), policy, seed=0, len_lookback_buffer=2, window=window)
    written = []
    with DatasetWriter(tmp_path / "ds") as writer:
        for _ in range(4):
            chunks = runner.sample(15)
            writer.write_many(chunks)
            written += list(chunks)
    back = list(read_episodes(tmp_path / "ds"))
    assert len(back) == len(written) > 12
    for got, want in zip(back, written, strict=True):
        assert got == want
        assert (got.id_, got.t_started, got.is_terminated, got.is_truncated) == (
            want.id_,
            want.t_started,
            want.is_terminated,
            want.is_truncated,
        )
        assert got.observations.lookback == want.observations.lookback
        assert got.custom_data == want.custom_data


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("shared_memory", [True, False], ids=["shared", "pipes"])
def test_async_envs_record_like_sync_ones(mode, shared_memory):
    sync = EnvRunner(cartpole(mode), policy, seed=3, len_lookback_buffer=1)
    env = cartpole(mode, "async", shared_memory=shared_memory)
    try:
        runner = EnvRunner(env, policy, seed=3, len_lookback_buffer=1)
        for _ in range(3):
            want, got = sync.sample(20), runner.sample(20)
            assert len(got) == len(want)
            for a, b in zip(got, want, strict=True):
                b = b.slice(slice(None))  # a detached copy, compared with ids aligned
                b.id_ = a.id_
                assert a == b
    finally:
        env.close()


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_copy_of_read_chunks_is_still_unchanged(how):
    # Built chunks travelled as copies that own their arrays: unchanged() turned False, and
    # the converter (or a distributed learner) took the general path, refusing masked windows.
    import copy
    import pickle

    chunks = EnvRunner(cartpole("NextStep"), policy, seed=0, window="vector_steps").sample(8)
    chunks[0].get_rewards()  # read only
    chunks[1].set_rewards(new_data=5.0, at_indices=0)  # a changed one travels as it is
    assert not chunks.unchanged()
    clone = pickle.loads(pickle.dumps(chunks)) if how == "pickle" else copy.deepcopy(chunks)
    assert list(clone) == list(chunks) and not clone.unchanged()
    fresh = EnvRunner(cartpole("NextStep"), policy, seed=0, window="vector_steps").sample(8)
    fresh[0].get_rewards()
    clone = pickle.loads(pickle.dumps(fresh)) if how == "pickle" else copy.deepcopy(fresh)
    assert clone.unchanged() and list(clone) == list(fresh)


def test_custom_data_of_read_chunks_survives_a_copy():
    import pickle

    chunks = EnvRunner(cartpole("NextStep"), policy, seed=0).sample(8)
    chunks[0].custom_data["tag"] = "mine"  # a key of the user's on an unchanged chunk
    clone = pickle.loads(pickle.dumps(chunks))
    assert clone[0].custom_data == {"env_index": 0, "tag": "mine"} and clone.unchanged()
