"""Converting several runners' samples side by side: the block fast path equals the general one.

The samples come from local runners (no Ray needed): a ``GroupSample`` of them is what a
``RunnerGroup`` returns. The fast path reads each runner's columns from its blocks and joins
them; converting a plain list of the same (built) chunks takes the general path.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("ray")

from episodes.converter import ColumnKeys, episodes_to_rollout  # noqa: E402
from episodes.distributed import GroupSample, RunnerSample  # noqa: E402
from episodes.runner import EnvRunner  # noqa: E402
from tests.runner._random_env import EnvSpec, Policy, make_vec, obs_fn_for, value_fn  # noqa: E402

KEYS = ColumnKeys(values="vf", log_probs="logp", distribution=("logits",))
FIELDS = ("observations", "actions", "rewards", "dones", "values", "actions_log_prob")


def gathered(spec: EnvSpec, mode: str, envs: list[int], steps: int, calls: int) -> GroupSample:
    runners = [
        EnvRunner(
            make_vec(spec, n, mode),
            Policy(make_vec(spec, 1, mode).action_space, False),
            seed=10 * r,
        )
        for r, n in enumerate(envs)
    ]
    for runner in runners:
        for _ in range(calls - 1):  # leftover rows and lookback from earlier calls
            runner.sample(steps)
    samples = [
        RunnerSample(r, 0, 0, 0, n, runner.sample(steps))
        for r, (n, runner) in enumerate(zip(envs, runners))
    ]
    return GroupSample(samples)


def same_rollouts(a, b) -> None:
    for name in FIELDS:
        x, y = getattr(a.storage, name), getattr(b.storage, name)
        if isinstance(x, dict):
            assert x.keys() == y.keys(), name
            assert all(torch.equal(x[key], y[key]) for key in x), name
        else:
            assert x.shape == y.shape and torch.equal(x, y), name
    for x, y in zip(a.storage.distribution_params, b.storage.distribution_params):
        assert torch.equal(x, y)
    assert torch.equal(a.last_values, b.last_values)
    assert len(a.groups) == len(b.groups)
    for ga, gb in zip(a.groups, b.groups):
        assert [(c.id_, len(c), c.custom_data["env_index"]) for c in ga] == [
            (c.id_, len(c), c.custom_data["env_index"]) for c in gb
        ]


@settings(max_examples=25, deadline=None)
@given(
    obs=st.sampled_from(["box", "box", "dict", "discrete"]),
    action=st.sampled_from(["discrete", "box"]),
    mode=st.sampled_from(["NextStep", "SameStep"]),
    envs=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    steps=st.integers(1, 12),
    calls=st.integers(1, 3),
    p_end=st.sampled_from([0.0, 0.1, 0.4]),
)
def test_side_by_side_equals_the_general_path(obs, action, mode, envs, steps, calls, p_end):
    spec = EnvSpec(obs, action, p_terminate=p_end, p_truncate=p_end / 2, p_info=0.2)
    group = gathered(spec, mode, envs, steps, calls)
    kwargs = dict(gamma=0.9, value_fn=value_fn, keys=KEYS, obs_fn=obs_fn_for(obs))
    fast = episodes_to_rollout(group, **kwargs)  # first: no chunk built yet
    # The fast path applies, an obs_fn or not (it acts row by row), and builds no chunk.
    assert all(repr(s.episodes).endswith(", 0 built)") for s in group.samples)
    general = episodes_to_rollout(list(group), **kwargs)
    same_rollouts(fast, general)
    # Each runner's own fast path gives its columns of the joined storage.
    start = 0
    for sample in group.samples:
        own = episodes_to_rollout(sample.episodes, **kwargs)
        cols = slice(start, start + sample.num_envs)
        assert torch.equal(fast.storage.observations[:, cols], own.storage.observations)
        assert torch.equal(fast.storage.rewards[:, cols], own.storage.rewards)
        start += sample.num_envs


def test_the_fast_path_builds_no_chunk_and_falls_back_when_a_chunk_changed():
    spec = EnvSpec("box", "discrete", p_terminate=0.2, p_truncate=0.1, p_info=0.0)
    group = gathered(spec, "NextStep", [3, 2], 10, 2)
    kwargs = dict(gamma=0.9, value_fn=value_fn, keys=KEYS)
    fast = episodes_to_rollout(group, **kwargs)
    assert all(repr(s.episodes).endswith(", 0 built)") for s in group.samples)
    same_rollouts(fast, episodes_to_rollout(list(group), **kwargs))
    # A chunk written to is not what the blocks hold: the general path reads the chunks.
    chunk = group[0]
    chunk.set_rewards(new_data=np.full(len(chunk), 5.0), at_indices=slice(0, len(chunk)))
    changed = episodes_to_rollout(group, **kwargs)
    assert not torch.equal(changed.storage.rewards, fast.storage.rewards)
    same_rollouts(changed, episodes_to_rollout(list(group), **kwargs))


@pytest.mark.parametrize("obs_fn", [False, True], ids=["no obs_fn", "obs_fn"])
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_nested_observations_take_the_fast_path(window, obs_fn):
    # The parts' structures were compared by the repr of their data, which always differs:
    # Dict observations fell back (and a vector-steps window, which only the fast path lays
    # out, was refused). With an obs_fn the fast path stepped aside: the same refusal.
    spec = EnvSpec("dict", "discrete", p_terminate=0.3, p_truncate=0.1, p_info=0.0)
    runners = [
        EnvRunner(
            make_vec(spec, n, "NextStep"),
            Policy(make_vec(spec, 1, "NextStep").action_space, False),
            seed=10 * r,
            window=window,
        )
        for r, n in enumerate([2, 3])
    ]
    group = GroupSample(
        [
            RunnerSample(r, 0, 0, 0, runner.num_envs, runner.sample(8))
            for r, runner in enumerate(runners)
        ]
    )
    kwargs = dict(
        gamma=0.9, value_fn=value_fn, keys=KEYS, obs_fn=obs_fn_for("dict") if obs_fn else None
    )
    fast = episodes_to_rollout(group, **kwargs)
    assert all(repr(s.episodes).endswith(", 0 built)") for s in group.samples)
    start = 0
    for sample in group.samples:
        own = episodes_to_rollout(sample.episodes, **kwargs)
        cols = slice(start, start + sample.num_envs)
        if obs_fn:
            assert torch.equal(fast.storage.observations[:, cols], own.storage.observations)
        for key, leaf in ({} if obs_fn else own.storage.observations).items():
            assert torch.equal(fast.storage.observations[key][:, cols], leaf)
        assert torch.equal(fast.storage.rewards[:, cols], own.storage.rewards)
        start += sample.num_envs
    if window == "transitions":
        same_rollouts(fast, episodes_to_rollout(list(group), **kwargs))


def test_a_pickled_group_sample_keeps_each_chunks_env_index():
    # Read chunks were rebuilt from the blocks after pickling without the group's stamps:
    # the second runner's chunks came back as envs 0 and 1 again (a [2T, 2] rollout).
    import pickle

    spec = EnvSpec("box", "discrete", p_terminate=0.2, p_truncate=0.1, p_info=0.0)
    group = gathered(spec, "NextStep", [2, 2], 8, 1)
    stamps = [(c.custom_data["env_index"], c.custom_data.get("runner_index")) for c in group]
    assert sorted({s[0] for s in stamps}) == [0, 1, 2, 3]
    clone = pickle.loads(pickle.dumps(group))
    assert [
        (c.custom_data["env_index"], c.custom_data.get("runner_index")) for c in clone
    ] == stamps
    kwargs = dict(gamma=0.9, value_fn=value_fn, keys=KEYS)
    same_rollouts(episodes_to_rollout(clone, **kwargs), episodes_to_rollout(group, **kwargs))
    for bad in (1.5, "1", True):
        with pytest.raises(TypeError):
            group[bad]


def test_a_group_sample_equals_its_copies_and_its_chunks():
    """It compared by identity: a pickled copy or the list of its chunks was unequal."""
    import copy
    import pickle

    group = gathered(EnvSpec("box", "discrete", 0.2, 0.2, 0.3), "NextStep", [2, 3], 4, 2)
    assert group == pickle.loads(pickle.dumps(group)) == copy.deepcopy(group)
    assert group == list(group)
    assert group != list(group)[:-1]
