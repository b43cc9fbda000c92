"""Session 13 fixes of the runner group: stop() waits for every close, segment names never
outlive the start of their request, a failed foreach_runner still receives the replies that
arrived, readable error text and bool-only flags."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerActor, RunnerContext, RunnerGroup  # noqa: E402
from episodes.distributed.shared_memory import SHM_DIR, SlotSegments  # noqa: E402
from episodes.io import dataset_info  # noqa: E402
from tests.distributed._envs import (  # noqa: E402
    SlowOrCrashing,
    cartpole,
    random_policy,
    weighted_policy,
)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not os.access(SHM_DIR, os.W_OK), reason="no writable /dev/shm")


def shm_files(pid: int | None = None) -> list[str]:
    """The segment files of process ``pid`` (this one by default) still in /dev/shm."""
    prefix = f"episodes-{os.getpid() if pid is None else pid}-"
    return sorted(name for name in os.listdir(SHM_DIR) if name.startswith(prefix))


class BadClose(gym.vector.SyncVectorEnv):
    def close(self, **kwargs):
        raise RuntimeError("close failed")


def slow_env(ctx: RunnerContext) -> gym.vector.VectorEnv:
    """Two CartPoles; the runners in ``slow`` sleep ``sleep`` s per sub-env step, the runner
    ``bad_close`` has an env whose close raises."""
    cfg = ctx.config
    sleep = float(cfg["sleep"]) if ctx.index in cfg.get("slow", ()) else 0.0
    cls = BadClose if ctx.index == cfg.get("bad_close") else gym.vector.SyncVectorEnv
    return cls([lambda: SlowOrCrashing(gym.make("CartPole-v1"), sleep, None)] * 2)


# ------------------------------------------------------------------ stop() waits for all
@pytest.mark.parametrize(
    ("other", "slow"),
    [("killed", (0, 1)), ("close raises", (0,))],
    ids=["other runner killed", "other runner's close raises"],
)
def test_stop_commits_a_live_runners_request_whatever_the_other_runner_did(
    ray_local, tmp_path, other, slow
):
    """Runner 0 is still sampling when stop() starts; runner 1's close fails at once."""
    group = RunnerGroup(
        slow_env,
        random_policy,
        num_runners=2,
        seed=0,
        config={"sleep": 0.004, "slow": slow, "bad_close": 1 if other == "close raises" else None},
        num_cpus_per_runner=0.5,
        write_to=tmp_path / "data",
    )
    group.sample(2)  # 2 runners x 2 envs x 2 steps committed
    group.sample_async(200, timeout_s=0)  # runner 0: about 1.6 s of sampling
    time.sleep(0.3)
    if other == "killed":
        ray.kill(group.actors[1])  # mid-sample: its request is never committed
        time.sleep(0.2)
    group.stop()
    # Runner 0's request in flight (2 envs x 200 steps) is committed; runner 1's only if its
    # env was fast (its close raised after the commit).
    want = 8 + 400 + (400 if other == "close raises" else 0)
    assert dataset_info(tmp_path / "data").num_steps == want
    assert group.get_metrics()["num_lost_samples"] == 2


# ------------------------------------------------------- segment names and their lifetime
class ShmProbe:
    """A random policy that notes, at each call, the segment files of this process."""

    seen: list[list[str]] = []

    def __init__(self, env: gym.vector.VectorEnv, ctx: RunnerContext):
        self.inner = random_policy(env, ctx)

    def __call__(self, obs: np.ndarray):
        ShmProbe.seen.append(shm_files())
        return self.inner(obs)


@pytest.mark.parametrize("call", ["sample", "apply"])
def test_the_actor_removes_an_offered_segments_name_before_its_first_step(call):
    """A name left until the reply stays in /dev/shm for good when the driver dies meanwhile."""
    actor = RunnerActor(
        lambda ctx: cartpole(ctx), ShmProbe, RunnerContext.create(seed=0, index=0, config={})
    )
    slot = SlotSegments(hints={"sample": 1 << 16, "apply": 1 << 16})
    try:
        request, lease = slot.request(call)
        assert request is not None and lease is not None and shm_files()
        ShmProbe.seen = []
        if call == "sample":
            reply = actor.sample(3, request=0, shared=request)
        else:
            reply = actor.apply(lambda runner, ctx: runner.sample(3), request)
        assert ShmProbe.seen and all(seen == [] for seen in ShmProbe.seen)
        value = slot.receive(reply, lease, call)  # the caller's unlink finds nothing: harmless
        steps = value.env_steps if call == "sample" else sum(len(chunk) for chunk in value)
        assert steps == 12 and shm_files() == []
        del value
    finally:
        slot.close()
        actor.close()


def test_no_segment_file_while_a_runner_samples(ray_local):
    with RunnerGroup(
        slow_env,
        random_policy,
        num_runners=1,
        seed=0,
        config={"sleep": 0.004, "slow": (0,)},
        num_cpus_per_runner=0.5,
    ) as group:
        group.sample(5)  # sizes the segment of the next request
        group.sample_async(200, timeout_s=0)  # offered a fresh one; about 1.6 s of sampling
        time.sleep(0.5)
        assert group.num_in_flight == 1 and shm_files() == []
        out = group.sample_async(1, launch=False)
        assert out.samples and out.samples[0].env_steps == 400
        assert group.get_metrics()["num_shared_memory_samples"] == 1


DRIVER = """
import os, signal, sys, time
import ray
from episodes.distributed import RunnerGroup
from tests.distributed._envs import cartpole, random_policy
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
group = RunnerGroup(cartpole, random_policy, num_runners=1, seed=0, num_cpus_per_runner=0.5,
                    config={"num_envs": 2, "sleep": 0.01})
group.sample(5)  # sizes the segment of the next request
group.sample_async(300, timeout_s=0)  # offered a fresh segment; about 3 s of sampling
time.sleep(1.0)
print("KILLING", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_driver_killed_mid_sample_leaves_no_segment_file(ray_local):
    address = ray.get_runtime_context().gcs_address
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(DRIVER), address],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = child.communicate(timeout=60)
        assert "KILLING" in out, err[-2000:]
        assert child.returncode == -signal.SIGKILL
        assert shm_files(child.pid) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for name in shm_files(child.pid):  # what a failing run left behind
            os.unlink(os.path.join(SHM_DIR, name))


def test_a_dropped_slot_removes_its_segment_names():
    slot = SlotSegments(hints={"sample": 1 << 16})
    request, lease = slot.request()  # in flight: never received, never closed
    assert request is not None and lease is not None and os.path.exists(lease.path)
    path = lease.path
    del slot, lease
    gc.collect()
    assert not os.path.exists(path)


def test_a_failed_requests_segment_is_dropped_not_kept_under_its_name(ray_local):
    """The actor was dead before the request started: it never mapped the segment."""
    group = RunnerGroup(
        cartpole,
        random_policy,
        num_runners=1,
        seed=0,
        config={"num_envs": 2},
        num_cpus_per_runner=0.5,
        max_consecutive_failures=1,
    )
    try:
        group.sample(4)  # sizes the segment of the next request
        ray.kill(group.actors[0])
        time.sleep(0.5)
        with pytest.raises(RuntimeError, match="failed 1 times in a row"):
            group.sample(4)
        assert shm_files() == []
    finally:
        group.stop()


def fails_on_runner_1(runner, ctx):
    if ctx.index == 1:
        raise ValueError("inspection failed")
    return np.full(1000, ctx.index, np.float64)


def test_a_failed_foreach_runner_still_receives_the_replies_that_arrived(ray_local):
    with RunnerGroup(
        cartpole,
        random_policy,
        num_runners=2,
        seed=0,
        config={"num_envs": 2},
        num_cpus_per_runner=0.5,
    ) as group:
        group.foreach_runner(lambda runner, ctx: np.zeros(1000))  # sizes the apply segments
        with pytest.raises(ray.exceptions.RayTaskError, match="inspection failed"):
            group.foreach_runner(fails_on_runner_1)
        assert shm_files() == []
        # Runner 0's reply was received: its segment is free, not leased to a lost reply.
        assert not any(s.leased for slot in group._slots for s in slot.segments._segments)
        out = group.foreach_runner(lambda runner, ctx: np.full(1000, ctx.index, np.float64))
        assert [a[0] for a in out] == [0.0, 1.0] and shm_files() == []


# --------------------------------------------------------------- error text and flag checks
def test_lost_samples_and_metrics_hold_readable_error_text(ray_local):
    with RunnerGroup(
        cartpole,
        random_policy,
        num_runners=1,
        seed=0,
        config={"num_envs": 2, "crash_at": 2, "crash_runner": 0},
        num_cpus_per_runner=0.5,
    ) as group:
        out = group.sample(4)
        (lost,) = out.lost
        errors = group.get_metrics()["errors"]
    assert "the env crashed" in lost.error and "\x1b" not in lost.error
    assert errors == [lost.error]


@pytest.mark.parametrize("value", ["no", 1, None, np.array([True])], ids=repr)
def test_group_refuses_a_shared_memory_flag_that_is_not_a_bool(ray_local, value):
    with pytest.raises(TypeError, match="shared_memory must be a bool"):
        RunnerGroup(cartpole, random_policy, num_runners=1, shared_memory=value)


def test_sample_async_refuses_a_launch_flag_that_is_not_a_bool_before_anything(ray_local):
    with RunnerGroup(
        cartpole,
        weighted_policy,
        num_runners=1,
        seed=0,
        config={"num_envs": 2},
        num_cpus_per_runner=0.5,
        shared_memory=np.True_,  # numpy's bools are bools
    ) as group:
        for value in ("no", 0, None):
            with pytest.raises(TypeError, match="launch must be a bool"):
                group.sample_async(4, weights={"p_right": 0.5}, launch=value)
            assert group.num_in_flight == 0 and group.weights_version == -1
        assert group.sample_async(4, launch=False).samples == []
