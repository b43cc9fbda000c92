"""RunnerGroup on a local Ray instance: parallel = local, weights, async, failures, writing."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.converter import ColumnKeys, episodes_to_rollout  # noqa: E402
from episodes.distributed import GroupSample, RunnerContext, RunnerGroup, build_runner  # noqa: E402
from tests.distributed._envs import cartpole, random_policy, value_fn, weighted_policy  # noqa: E402

KEYS = ColumnKeys(values="vf_preds", log_probs="action_logp")


def same_content(a: SingleAgentEpisode, b: SingleAgentEpisode) -> bool:
    a2 = SingleAgentEpisode.from_state({**a.get_state(), "id_": "x", "custom_data": {}})
    b2 = SingleAgentEpisode.from_state({**b.get_state(), "id_": "x", "custom_data": {}})
    return a2 == b2


def snapshot(chunks) -> list[SingleAgentEpisode]:
    return [SingleAgentEpisode.from_state(c.get_state()) for c in chunks]


def keys_of(chunks) -> list[tuple[str, int]]:
    """(episode id, time index) of every recorded step."""
    return [(c.id_, t) for c in chunks for t in range(c.t_started, c.t_started + len(c))]


@pytest.fixture(scope="module")
def group(ray_local):
    # Half a CPU each: the other tests' groups fit beside this one on ray.init(num_cpus=2).
    g = RunnerGroup(
        cartpole,
        weighted_policy,
        num_runners=2,
        seed=3,
        config={"num_envs": 3},
        num_cpus_per_runner=0.5,
    )
    yield g
    g.stop()


def test_parallel_sampling_equals_the_same_runners_run_locally(group):
    group.set_weights({"p_right": 0.7})
    rounds = [group.sample(15), group.sample(15)]
    for r in range(2):
        ctx = RunnerContext.create(seed=3, index=r, num_runners=2, config={"num_envs": 3})
        local = build_runner(cartpole, weighted_policy, ctx)
        local.policy.set_weights({"p_right": 0.7})
        for round_ in rounds:
            remote = round_.samples[r].episodes
            mine = local.sample(15)
            assert len(remote) == len(mine)
            assert all(same_content(a, b) for a, b in zip(remote, mine))
    # An ongoing episode keeps its id across rounds, within its runner.
    first, second = rounds
    assert {c.id_ for c in first if not c.is_done} & {c.id_ for c in second}


# Gathered arrays are read-only views of shared memory: converting them must not warn.
@pytest.mark.filterwarnings("error::UserWarning")
def test_gathered_episodes_convert_like_local_ones(group):
    gathered = group.sample(8)
    assert isinstance(gathered, GroupSample) and gathered.num_envs == 6
    assert sorted({c.custom_data["env_index"] for c in gathered}) == list(range(6))
    rollout = episodes_to_rollout(gathered, gamma=0.9, value_fn=value_fn, keys=KEYS)
    assert tuple(rollout.storage.observations.shape) == (8, 6, 4)
    # Column r*3+i is runner r's env i, as each runner's own rollout lays it out.
    for r, sample in enumerate(gathered.samples):
        own = episodes_to_rollout(sample.episodes, gamma=0.9, value_fn=value_fn, keys=KEYS)
        cols = slice(3 * r, 3 * r + 3)
        for name in ("observations", "actions", "rewards", "dones", "values"):
            mine = getattr(rollout.storage, name)[:, cols]
            assert (mine == getattr(own.storage, name)).all(), name
        assert (rollout.last_values[cols] == own.last_values).all()


def test_weights_are_broadcast_and_versioned(group):
    version = group.set_weights({"p_right": 1.0})
    out = group.sample(10)
    assert [s.weights_version for s in out.samples] == [version, version]
    # Steps carried over from the previous call (next-step autoreset) keep the actions of
    # the weights that took them: the next call is all new weights.
    assert all((c.get_actions() == 1).all() for c in group.sample(10))
    group.set_weights({"p_right": 0.5})


def test_weights_are_put_once_per_update_whatever_the_number_of_runners(group, monkeypatch):
    puts = []
    real_put = ray.put

    def counting_put(value, **kwargs):
        puts.append(value)
        return real_put(value, **kwargs)

    monkeypatch.setattr(ray, "put", counting_put)
    group.sample(4, weights={"p_right": 0.5})
    assert len(puts) == 1 and len(group.actors) == 2


def test_async_sampling_collects_every_request_once(group):
    seen: list[int] = []
    for _ in range(4):
        out = group.sample_async(5, timeout_s=30)
        seen += [s.request for s in out.samples]
    while group.num_in_flight:
        seen += [s.request for s in group.sample_async(5, timeout_s=30, launch=False).samples]
    assert len(seen) == len(set(seen)) >= 4
    with pytest.raises(ValueError):
        group.sample(0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_bad_step_counts_are_refused_before_any_request(group, bad):
    restarts = group.get_metrics()["num_restarts"]
    with pytest.raises(ValueError, match="num_steps must be an int >= 1"):
        group.sample(bad)
    with pytest.raises(ValueError, match="num_steps must be an int >= 1"):
        group.sample_async(bad)
    assert group.num_in_flight == 0 and group.get_metrics()["num_restarts"] == restarts


def test_numpy_step_counts_are_whole_numbers(group):
    assert group.sample(np.int64(3)).env_steps == 3 * 6


def test_one_vector_step_of_a_next_step_env_is_refused_not_a_failure(ray_local):
    # The runners refuse it too; asked of them, each refusal would count as a failed request
    # and restart the actor, losing its episodes.
    group = RunnerGroup(
        cartpole,
        random_policy,
        num_runners=1,
        seed=0,
        runner_kwargs={"window": "vector_steps"},
        config={"num_envs": 2},
        num_cpus_per_runner=0.5,
    )
    try:
        with pytest.raises(ValueError, match="num_steps must be an int >= 2"):
            group.sample(1)
        assert group.generations == [0] and group.get_metrics()["num_restarts"] == 0
        assert group.sample(2).samples[0].generation == 0
    finally:
        group.stop()


def test_killing_an_actor_mid_sample_loses_nothing_returned_and_duplicates_nothing(ray_local):
    group = RunnerGroup(
        cartpole,
        weighted_policy,
        num_runners=2,
        seed=0,
        config={"num_envs": 2, "sleep": 0.01},
        num_cpus_per_runner=0.5,
    )
    try:
        before = group.sample(5)
        kept = snapshot(before)
        out = group.sample_async(200, timeout_s=0)  # launch only: ~4 s per runner
        assert len(out) == 0 and group.num_in_flight == 2
        time.sleep(1.0)
        ray.kill(group.actors[1])
        while group.num_in_flight:
            more = group.sample_async(200, timeout_s=60, launch=False)
            out = GroupSample(out.samples + more.samples, out.lost + more.lost)
        assert [s.runner_index for s in out.samples] == [0]
        assert [(lost.runner_index, lost.num_env_steps) for lost in out.lost] == [(1, 400)]
        assert group.generations == [0, 1]
        # What was returned before the kill is intact.
        assert all(a == b for a, b in zip(before, kept)) and len(before) == len(kept)
        # The group keeps serving with a fresh runner 1.
        after = group.sample(5)
        assert [s.runner_index for s in after.samples] == [0, 1]
        assert after.samples[1].generation == 1
        everything = keys_of(before) + keys_of(out) + keys_of(after)
        assert len(everything) == len(set(everything))
        assert sum(len(c) for c in after) == 2 * 2 * 5
        metrics = group.get_metrics()
        assert metrics["num_lost_samples"] == 1 and metrics["num_restarts"] == 1
        assert metrics["num_lost_env_steps"] == 400
        assert metrics["num_env_steps"] == 20 + 400 + 20
    finally:
        group.stop()


def test_an_env_crash_drops_that_sample_whole_and_the_runner_comes_back(ray_local, tmp_path):
    from episodes.io import read_episodes

    group = RunnerGroup(
        cartpole,
        weighted_policy,
        num_runners=2,
        seed=1,
        config={"num_envs": 2, "crash_at": 12, "crash_runner": 1},
        write_to=tmp_path / "data",
        num_cpus_per_runner=0.5,
    )
    try:
        first = group.sample(4)  # runner 1 steps each sub-env 4 times: no crash yet
        second = group.sample(4)  # 8 steps
        crash = group.sample(4)  # the 12th step raises
        assert [s.runner_index for s in crash.samples] == [0] and len(crash.lost) == 1
        assert "crashed" in crash.lost[0].error
        last = group.sample(4)
        assert [s.generation for s in last.samples] == [0, 1]
    finally:
        group.stop()
    returned = [c for part in (first, second, crash, last) for c in part]
    written = list(read_episodes(tmp_path / "data", numpy=True))
    # Every runner wrote exactly what it returned: nothing of the crashed sample.
    assert sorted(keys_of(written)) == sorted(keys_of(returned))
    by_key = {(c.id_, c.t_started): c for c in written}
    assert all(same_content(c, by_key[(c.id_, c.t_started)]) for c in returned)


def test_a_relative_write_to_is_the_drivers_directory(ray_local, tmp_path, monkeypatch):
    # The actors resolved it against their own working directory: the driver's dataset held
    # nothing and another appeared where the workers started.
    from episodes.io import dataset_info

    monkeypatch.chdir(tmp_path)
    group = RunnerGroup(
        cartpole,
        random_policy,
        num_runners=1,
        seed=0,
        config={"num_envs": 2},
        write_to="collected",
        num_cpus_per_runner=0.5,
    )
    try:
        sample = group.sample(4)
    finally:
        group.stop()
    assert dataset_info(tmp_path / "collected").num_steps == sample.env_steps == 8


def test_a_slot_that_keeps_failing_raises_with_nothing_left_in_flight(ray_local):
    group = RunnerGroup(
        cartpole,
        weighted_policy,
        num_runners=2,
        seed=1,
        config={"num_envs": 2, "crash_at": 1, "crash_runner": 0, "crash_always": True},
        max_consecutive_failures=2,
        num_cpus_per_runner=0.5,
    )
    try:
        first = group.sample(2)
        assert [s.runner_index for s in first.samples] == [1] and len(first.lost) == 1
        with pytest.raises(RuntimeError, match="failed 2 times in a row"):
            group.sample(2)
        # The healthy runner's request of that round was collected, not left in flight.
        assert group.num_in_flight == 0
        # A restart by hand starts the count over: the next failure is a lost sample again.
        group.restart_runner(0)
        again = group.sample(2)
        assert [s.runner_index for s in again.samples] == [1] and len(again.lost) == 1
    finally:
        group.stop()


def test_a_stopped_group_refuses_to_sample(ray_local):
    group = RunnerGroup(cartpole, random_policy, num_runners=1, num_cpus_per_runner=0.5)
    group.sample(2)
    group.stop()
    group.stop()  # twice is fine (a with block after an explicit stop)
    for call in (
        lambda: group.sample(2),
        lambda: group.sample_async(2),
        lambda: group.set_weights(1),
        lambda: group.restart_runner(0),
    ):
        with pytest.raises(RuntimeError, match="stopped"):
            call()
    assert group.metrics.num_restarts == 0


def test_a_request_in_flight_at_stop_is_counted_lost(ray_local):
    # It vanished from the counters: a writing group's dataset then held more than was
    # returned, with nothing saying why.
    group = RunnerGroup(
        cartpole,
        random_policy,
        num_runners=1,
        seed=0,
        config={"num_envs": 2, "sleep": 0.02},
        num_cpus_per_runner=0.5,
    )
    out = group.sample_async(20, timeout_s=0)
    assert out.samples == [] and group.num_in_flight == 1
    group.stop()
    metrics = group.metrics
    assert (metrics.num_lost_samples, metrics.num_lost_env_steps) == (1, 40)


def test_a_runner_that_always_fails_raises_instead_of_looping(ray_local):
    def broken_policy(env, ctx):
        raise ValueError("no policy")

    with pytest.raises(RuntimeError, match="failed to start"):
        RunnerGroup(cartpole, broken_policy, num_runners=1, num_cpus_per_runner=0.5)


def test_bad_arguments_raise(ray_local):
    with pytest.raises(ValueError):
        RunnerGroup(cartpole, weighted_policy, num_runners=0)
    group = RunnerGroup(cartpole, random_policy, num_runners=1, num_cpus_per_runner=0.5)
    try:
        with pytest.raises(TypeError, match="set_weights"):
            group.sample(4, weights={"p_right": 1.0})
        assert group.weights_version == -1 and group.sample(4).env_steps == 16
        for bad in (-1, 1, True):  # -1 restarted the last slot, reported as "runner -1"
            with pytest.raises(IndexError, match="runner index"):
                group.restart_runner(bad)
        assert group.generations == [0]
    finally:
        group.stop()
    with pytest.raises(RuntimeError, match="did not start"):
        RunnerGroup(
            cartpole, weighted_policy, num_runners=1, num_cpus_per_runner=3, start_timeout_s=2
        )


def test_gathered_chunks_report_per_round_metrics(group):
    out = group.sample(50)
    metrics = out.metrics
    assert out.env_steps == 2 * 3 * 50
    # The runners count what they recorded, including steps carried over to their next call.
    assert abs(metrics["num_env_steps"] - out.env_steps) <= 2 * 3
    assert metrics["num_episodes"] == len(metrics["episode_returns"])
    assert np.isfinite(metrics["env_steps_per_s"])


def test_samples_travel_through_shared_memory_and_held_ones_stay_intact(ray_local):
    # A quarter CPU each: both groups fit beside the module's group on ray.init(num_cpus=2).
    kwargs = dict(num_runners=2, seed=5, config={"num_envs": 3}, num_cpus_per_runner=0.25)
    shared = RunnerGroup(cartpole, random_policy, **kwargs)
    store = RunnerGroup(cartpole, random_policy, shared_memory=False, **kwargs)
    try:
        rounds = [(shared.sample(12), store.sample(12)) for _ in range(5)]
        for via_shm, via_store in rounds:
            assert len(via_shm) == len(via_store)
            assert all(same_content(a, b) for a, b in zip(via_shm, via_store))
        # The first round sizes the segments; the later ones use them.
        assert shared.get_metrics()["num_shared_memory_samples"] == 8
        assert store.get_metrics()["num_shared_memory_samples"] == 0
        # Arrays of a held sample view read-only shared pages, never rewritten.
        held = rounds[1][0]
        assert not held[0].get_observations(slice(0, 1)).flags.writeable
        kept = snapshot(held)
        for _ in range(3):
            shared.sample(12)
            store.sample(12)  # the two groups stay in step for the comparison below
        assert all(same_content(a, b) for a, b in zip(held, kept))
        # foreach_runner results travel the same way.
        samples = shared.foreach_runner(lambda runner, ctx: runner.sample(4))
        assert [len(s) for s in samples] == [
            len(s) for s in store.foreach_runner(lambda runner, ctx: runner.sample(4))
        ]
        # A result without arrays leaves no segment's file in /dev/shm either: a larger
        # result sizes a segment larger than any so far, offered to the next (arrayless) one.
        shared.foreach_runner(lambda runner, ctx: np.zeros(300_000))
        assert shared.foreach_runner(lambda runner, ctx: ctx.index) == [0, 1]
        segments = [s for slot in shared._slots for s in slot.segments._segments]
        assert any(s.size > 300_000 * 8 for s in segments)
        assert not [s.path for s in segments if os.path.exists(s.path)]
    finally:
        shared.stop()
        store.stop()


def test_a_runner_sample_counts_its_steps_without_building_chunks():
    from episodes.distributed import RunnerSample

    ctx = RunnerContext.create(seed=0, index=0, config={"num_envs": 3})
    chunks = build_runner(cartpole, random_policy, ctx).sample(20)
    sample = RunnerSample(0, 0, 0, 0, 3, chunks)
    assert sample.env_steps == 60 and repr(chunks).endswith(", 0 built)")
    assert GroupSample([sample]).env_steps == 60 == sum(len(c) for c in chunks)
