"""Scale-out refusals: a Ray Data write into its own source or an existing dataset, a runner
group writing into another env's dataset, and a dead runner named by ``foreach_runner``."""

from __future__ import annotations

import os
import signal
import time
import types
from typing import Any

import gymnasium as gym
import pytest

ray = pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import (  # noqa: E402
    RunnerGroup,
    read_episodes,
    write_episodes,
)
from episodes.distributed.targets import write_target_problem  # noqa: E402
from episodes.io import (  # noqa: E402
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    dataset_info,
    validate_dataset,
)
from episodes.runner import RandomPolicy  # noqa: E402

CARTPOLE = DatasetMetadata(env_id="CartPole-v1")


def _episode(name: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        name, observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 2.0], terminated=True,
        len_lookback_buffer=0,
    )  # fmt: skip


def _v1_dataset_at_d(parent):
    return _v1_dataset(parent / "d")


def _v1_dataset(path):
    with EpisodeWriter(path, sync=False) as w:
        w.write(_episode("a"))
    return path


def _dataset(path, names="a", metadata=CARTPOLE):
    with DatasetWriter(path, metadata=metadata) as w:
        for name in names:
            w.write(_episode(name))
    return path


def cartpole(ctx):
    return gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")


def pendulum(ctx):
    return gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync")


def policy(env, ctx):
    return RandomPolicy(env.action_space, seed=ctx.seed)


def _pid(runner, ctx):
    return os.getpid()


# ---------------------------------------------------------------- which targets (no Ray)
TARGETS = {
    # name: (make the target, metadata, append, is the source, refused with)
    "new directory": (lambda p: p / "new", CARTPOLE, False, False, None),
    "empty dataset, same metadata": (
        lambda p: _dataset(p / "d", names=""), CARTPOLE, False, False, None),
    "empty dataset, no metadata given": (
        lambda p: _dataset(p / "d", names=""), None, False, False, None),
    "dataset of episodes": (lambda p: _dataset(p / "d"), None, False, False, "append=True"),
    "dataset of episodes, append": (lambda p: _dataset(p / "d"), None, True, False, None),
    "dataset of episodes, append, same metadata": (
        lambda p: _dataset(p / "d"), CARTPOLE, True, False, None),
    "append, other metadata": (
        lambda p: _dataset(p / "d"), DatasetMetadata(env_id="Pendulum-v1"), True, False,
        "other metadata"),
    "empty dataset, other metadata": (
        lambda p: _dataset(p / "d", names=""), DatasetMetadata(user={"run": 2}), False, False,
        "other metadata"),
    "its own source": (lambda p: _dataset(p / "d"), None, True, True, "stored twice"),
    # append=True is no remedy there: a v1 dataset takes no appended shards.
    "format v1 dataset of episodes": (_v1_dataset_at_d, None, False, False, "migrate it first"),
    "its own empty source, append": (
        lambda p: _dataset(p / "d", names=""), None, True, True, "stored twice"),
}  # fmt: skip


@pytest.mark.parametrize("case", TARGETS)
def test_write_target_problem_table(tmp_path, case):
    make, metadata, append, is_source, refused = TARGETS[case]
    target = make(tmp_path)
    sources = [str(target)] if is_source else [str(tmp_path / "elsewhere")]
    problem = write_target_problem(target, metadata, append=append, sources=sources)
    if refused is None:
        assert problem == ""
    else:
        assert refused in problem and str(target.name) in problem
        assert "new directory" in problem and "episodes merge" in problem


# ------------------------------------------------------------ Ray Data writes (one Ray)
def test_write_episodes_refuses_its_source_and_a_dataset_of_episodes(ray_local, tmp_path):
    source = _dataset(tmp_path / "src", names="ab")
    before = dataset_info(source)
    # Into the dataset it reads: refused, also when asked to append, also through a filter.
    for dataset in (read_episodes(source), read_episodes(source).filter(lambda row: True)):
        for append in ({}, {"append": True}):  # the default first
            with pytest.raises(DatasetError, match="stored twice"):
                write_episodes(dataset, source, **append)
    after = dataset_info(source)
    assert after.num_chunks == before.num_chunks == 2 and validate_dataset(source).ok

    # Another dataset of episodes: refused unless append=True; then a metadata= that is not
    # the stored one is refused, the stored one taken.
    other = _dataset(tmp_path / "other", names="x")
    with pytest.raises(DatasetError, match=r"holds a dataset of 1 chunks.*append=True"):
        write_episodes(read_episodes(source), other)
    pendulum_meta = DatasetMetadata(env_id="Pendulum-v1")
    with pytest.raises(DatasetError, match="other metadata"):
        write_episodes(read_episodes(source), other, append=True, metadata=pendulum_meta)
    assert dataset_info(other).num_chunks == 1
    assert write_episodes(read_episodes(source), other, append=True, metadata=CARTPOLE) == 2
    assert sorted(e.id_ for e in dataset_info(other).episodes) == ["a", "b", "x"]
    assert validate_dataset(other).ok

    # A new directory, and an empty dataset, take the copy without append.
    assert write_episodes(read_episodes(source), tmp_path / "copy") == 2
    empty = _dataset(tmp_path / "empty", names="")
    assert write_episodes(read_episodes(source), empty, metadata=CARTPOLE) == 2
    with pytest.raises(TypeError, match="append must be a bool"):
        write_episodes(read_episodes(source), tmp_path / "new", append="yes")


# ------------------------------------------------------------------ runner groups (Ray)
def test_a_group_refuses_another_envs_dataset_and_names_a_dead_runner(ray_local, tmp_path):
    path = tmp_path / "cartpole"
    kwargs = dict(num_runners=2, seed=0, num_cpus_per_runner=0.5)
    with RunnerGroup(cartpole, policy, write_to=path, write_metadata=CARTPOLE, **kwargs) as g:
        g.sample(5)
    chunks = dataset_info(path).num_chunks
    assert chunks > 0
    # Another env id in write_metadata: refused before any actor starts.
    with pytest.raises(ValueError, match=r"dataset of 'CartPole-v1'.*'Pendulum-v1'.*new dir"):
        RunnerGroup(
            pendulum, policy, write_to=path,
            write_metadata=DatasetMetadata(env_id="Pendulum-v1"), **kwargs,
        )  # fmt: skip
    # No env id to compare: the runners' spaces are, before any sample.
    with pytest.raises(ValueError, match=r"holds episodes of spaces .*new directory"):
        RunnerGroup(pendulum, policy, write_to=path, **kwargs)
    info = dataset_info(path)
    assert info.num_chunks == chunks and info.metadata["env_id"] == "CartPole-v1"
    assert validate_dataset(path).ok

    # The same env appends, as before (also without write_metadata).
    with RunnerGroup(cartpole, policy, write_to=path, write_metadata=CARTPOLE, **kwargs) as g:
        g.sample(5)
        pids = g.foreach_runner(_pid)
        os.kill(pids[1], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                g.foreach_runner(_pid)
            except ray.exceptions.RayActorError as err:
                error = err
                break
            time.sleep(0.2)
        else:
            pytest.fail("the killed runner still answered")
        # Ray's error type, with the runner named and what the group does about it.
        assert isinstance(error, ray.exceptions.ActorDiedError)
        assert "runner 1 (generation 0) died" in str(error)
        assert "next sample()" in str(error) and "restart_runner(1)" in str(error)
        sample = g.sample(5)  # the group replaces it, as the message says
        assert [lost.runner_index for lost in sample.lost] == [1] and g.generations == [0, 1]
        assert len(g.foreach_runner(_pid)) == 2
    assert dataset_info(path).num_chunks > chunks


def _fake_ray(answer: Exception) -> Any:
    """A stand-in for ray whose every ``get`` raises ``answer`` (no Ray started)."""
    import ray.exceptions

    def get(ref: Any) -> Any:
        raise answer

    return types.SimpleNamespace(
        exceptions=ray.exceptions, wait=lambda refs, num_returns, timeout: (refs, []), get=get
    )


def test_only_a_runner_that_died_is_named_dead() -> None:
    import ray.exceptions

    from episodes.distributed.checks import raise_dead_runners

    handle = types.SimpleNamespace(info=types.SimpleNamespace(remote=object))
    slot = types.SimpleNamespace(handle=handle, index=1, generation=0)
    err = ray.exceptions.ActorUnavailableError("connection reset", None)
    # Unreachable for a moment (restarting, a lost connection): Ray's own error, as it was.
    unavailable = _fake_ray(ray.exceptions.ActorUnavailableError("restarting", None))
    with pytest.raises(ray.exceptions.ActorUnavailableError) as info:
        raise_dead_runners(unavailable, [slot], err)
    assert info.value is err
    died = _fake_ray(ray.exceptions.ActorDiedError())
    with pytest.raises(ray.exceptions.ActorUnavailableError, match="runner 1 .generation 0. died"):
        raise_dead_runners(died, [slot], err)
