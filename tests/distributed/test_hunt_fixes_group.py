"""Hunt fixes of the runner group: reading a GroupSample is no edit, calls refused up front,
counts not truncated, the group's metrics bounded."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes.converter import ColumnKeys, episodes_to_rollout  # noqa: E402
from episodes.distributed import (  # noqa: E402
    GroupMetrics,
    GroupSample,
    RunnerContext,
    RunnerGroup,
    RunnerSample,
)
from episodes.runner import EnvRunner  # noqa: E402
from tests.distributed._envs import cartpole, value_fn, weighted_policy  # noqa: E402

KEYS = ColumnKeys(values="vf_preds", log_probs="action_logp")


def local_group(window: str, num_steps: int = 40) -> GroupSample:
    """Two runners' samples gathered as a group hands them out (no actors needed)."""
    samples = []
    for r in range(2):
        ctx = RunnerContext.create(seed=5, index=r, num_runners=2, config={"num_envs": 3})
        env = cartpole(ctx)
        runner = EnvRunner(env, weighted_policy(env, ctx), seed=ctx.seed, window=window)
        samples.append(RunnerSample(r, 0, 0, -1, env.num_envs, runner.sample(num_steps)))
    return GroupSample(samples)


def rollout(gathered) -> dict[str, np.ndarray]:
    out = episodes_to_rollout(gathered, gamma=0.9, value_fn=value_fn, keys=KEYS)
    return {
        name: getattr(out.storage, name).numpy().copy()
        for name in ("observations", "rewards", "dones", "values")
    }


# ------------------------------------------------------------------ reading is not an edit
@pytest.mark.parametrize("window", ["vector_steps", "transitions"])
def test_reading_a_group_sample_keeps_every_runner_sample_unchanged(window):
    fresh, read = local_group(window), local_group(window)
    assert sorted({c.custom_data["env_index"] for c in read}) == list(range(6))
    assert [s.episodes.unchanged() for s in read.samples] == [True, True]
    # The vector-steps window of a next-step env converts only through the fast path.
    want, got = rollout(fresh), rollout(read)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_users_env_index_edit_still_counts_after_or_before_the_group_reads():
    group = local_group("transitions")
    chunk = group[len(group) - 1]  # runner 1's: renumbered
    assert group.samples[1].episodes.unchanged()
    chunk.custom_data["env_index"] = 0
    assert not group.samples[1].episodes.unchanged()

    group = local_group("transitions")
    part = group.samples[1].episodes
    part[0].custom_data["env_index"] = 2  # edited before the group renumbers it
    assert group[len(group.samples[0].episodes)].custom_data["env_index"] == 5
    assert not part.unchanged()


def test_renumbered_chunks_travel_with_their_numbers_and_stay_unchanged():
    group = local_group("transitions")
    numbers = [c.custom_data["env_index"] for c in group]
    for moved in (
        pickle.loads(pickle.dumps(group.samples[1].episodes)),
        copy.copy(group.samples[1].episodes),
    ):
        assert moved.unchanged()
        start = len(group.samples[0].episodes)
        assert [c.custom_data["env_index"] for c in moved] == numbers[start:]


def test_renumber_refuses_a_bad_env_index_before_building_the_chunk():
    part = local_group("transitions").samples[0].episodes
    for bad in (-1, 1.0, True):
        with pytest.raises(ValueError, match="env_index"):
            part.renumber(0, bad)
    assert part.built() == []


# -------------------------------------------------------------------------- the group
@pytest.fixture(scope="module")
def group(ray_local):
    g = RunnerGroup(
        cartpole,
        weighted_policy,
        num_runners=2,
        seed=3,
        config={"num_envs": 2},
        num_cpus_per_runner=0.5,
    )
    yield g
    g.stop()


def test_a_gathered_group_sample_read_first_still_converts_on_the_fast_path(group):
    gathered = group.sample(8)
    _ = [c.get_return() for c in gathered if c.is_done]
    assert [s.episodes.unchanged() for s in gathered.samples] == [True, True]
    assert rollout(gathered)["rewards"].shape[:2] == (8, 4)


@pytest.mark.parametrize(
    "timeout_s",
    [-1, "soon", True, math.nan, 1j, [1]],
    ids=["-1", "str", "bool", "nan", "complex", "list"],
)
def test_sample_async_refuses_a_bad_timeout_before_broadcasting_or_launching(group, timeout_s):
    version = group.weights_version
    with pytest.raises(ValueError, match="timeout_s"):
        group.sample_async(4, weights={"p_right": 0.6}, timeout_s=timeout_s)
    assert group.num_in_flight == 0 and group.weights_version == version
    assert group.sample(4).env_steps == 16  # nothing left in flight behind the refusal


@pytest.mark.parametrize("timeout_s", [0, 0.5, np.float32(30.0), math.inf, None], ids=repr)
def test_sample_async_takes_any_timeout_of_seconds_at_least_zero(group, timeout_s):
    done = len(group.sample_async(4, timeout_s=timeout_s).samples)
    while group.num_in_flight:  # a collection takes at least one, not every request
        done += len(group.sample_async(4, launch=False).samples)
    assert done == 2


BAD_COUNTS = {
    "fractional runners": {"num_runners": 1.9},
    "whole float runners": {"num_runners": 1.0},
    "string runners": {"num_runners": "1"},
    "bool runners": {"num_runners": True},
    "zero runners": {"num_runners": 0},
    "fractional failures": {"max_consecutive_failures": 1.5},
    "bool failures": {"max_consecutive_failures": True},
    "zero failures": {"max_consecutive_failures": 0},
    "negative start timeout": {"start_timeout_s": -1},
    "string start timeout": {"start_timeout_s": "5"},
}


@pytest.mark.parametrize("kwargs", BAD_COUNTS.values(), ids=BAD_COUNTS.keys())
def test_group_refuses_counts_it_would_truncate_before_any_actor_starts(ray_local, kwargs):
    name = next(iter(kwargs))
    try:
        g = RunnerGroup(
            cartpole, weighted_policy, num_cpus_per_runner=0.25, **{"num_runners": 1, **kwargs}
        )
    except ValueError as err:
        assert name in str(err)
        return
    g.stop()
    pytest.fail(f"{kwargs} was accepted")


# ----------------------------------------------------------------- the group's metrics
def test_group_metrics_stay_bounded_and_count_every_episode():
    m = GroupMetrics(max_listed=120)
    part = {"episode_returns": [1.0] * 50, "episode_lengths": [2] * 50, "num_episodes": 50}
    for k in range(500):
        returns = [float(k)] * 50
        m.add_sample(RunnerSample(0, 0, k, 0, 1, [], {**part, "episode_returns": returns}))
        assert len(m.runner_metrics) <= 65
    out = m.reduce(reset=False)
    assert out["num_episodes"] == 25_000
    assert out["episode_returns"] == [497.0] * 20 + [498.0] * 50 + [499.0] * 50
    assert len(out["episode_lengths"]) == 120
    assert out["mean_episode_return"] == pytest.approx(249.5)
    assert out["mean_episode_length"] == pytest.approx(2.0)
    m.reduce()
    assert m.max_listed == 120 and m.runner_metrics == []  # the bound outlives a reset


@pytest.mark.parametrize("bound", [-1, 2.5, True], ids=repr)
def test_group_metrics_max_listed_must_be_a_whole_number_at_least_zero(bound):
    with pytest.raises(ValueError, match="max_listed"):
        GroupMetrics(max_listed=bound)
