"""Session 15 fixes of episodes.distributed: Ray's references never travel through shared
memory, a reply the caller cannot unpickle is a lost sample on both paths, an interrupt keeps
requests in flight, refused settings change nothing on disk, write_episodes checks its rows
before it writes, the group's metrics check their flags and bound, the Ray floor is the tested
version."""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import (  # noqa: E402
    GroupMetrics,
    RunnerGroup,
    RunnerSample,
    episode_row,
    read_steps,
    write_episodes,
)
from episodes.distributed.shared_memory import SHM_DIR  # noqa: E402
from episodes.io import DatasetWriter, dataset_info  # noqa: E402
from tests.distributed._envs import cartpole, random_policy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------- helpers run on the actors
def _rebuild(driver_pid: int) -> Picky:
    if os.getpid() == driver_pid:
        raise ValueError("a Picky object cannot be rebuilt in the driver")
    return Picky(driver_pid)


class Picky:
    """An object only the actors can unpickle (say, its class lives in their runtime env)."""

    def __init__(self, driver_pid: int):
        self.driver_pid = driver_pid

    def __reduce__(self):
        return (_rebuild, (self.driver_pid,))


class PickyInfos(gym.vector.VectorWrapper):
    """Once armed with the driver's pid, every step's infos carry a Picky per sub-env."""

    driver_pid: int | None = None

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        if self.driver_pid is not None:
            picky = np.empty(self.num_envs, dtype=object)
            picky[:] = [Picky(self.driver_pid) for _ in range(self.num_envs)]
            infos = {**infos, "picky": picky, "_picky": np.ones(self.num_envs, bool)}
        return obs, rewards, terminated, truncated, infos


def picky_env(ctx):
    return PickyInfos(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"))


def arm(runner, ctx, *, index: int, driver_pid: int) -> None:
    if ctx.index == index:
        runner.env.driver_pid = driver_pid


@ray.remote(num_cpus=0)
class Echo:
    def ping(self) -> str:
        return "pong"


def put_array(runner, ctx):
    return {"ref": ray.put(np.full(1000, 7.0)), "pad": np.zeros(10)}


def start_actor(runner, ctx):
    return {"handle": Echo.remote(), "pad": np.zeros(10)}


def leased(group: RunnerGroup) -> list[int]:
    return [sum(s.leased for s in slot.segments._segments) for slot in group._slots]


# ------------------------------------------------------------------- one group for many
@pytest.fixture(scope="module")
def group(ray_local):
    if not os.access(SHM_DIR, os.W_OK):
        pytest.skip("no writable /dev/shm")
    g = RunnerGroup(picky_env, random_policy, num_runners=2, seed=0, num_cpus_per_runner=0.5)
    g.sample(3)  # sizes the segments: the next samples come through shared memory
    yield g
    g.stop()


USES = {
    "ray.put in the runner": (put_array, lambda out: ray.get(out["ref"], timeout=20)[:2].sum()),
    "actor started by the runner": (
        start_actor,
        lambda out: ray.get(out["handle"].ping.remote(), timeout=20),
    ),
}


@pytest.mark.parametrize(("fn", "use"), USES.values(), ids=USES.keys())
def test_foreach_runner_results_holding_ray_references_keep_what_they_name(group, fn, use):
    """Call 0 sizes the "apply" segments (Ray's path); calls 1-2 would go through them."""
    expected = use(group.foreach_runner(fn)[0])
    for _ in range(2):
        out = group.foreach_runner(fn)[0]
        # Plain pickle left Ray unaware of the runner's reference: gone once the runner
        # dropped it (the get timed out, or the actor had died).
        assert use(out) == expected
        del out


def test_a_reply_the_caller_cannot_unpickle_through_shared_memory_is_a_lost_sample(group):
    before = group.get_metrics(reset=False)
    generations = group.generations
    group.foreach_runner(functools.partial(arm, index=0, driver_pid=os.getpid()))
    out = group.sample(3)  # runner 0's sample holds Picky infos: only Ray's path raised
    assert [s.runner_index for s in out.samples] == [1]
    assert [lost.runner_index for lost in out.lost] == [0]
    assert "cannot be rebuilt in the driver" in out.lost[0].error
    assert group.num_in_flight == 0  # the other runner's request was collected
    assert group.generations == [generations[0] + 1, generations[1]]  # replaced, as on Ray's
    after = group.get_metrics(reset=False)
    assert after["num_lost_samples"] == before["num_lost_samples"] + 1
    assert group.sample(3).env_steps == 12  # the fresh actor is not armed: the group serves


class InterruptOnce:
    """The ``ray`` module, but the first ``get`` raises KeyboardInterrupt (Ctrl-C)."""

    def __init__(self):
        self.armed = True

    def __getattr__(self, name):
        return getattr(ray, name)

    def get(self, *args, **kwargs):
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt
        return ray.get(*args, **kwargs)


def test_an_interrupted_sample_keeps_its_requests_in_flight_with_their_leases(group):
    group.sample(3)
    assert leased(group) == [0, 0]
    group._ray = InterruptOnce()
    try:
        with pytest.raises(KeyboardInterrupt):
            group.sample(3)
    finally:
        group._ray = ray
    assert group.num_in_flight == 2  # the interrupted request too: collectable
    assert [slot.lease is not None for slot in group._slots] == [True, True]
    before = group.get_metrics(reset=False)["num_samples"]
    done = 0
    while group.num_in_flight:
        done += len(group.sample_async(3, launch=False).samples)
    assert done == 2
    after = group.get_metrics(reset=False)
    assert after["num_samples"] == before + 2
    assert leased(group) == [0, 0]  # every segment free again once the samples are gone


def test_an_interrupt_while_a_reply_is_unpickled_counts_it_lost_and_frees_its_segment(group):
    group.sample(3)
    lost = group.get_metrics(reset=False)["num_lost_samples"]
    slot = group._slots[0]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    slot.segments.receive = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            group.sample(3)
    finally:
        del slot.segments.receive
    assert group.get_metrics(reset=False)["num_lost_samples"] == lost + 1
    assert slot.ref is None and slot.lease is None
    assert group.num_in_flight == 1  # runner 1's request: still there to collect
    while group.num_in_flight:
        group.sample_async(3, launch=False)
    assert leased(group) == [0, 0]


def _wait_until_dead(actor, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=timeout)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed actor still answers")


def test_collecting_goes_on_after_an_unexpected_error_so_nothing_stays_in_flight(group):
    ray.kill(group.actors[0], no_restart=True)
    # ray.kill is asynchronous: wait until the actor is gone, or its reply may still come.
    _wait_until_dead(group.actors[0])

    def broken_spawn(index, generation):
        raise ValueError("no actor for you")

    group._spawn = broken_spawn
    try:
        with pytest.raises(ValueError, match="no actor for you"):
            group.sample(3)  # runner 0 lost; its replacement fails to spawn
    finally:
        del group._spawn
    assert group.num_in_flight == 0  # runner 1's request was collected all the same
    group.restart_runner(0)
    assert group.sample(3).env_steps == 12


# ---------------------------------------------------------------- refused constructions
BAD_ACTOR_OPTIONS = {
    "negative cpus": {"num_cpus_per_runner": -1},
    "nan cpus": {"num_cpus_per_runner": float("nan")},
    "unknown actor option": {"actor_options": {"bogus": 1}},
}


@pytest.mark.parametrize("kwargs", BAD_ACTOR_OPTIONS.values(), ids=BAD_ACTOR_OPTIONS.keys())
def test_refused_actor_options_leave_no_dataset_at_write_to(ray_local, tmp_path, kwargs):
    path = tmp_path / "data"
    with pytest.raises(ValueError):
        RunnerGroup(cartpole, random_policy, num_runners=1, write_to=path, **kwargs)
    assert not path.exists()


BAD_SETTINGS = {
    "runner_kwargs as pairs": ({"runner_kwargs": [("window", "transitions")]}, TypeError),
    "config as a string": ({"config": "num_envs=2"}, TypeError),
    "actor_options as pairs": ({"actor_options": [("num_cpus", 1)]}, TypeError),
    "write_options as pairs": ({"write_to": "x", "write_options": [("sync", False)]}, TypeError),
    "write_options without write_to": ({"write_options": {"sync": False}}, ValueError),
    "write_metadata without write_to": ({"write_metadata": object()}, ValueError),
}


@pytest.mark.parametrize(("kwargs", "error"), BAD_SETTINGS.values(), ids=BAD_SETTINGS.keys())
def test_settings_that_are_not_mappings_or_have_no_effect_are_refused(
    ray_local, tmp_path, kwargs, error
):
    name = next(k for k in kwargs if k != "write_to")
    if "write_to" in kwargs:
        kwargs = {**kwargs, "write_to": tmp_path / "data"}
    with pytest.raises(error, match=name):
        RunnerGroup(cartpole, random_policy, num_runners=1, num_cpus_per_runner=0.25, **kwargs)
    assert not (tmp_path / "data").exists()


def failing_env(ctx):
    raise RuntimeError("the env factory failed")


def test_a_runner_that_fails_to_start_says_so_in_plain_text(ray_local):
    with pytest.raises(RuntimeError, match="failed to start") as caught:
        RunnerGroup(failing_env, random_policy, num_runners=1, num_cpus_per_runner=0.25)
    assert "the env factory failed" in str(caught.value)
    assert "\x1b[" not in str(caught.value)  # no terminal colour codes


# --------------------------------------------------------------------------- metrics
@pytest.mark.parametrize("reset", ["no", "False", 0, 1, None, np.array([True])], ids=repr)
def test_reduce_and_get_metrics_refuse_a_reset_that_is_not_a_bool(reset):
    m = GroupMetrics()
    m.add_sample(RunnerSample(0, 0, 0, -1, 1, [], {"num_env_steps": 2}))
    with pytest.raises(TypeError, match="reset"):
        m.reduce(reset=reset)
    assert m.num_samples == 1  # nothing cleared
    assert m.reduce(reset=np.False_)["num_samples"] == 1 and m.num_samples == 1


@pytest.mark.parametrize("bound", [-1, 2.5, "3", True, None], ids=repr)
def test_max_listed_is_checked_when_set_not_only_when_constructed(bound):
    m = GroupMetrics(max_listed=7)
    with pytest.raises(ValueError, match="max_listed"):
        m.max_listed = bound
    assert m.max_listed == 7
    m.max_listed = np.int64(2)
    m.add_sample(RunnerSample(0, 0, 0, -1, 1, [], {"episode_returns": [1.0, 2.0, 3.0]}))
    assert m.reduce()["episode_returns"] == [2.0, 3.0] and m.max_listed == 2


# ------------------------------------------------------------------- write_episodes
def episode(name: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        name, observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )


@pytest.fixture()
def quiet_data(ray_local):
    ray.data.DataContext.get_current().enable_progress_bars = False


def test_write_episodes_of_rows_without_episodes_leaves_a_new_path_uncreated(quiet_data, tmp_path):
    source = tmp_path / "source"
    with DatasetWriter(source) as w:
        w.write(episode("a"))
    known = ray.data.from_pandas(pd.DataFrame(read_steps(source).take_all()))
    with pytest.raises(TypeError, match="'episode' column") as caught:
        write_episodes(known, tmp_path / "known")  # the schema is known: refused up front
    assert type(caught.value) is TypeError
    with pytest.raises(TypeError, match="'episode' column"):
        write_episodes(read_steps(source), tmp_path / "read")  # refused by the write task
    assert not (tmp_path / "known").exists() and not (tmp_path / "read").exists()


def test_write_episodes_with_a_bad_row_leaves_the_target_as_it_was(quiet_data, tmp_path):
    target = tmp_path / "target"
    with DatasetWriter(target) as w:
        w.write(episode("old"))
    rows = [episode_row(episode(f"new{i}")) for i in range(3)]
    rows.append({**rows[0], "episode": "not an episode"})
    one_block = ray.data.from_pandas(pd.DataFrame(rows))
    with pytest.raises(TypeError, match="SingleAgentEpisode"):
        write_episodes(one_block, target, append=True, shard_bytes=1)  # a shard per good row
    assert [str(e.id_) for e in dataset_info(target).episodes] == ["old"]
    with pytest.raises(TypeError, match="SingleAgentEpisode"):
        write_episodes(one_block, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


# ------------------------------------------------------------- packaging and figures
def test_the_ray_extra_asks_for_the_tested_ray_version():
    text = (ROOT / "pyproject.toml").read_text()
    floor = re.search(r'^ray = \["ray\[data\]>=(\d+)\.(\d+)', text, re.M)
    assert floor is not None
    assert (int(floor[1]), int(floor[2])) >= (2, 60)  # 2.40 cannot import the package
    assert "Ray 2.60 or later" in (ROOT / "docs" / "distributed.md").read_text()


def test_the_benchmark_prints_only_the_targets_the_docs_state():
    source = (ROOT / "benchmarks" / "bench_distributed.py").read_text()
    fresh = re.search(r'\("transport \(gather / fresh copy\)", [^,]+, "([^"]*)"', source)
    assert fresh is not None and fresh[1] == "-"  # distributed.md sets none for it


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
