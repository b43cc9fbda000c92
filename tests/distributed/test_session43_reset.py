"""``EnvRunner.reset`` reached on every runner of a group, as the runner's docs say to."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerContext, RunnerGroup  # noqa: E402
from episodes.distributed.actor import build_runner  # noqa: E402
from tests.distributed._envs import cartpole, weighted_policy  # noqa: E402


def test_foreach_runner_resets_every_runner_to_its_seed(ray_local):
    with RunnerGroup(
        cartpole, weighted_policy, num_runners=2, seed=3, config={"num_envs": 2},
        num_cpus_per_runner=0.5,
    ) as group:  # fmt: skip
        before = group.sample(6)
        group.foreach_runner(lambda runner, ctx: runner.reset(seed=ctx.seed))
        after = group.sample(6)
        seeds = group.foreach_runner(lambda runner, ctx: ctx.seed)
    assert not {c.id_ for c in before} & {c.id_ for c in after}
    for r, seed in enumerate(seeds):
        ctx = RunnerContext.create(seed=3, index=r, num_runners=2, config={"num_envs": 2})
        local = build_runner(cartpole, weighted_policy, ctx)
        local.sample(6)
        local.reset(seed=seed)
        mine, theirs = local.sample(6), after.samples[r].episodes
        assert theirs[0].t_started == 0
        assert [c.get_observations().tolist() for c in theirs] == [
            c.get_observations().tolist() for c in mine
        ]
