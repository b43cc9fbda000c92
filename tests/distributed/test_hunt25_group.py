"""Round 25 (distributed docs hunt): seeds, early refusals, interrupts and replacements."""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerContext, RunnerGroup, build_runner  # noqa: E402
from tests.distributed._envs import cartpole, random_policy  # noqa: E402


def test_no_two_runners_sub_envs_share_a_seed() -> None:
    # Runner i seeded seed + i, and gymnasium seeds sub-env k with seed + k: runner 0's env 1
    # and runner 1's env 0 started alike, and so on.
    firsts = []
    for index in range(3):
        context = RunnerContext.create(seed=0, index=index, config={"num_envs": 4})
        runner = build_runner(cartpole, random_policy, context)
        firsts += [tuple(chunk.get_observations(0)) for chunk in runner.sample(1)]
    assert len(firsts) == 12 and len(set(firsts)) == 12


@pytest.mark.parametrize(
    ("runner_kwargs", "match"),
    [({"seed": 3}, "seed comes from its context"), ({"windw": "x"}, r"takes no \['windw'\]")],
)
def test_runner_kwargs_are_refused_before_anything_starts(tmp_path, runner_kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        RunnerGroup(
            cartpole, random_policy, num_runners=1, seed=0, runner_kwargs=runner_kwargs,
            write_to=tmp_path / "d",
        )  # fmt: skip
    assert not (tmp_path / "d").exists()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def test_an_interrupt_keeps_the_samples_already_taken(ray_local) -> None:
    config = {"num_envs": 2, "sleep": 0.01, "sleep_runner": 1}  # runner 1: 2 s for 200 steps
    with RunnerGroup(
        cartpole, random_policy, num_runners=2, seed=0, config=config, num_cpus_per_runner=0.5
    ) as group:
        group.sample(2)
        previous = signal.signal(signal.SIGALRM, _interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, 1.0)  # runner 0 is done, runner 1 is not
            with pytest.raises(KeyboardInterrupt):
                group.sample(200)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert group.num_in_flight == 2
        with pytest.raises(RuntimeError, match="in flight"):
            group.sample(2)
        got = []
        while group.num_in_flight:
            got += group.sample_async(200, launch=False).samples
        assert sorted((s.runner_index, s.env_steps) for s in got) == [(0, 400), (1, 400)]
        assert group.get_metrics()["num_lost_samples"] == 0


def test_a_replacement_that_cannot_start_raises_after_start_timeout_s(ray_local) -> None:
    @ray.remote(num_cpus=1.25)
    class Blocker:
        def ping(self) -> int:
            return 1

    group = RunnerGroup(
        cartpole, random_policy, num_runners=2, seed=0, config={"num_envs": 2},
        num_cpus_per_runner=0.75, start_timeout_s=3,
    )  # fmt: skip
    blocker = None
    try:
        group.sample(4)
        ray.kill(group.actors[1], no_restart=True)
        time.sleep(0.5)
        blocker = Blocker.remote()
        ray.get(blocker.ping.remote(), timeout=60)  # it holds the CPUs the dead runner freed
        out = group.sample(4)  # the round with the loss returns
        assert [lost.runner_index for lost in out.lost] == [1]
        begin = time.monotonic()
        with pytest.raises(RuntimeError, match="replacement actor .* did not start within 3"):
            group.sample(4)
        assert time.monotonic() - begin < 30
    finally:
        if blocker is not None:
            ray.kill(blocker)
        group.stop()
    assert np.isfinite(begin)
