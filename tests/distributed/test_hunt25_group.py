"""Round 25 (distributed docs hunt): seeds, early refusals, interrupts and replacements."""

from __future__ import annotations

import signal
import time
from typing import Any

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


@pytest.mark.parametrize("stop", [False, True], ids=["collected", "stopped"])
def test_an_interrupt_keeps_the_samples_already_taken(ray_local, stop) -> None:
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
        if stop:  # the sample kept back counts as lost, as the request still in flight
            group.stop()
            assert group.get_metrics()["num_lost_samples"] == 2
            return
        got = []
        while group.num_in_flight:
            got += group.sample_async(200, launch=False).samples
        assert sorted((s.runner_index, s.env_steps) for s in got) == [(0, 400), (1, 400)]
        assert group.get_metrics()["num_lost_samples"] == 0


class _WaitSpy:
    """``ray`` as the group sees it, recording each ``wait``: (how many refs, timeout)."""

    def __init__(self, ray_module: object) -> None:
        self._ray = ray_module
        self.waits: list[tuple[int, object]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._ray, name)

    def wait(self, refs: list[Any], *args: Any, **kwargs: Any) -> Any:
        self.waits.append((len(refs), kwargs.get("timeout")))
        return self._ray.wait(refs, *args, **kwargs)


def test_a_replacement_that_cannot_start_raises_after_start_timeout_s(ray_local) -> None:
    @ray.remote(num_cpus=1.75)
    class Blocker:
        def ping(self) -> int:
            return 1

    # 10 s, not less: the first actors start within it on a loaded machine too.
    group = RunnerGroup(
        cartpole, random_policy, num_runners=2, seed=0, config={"num_envs": 2},
        num_cpus_per_runner=0.75, start_timeout_s=10,
    )  # fmt: skip
    blocker = None
    try:
        group.sample(4)
        for actor in group.actors:
            ray.kill(actor, no_restart=True)
        time.sleep(0.5)
        blocker = Blocker.remote()
        ray.get(blocker.ping.remote(), timeout=60)  # it holds the CPUs the dead runner freed
        out = group.sample(4)  # the round with the loss returns
        assert sorted(lost.runner_index for lost in out.lost) == [0, 1]
        spy = _WaitSpy(group._ray)
        group._ray = spy
        # One wait for both, naming both (not start_timeout_s once per runner).
        with pytest.raises(
            RuntimeError, match=r"runners 0 \(generation 1\), 1 \(generation 1\) did not start "
            r"within 10(\.0)? s"
        ):  # fmt: skip
            group.sample(4)
        assert [wait for wait in spy.waits if wait[1] == 10] == [(2, 10)], spy.waits
        assert group.num_in_flight == 2  # both requests wait for their actors still
    finally:
        if blocker is not None:
            ray.kill(blocker)
        group.stop()


def test_an_outcome_held_since_an_interrupt_waits_for_no_replacement() -> None:
    from episodes.distributed.slots import Slot, stuck_replacements

    class NeverReady:
        def wait(self, refs, num_returns, timeout):
            return [], list(refs)

    held = Slot(index=0, generation=1, handle=None, num_envs=2, started="start", held="lost")
    waiting = Slot(index=1, generation=1, handle=None, num_envs=2, started="start", ref="req")
    assert stuck_replacements(NeverReady(), [held, waiting], 1.0) == [waiting]
