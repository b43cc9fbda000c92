"""Session 31: chunks a writing runner stores carry the custom_data the driver gives them.

A ``RunnerGroup(write_to=...)`` runner wrote its chunks before the driver's ``GroupSample``
numbered them: the dataset held each runner's own ``env_index`` (every runner's env 0 under
``env_index`` 0) and no ``runner_index``, so ``filter_dataset(custom_data={"env_index": 0})``
mixed the runners. The actors are driven here in-process, as the group drives them (no Ray).
"""

from __future__ import annotations

import pickle

import pytest

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerContext, RunnerGroup  # noqa: E402
from episodes.distributed.actor import RunnerActor, WriterSpec  # noqa: E402
from episodes.distributed.sample import GroupSample, env_offsets  # noqa: E402
from episodes.distributed.slots import Slot  # noqa: E402
from episodes.io import filter_dataset, read_episodes  # noqa: E402
from tests.distributed._envs import cartpole, random_policy, weighted_policy  # noqa: E402

NUM_ENVS = (2, 3)  # runners of different widths: runner 1's columns start at 2


def actor(index: int, spec: WriterSpec | None, generation: int = 0) -> RunnerActor:
    ctx = RunnerContext.create(
        seed=3,
        index=index,
        generation=generation,
        num_runners=2,
        config={"num_envs": NUM_ENVS[index]},
    )
    return RunnerActor(cartpole, weighted_policy, ctx, writer=spec)


def round_of(actors: list[RunnerActor], request: int) -> GroupSample:
    """One round as ``RunnerGroup.sample`` gathers it: offsets among all runners, pickled."""
    offsets = env_offsets([a.runner.num_envs for a in actors])
    replies = [a.sample(4, request=request, env_offset=o) for a, o in zip(actors, offsets)]
    return GroupSample([pickle.loads(pickle.dumps(r)) for r in replies])  # as through Ray


def stored(path) -> dict[tuple[str, int], dict]:
    return {(c.id_, c.t_started): dict(c.custom_data) for c in read_episodes(path)}


def test_written_chunks_carry_the_drivers_custom_data(tmp_path):
    spec = WriterSpec(str(tmp_path / "data"))
    spec.create_dataset()
    actors = [actor(0, spec), actor(1, spec)]
    try:
        rounds = [round_of(actors, 0)]
        actors[1].close()  # runner 1 replaced: a fresh actor, the next generation
        actors[1] = actor(1, spec, generation=1)
        rounds.append(round_of(actors, 1))
    finally:
        for a in actors:
            a.close()
    written = stored(spec.path)
    driver = {(c.id_, c.t_started): dict(c.custom_data) for group in rounds for c in group}
    assert written == driver
    assert {d["env_index"] for d in driver.values()} == set(range(sum(NUM_ENVS)))
    for d in driver.values():
        assert d["env_index"] == env_offsets(NUM_ENVS)[d["runner_index"]] + d["runner_env_index"]
    # Filtering by env_index keeps one column: runner 0's env 0, not every runner's.
    kept = filter_dataset(spec.path, str(tmp_path / "env0"), custom_data={"env_index": 0})
    want = [k for k, d in driver.items() if d["env_index"] == 0]
    assert kept == len(want) and sorted(stored(tmp_path / "env0")) == sorted(want)
    # The actor's numbering is no edit: the converter still reads the runners' blocks.
    assert all(s.episodes.unchanged() for group in rounds for s in group.samples)


def test_a_runner_that_does_not_write_returns_its_chunks_untouched():
    a = actor(1, None)
    try:
        out = a.sample(4, request=0, env_offset=2)
    finally:
        a.close()
    assert out.episodes.built() == []  # nothing built on the actor
    assert sorted({c.custom_data["env_index"] for c in GroupSample([out])}) == [0, 1, 2]


def test_a_bad_env_offset_is_refused_before_the_env_steps(tmp_path):
    a = actor(0, None)
    try:
        for bad in (-1, 1.5, True):
            with pytest.raises(ValueError, match="env_offset"):
                a.sample(4, request=0, env_offset=bad)
        assert a.runner.get_metrics()["total_env_steps"] == 0
    finally:
        a.close()


class _Recorder:
    """An actor handle's ``sample.remote``: records the arguments it was called with."""

    def __init__(self):
        self.calls: list[tuple] = []

    @property
    def sample(self):
        return self

    def remote(self, *args):
        self.calls.append(args)
        return object()


def test_the_group_hands_each_runner_its_offset_among_all_runners():
    group = RunnerGroup.__new__(RunnerGroup)  # its launches, without actors
    group._slots = [Slot(i, 0, _Recorder(), n) for i, n in enumerate((2, 3, 1))]
    group._next_request = 0
    for slot in group._slots:
        group._launch(slot, 4)
    assert [slot.handle.calls[-1][3] for slot in group._slots] == [0, 2, 5]
    group._slots[0].num_envs = 4  # as a replacement of another width reports it
    group._launch(group._slots[2], 4)
    assert group._slots[2].handle.calls[-1][3] == 7


def test_a_groups_written_chunks_match_its_gathered_ones(ray_local, tmp_path):
    path = tmp_path / "data"
    with RunnerGroup(
        cartpole,
        random_policy,
        num_runners=2,
        seed=0,
        config={"num_envs": 2},
        write_to=path,
        num_cpus_per_runner=0.5,
    ) as group:
        gathered = group.sample(4)
        driver = {(c.id_, c.t_started): dict(c.custom_data) for c in gathered}
    assert stored(path) == driver
    assert sorted(d["env_index"] for d in driver.values()) == [0, 1, 2, 3]
