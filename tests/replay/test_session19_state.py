"""Session 19: what a buffer's state and saves restore is checked as the buffer would hold it.

- Generator states: numpy's setters take an MT19937 ``pos`` of ``10**6`` or a Philox
  ``buffer_pos`` below 0, and the next draw reads out of bounds (a segmentation fault, or
  garbage for ``pos=625``). Every field of each bit generator's state is checked first.
- A save's ``episodes/`` is bound to its ``replay.json``: episodes appended to the dataset, or
  another save's dataset put in its place, loaded silently as this save.
- ``set_state`` took object, string, datetime and void columns (``add`` refuses them) and
  rewards it converted silently (a complex one's real part, strings parsed, ``1e300`` as inf).
- ``priorities.npy`` holding 0 loaded as ``1e-12`` (``update_priorities``' floor) instead of
  being refused, and a priority below the floor that ``max_priority`` gave came back as
  ``1e-12``, not as saved.
- ``update_priorities()`` right after ``set_state`` named the wrong reason.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.saved_files import priorities_file, seal
from episodes.replay.state import generator_from_state


def _episode(id_: Any, n: int = 5, v: float = 0.0) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, v + t, np.float32) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        extra_model_outputs={"logp": [np.float32(-t) for t in range(n)]},
        terminated=True,
        len_lookback_buffer=0,
    )


def _rewrite(path: Path, change: Any, *, legacy: bool = False) -> None:
    """Edits replay.json and reseals it (a version 1 save: no checksums at all)."""
    meta = json.loads((path / "replay.json").read_text())
    meta.pop("crc32")
    change(meta)
    if legacy:
        meta.pop("priorities_crc32", None)
        meta["version"] = 1
    else:
        meta = seal(meta)
    (path / "replay.json").write_text(json.dumps(meta))


def _summary(buf: EpisodeReplayBuffer) -> tuple[Any, ...]:
    return (
        buf.capacity,
        buf.batch_size_B,
        buf.get_episode_ids(),
        buf.get_num_timesteps(),
        buf.get_counters(),
        json.dumps(buf.rng.bit_generator.state, default=lambda a: a.tolist()),
    )


# ------------------------------------------------------------------------ generator states
def _set(path: tuple[str, ...], value: Any) -> Any:
    def change(state: dict[str, Any]) -> None:
        for key in path[:-1]:
            state = state[key]
        state[path[-1]] = value

    return change


BAD_GENERATOR_STATES = {
    "MT19937 pos 10**6 (segfault)": ("MT19937", _set(("state", "pos"), 10**6), "pos"),
    "MT19937 pos 625 (garbage)": ("MT19937", _set(("state", "pos"), 625), "pos"),
    "MT19937 pos -5": ("MT19937", _set(("state", "pos"), -5), "pos"),
    "MT19937 pos True": ("MT19937", _set(("state", "pos"), True), "pos"),
    "MT19937 key of 623": ("MT19937", _set(("state", "key"), [1] * 623), "key"),
    "MT19937 key of 625": ("MT19937", _set(("state", "key"), [1] * 625), "key"),
    "MT19937 key floats": ("MT19937", _set(("state", "key"), np.ones(624)), "key"),
    "MT19937 key 2**32": ("MT19937", _set(("state", "key"), [2**32] * 624), "key"),
    "MT19937 key -1": ("MT19937", _set(("state", "key"), np.full(624, -1)), "key"),
    "PCG64 has_uint32 7": ("PCG64", _set(("has_uint32",), 7), "has_uint32"),
    "PCG64 even inc": ("PCG64", _set(("state", "inc"), 2), "inc"),
    "PCG64 inc 1.0": ("PCG64", _set(("state", "inc"), 1.0), "inc"),
    "PCG64 state missing": ("PCG64", _set(("state",), {"inc": 1}), "state"),
    "PCG64DXSM has_uint32 -1": ("PCG64DXSM", _set(("has_uint32",), -1), "has_uint32"),
    "Philox buffer_pos -10**7 (segfault)": (
        "Philox",
        _set(("buffer_pos",), -(10**7)),
        "buffer_pos",
    ),
    "Philox buffer_pos 5": ("Philox", _set(("buffer_pos",), 5), "buffer_pos"),
    "Philox buffer_pos 10**7": ("Philox", _set(("buffer_pos",), 10**7), "buffer_pos"),
    "Philox buffer of 8": ("Philox", _set(("buffer",), np.zeros(8, np.uint64)), "buffer"),
    "Philox key of 3": ("Philox", _set(("state", "key"), [1, 2, 3]), "key"),
    "Philox counter 2**64": ("Philox", _set(("state", "counter"), [2**64, 0, 0, 0]), "counter"),
    "SFC64 state one int (numpy broadcasts it)": ("SFC64", _set(("state", "state"), 5), "state"),
    "SFC64 has_uint32 2": ("SFC64", _set(("has_uint32",), 2), "has_uint32"),
}


def _bad_state(kind: str, change: Any) -> dict[str, Any]:
    rng = np.random.Generator(getattr(np.random, kind)(3))
    rng.random(7)
    state = rng.bit_generator.state
    change(state)
    return state


@pytest.mark.parametrize("case", list(BAD_GENERATOR_STATES))
def test_a_generator_state_no_bit_generator_holds_is_refused(case):
    kind, change, field = BAD_GENERATOR_STATES[case]
    with pytest.raises(ValueError, match=f"{kind} state.*{field}"):
        generator_from_state(_bad_state(kind, change))


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("case", list(BAD_GENERATOR_STATES))
def test_set_state_refuses_it_and_changes_nothing(cls, case):
    kind, change, field = BAD_GENERATOR_STATES[case]
    source = cls(100, seed=np.random.Generator(getattr(np.random, kind)(0)))
    source.add(_episode("a"))
    state = source.get_state()
    change(state["rng"])
    target = cls(10, seed=1)
    target.add(_episode("z", 3))
    before = _summary(target)
    with pytest.raises(ValueError, match=f"{kind} state.*{field}"):
        target.set_state(state)
    assert _summary(target) == before


@pytest.mark.parametrize("legacy", [False, True], ids=["v2 resealed", "v1"])
@pytest.mark.parametrize(
    "case", ["MT19937 pos 10**6 (segfault)", "Philox buffer_pos -10**7 (segfault)"]
)
def test_load_refuses_it(tmp_path, case, legacy):
    kind, change, field = BAD_GENERATOR_STATES[case]
    buf = EpisodeReplayBuffer(100, seed=np.random.Generator(getattr(np.random, kind)(0)))
    buf.add(_episode("a"))
    buf.save(tmp_path / "s")
    _rewrite(tmp_path / "s", lambda meta: change(meta["rng"]), legacy=legacy)
    with pytest.raises(ValueError, match=f"damaged replay buffer \\(generator: .*{field}"):
        EpisodeReplayBuffer.load(tmp_path / "s")


@pytest.mark.parametrize("kind", ["MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64"])
@pytest.mark.parametrize("draws", [0, 1, 2, 623, 624, 625, 1000])
def test_every_state_a_generator_reaches_restores_from_arrays_and_json_lists(kind, draws):
    # pos 624 and 0, buffer_pos 4 and 0, has_uint32 1 (an odd count of 32-bit draws), and
    # uint64 values above 2**63 as JSON's Python ints.
    rng = np.random.Generator(getattr(np.random, kind)(11))
    rng.integers(0, 2**32, draws, dtype=np.uint32)
    for state in (rng.bit_generator.state, json.loads(json.dumps(_plain(rng.bit_generator.state)))):
        again = generator_from_state(state)
        probe = np.random.Generator(getattr(np.random, kind)())
        probe.bit_generator.state = rng.bit_generator.state
        assert np.array_equal(again.integers(0, 2**62, 9), probe.integers(0, 2**62, 9))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.tolist() if isinstance(value, np.ndarray) else value


# ------------------------------------------------------------- episodes/ bound to replay.json
def _saved(tmp_path: Path, cls: type = EpisodeReplayBuffer, name: str = "s") -> Path:
    buf = cls(30, seed=0)
    buf.add(_episode("long", 25))
    buf.add([_episode("a"), _episode("b")])  # "long" evicted: 10 steps stored
    buf.save(tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_episodes_appended_to_a_saves_dataset_are_refused(tmp_path, cls):
    path = _saved(tmp_path, cls)
    with DatasetWriter(path / "episodes") as writer:
        writer.write(_episode("intruder", 7, v=100.0))
    with pytest.raises(ValueError, match=r"s: damaged .*holds 3 episodes of 17 steps.*2 of 10"):
        cls.load(path)


@pytest.mark.parametrize("same_ids", [False, True], ids=["other ids", "same ids, other data"])
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_another_saves_dataset_of_as_many_steps_is_refused(tmp_path, cls, same_ids):
    early = cls(10, seed=0)
    early.add([_episode("e0"), _episode("e1")])
    early.save(tmp_path / "early")
    late = cls(10, seed=0)
    late.add([_episode("e0" if same_ids else "e2", v=50.0), _episode("e1" if same_ids else "e3")])
    late.save(tmp_path / "late")
    shutil.rmtree(tmp_path / "early" / "episodes")
    shutil.copytree(tmp_path / "late" / "episodes", tmp_path / "early" / "episodes")
    what = "manifest.jsonl" if same_ids else "episode ids"
    with pytest.raises(ValueError, match=f"early: damaged .*the {what} of episodes/ do not match"):
        cls.load(tmp_path / "early")


@pytest.mark.parametrize("legacy", [False, True], ids=["v2 resealed", "v1"])
def test_a_save_written_before_the_record_loads_without_the_check(tmp_path, legacy):
    path = _saved(tmp_path, PrioritizedEpisodeReplayBuffer)
    _rewrite(path, lambda meta: meta.pop("episodes", None), legacy=legacy)
    back = PrioritizedEpisodeReplayBuffer.load(path)
    assert back.get_episode_ids() == ["a", "b"] and back.get_added_timesteps() == 35


@pytest.mark.parametrize(
    "record",
    [
        None,
        [],
        {"count": 2, "steps": 10, "ids_crc32": 0},
        {"count": 2, "steps": 10, "ids_crc32": 0, "manifest_crc32": True},
        {"count": -2, "steps": 10, "ids_crc32": 0, "manifest_crc32": 0},
        {"count": 2, "steps": 10, "ids_crc32": 2**32, "manifest_crc32": 0},
        {"count": 2, "steps": 10.0, "ids_crc32": 0, "manifest_crc32": 0},
    ],
)
def test_a_malformed_record_is_refused(tmp_path, record):
    path = _saved(tmp_path)
    _rewrite(path, lambda meta: meta.update(episodes=record))
    with pytest.raises(ValueError, match="damaged replay buffer"):
        EpisodeReplayBuffer.load(path)


def test_an_untouched_save_still_loads(tmp_path):
    path = _saved(tmp_path, PrioritizedEpisodeReplayBuffer)
    back = PrioritizedEpisodeReplayBuffer.load(path)
    assert back.get_episode_ids() == ["a", "b"] and back.get_evicted_ids() == ["long"]


# ------------------------------------------------------------------ step columns of a state
def _as(name: str, dtype: Any) -> Any:
    def change(state: dict[str, Any]) -> None:
        steps = state["steps"]
        if name == "obs":  # the final observations keep the observations' dtype
            steps["obs"] = steps["obs"].astype(dtype)
            state["episodes"]["final_obs"] = state["episodes"]["final_obs"].astype(dtype)
        elif name == "extras":
            steps["extras"]["logp"] = steps["extras"]["logp"].astype(dtype)
        else:
            steps[name] = np.asarray(steps[name]).astype(dtype)

    return change


def _rewards(values: Any) -> Any:
    return lambda state: state["steps"].update(rewards=values)


BAD_COLUMNS = {
    "object observations": (_as("obs", object), "obs.*numeric"),
    "str observations": (_as("obs", "<U4"), "obs.*numeric"),
    "datetime observations": (_as("obs", "datetime64[s]"), "obs.*numeric"),
    "void observations": (_as("obs", "V4"), "obs.*numeric"),
    "object actions": (_as("actions", object), "actions.*numeric"),
    "str actions": (_as("actions", "<U3"), "actions.*numeric"),
    "object extras": (_as("extras", object), "logp.*numeric"),
    "an extras key that is no str": (
        lambda s: s["steps"]["extras"].update({0: s["steps"]["extras"].pop("logp")}),
        "key 0 must be a str",
    ),
    "complex rewards": (_rewards(np.array([1 + 5j] * 5)), "real numbers"),
    "str rewards": (_rewards(np.array(["7.5", "1e3", "nan", "1", "2"])), "real numbers"),
    "object rewards": (_rewards(np.array([1.0] * 5, object)), "real numbers"),
    "float64 rewards beyond float32": (_rewards(np.array([1e300, 1, 1, 1, 1.0])), "overflow"),
    "2-d rewards": (_rewards(np.ones((5, 1))), "scalars"),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("case", list(BAD_COLUMNS))
def test_set_state_refuses_columns_add_refuses(cls, case):
    change, match = BAD_COLUMNS[case]
    source = cls(100, seed=0)
    source.add(_episode("a"))
    state = source.get_state()
    change(state)
    target = cls(10, seed=1)
    target.add(_episode("z", 3))
    before = _summary(target)
    with pytest.raises(ValueError, match=f"broken replay buffer state.*{match}"):
        target.set_state(state)
    assert _summary(target) == before


@pytest.mark.parametrize(
    "rewards, stored",
    [
        (np.array([1, 2, 3, 4, 5]), [1.0, 2.0, 3.0, 4.0, 5.0]),
        (np.array([True, False, True, True, False]), [1.0, 0.0, 1.0, 1.0, 0.0]),
        ([0.5, 1.5, np.nan, -np.inf, 2.0], [0.5, 1.5, np.nan, -np.inf, 2.0]),
    ],
    ids=["ints", "bools", "a list of floats with nan and inf"],
)
def test_rewards_add_takes_still_restore(rewards, stored):
    source = EpisodeReplayBuffer(100, seed=0)
    source.add(_episode("a"))
    state = source.get_state()
    state["steps"]["rewards"] = rewards
    target = EpisodeReplayBuffer(10)
    target.set_state(state)
    got = target.get_episodes()[0].rewards.data
    assert got.dtype == np.float32
    assert np.array_equal(got, np.array(stored, np.float32), equal_nan=True)


# ------------------------------------------------------------------------- saved priorities
def _prioritized_save(tmp_path: Path, priorities: list[float], alpha: float = 1.0) -> Path:
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(_episode("a", 3))
    buf.save(tmp_path / "p")
    data = priorities_file(np.array(priorities))
    (tmp_path / "p" / "priorities.npy").write_bytes(data)
    _rewrite(tmp_path / "p", lambda meta: meta.update(priorities_crc32=zlib.crc32(data)))
    return tmp_path / "p"


@pytest.mark.parametrize(
    "priorities, alpha, match",
    [
        ([0.0, 1.0, 1.0], 1.0, r"above 0, got \[0.0\]"),
        ([1.0, -0.0, 1.0], 1.0, "above 0"),
        ([1.0, 1.0, -1.0], 1.0, "above 0"),
        ([1e-200, 1.0, 1.0], 2.0, "alpha=2.0"),  # its power is 0: never drawn
    ],
    ids=["zero", "negative zero", "negative", "power alpha 0"],
)
def test_load_refuses_priorities_no_buffer_holds(tmp_path, priorities, alpha, match):
    path = _prioritized_save(tmp_path, priorities, alpha)
    with pytest.raises(ValueError, match=f"p: damaged replay buffer \\(priorities: .*{match}"):
        PrioritizedEpisodeReplayBuffer.load(path)


def test_a_priority_below_the_floor_comes_back_as_saved(tmp_path):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.max_priority = 1e-300  # the new steps get it, below update_priorities' 1e-12 floor
    buf.add(_episode("a", 3))
    buf.update_priorities([2.0], [1])
    buf.max_priority = 1e-300
    buf.save(tmp_path / "p")
    back = PrioritizedEpisodeReplayBuffer.load(tmp_path / "p")
    assert back.get_priorities([0, 1, 2]).tolist() == [1e-300, 2.0, 1e-300]
    twin = PrioritizedEpisodeReplayBuffer(10)
    twin.set_state(buf.get_state())  # set_state keeps them the same
    assert twin.get_priorities([0, 1, 2]).tolist() == [1e-300, 2.0, 1e-300]
    assert back.max_priority == 1e-300


def test_set_state_refuses_a_zero_priority_as_load_does():
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 3))
    state = buf.get_state()
    state["prioritized"]["priorities"] = np.array([0.0, 1.0, 1.0])
    state["prioritized"]["leaves"] = np.array([0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="> 0"):
        PrioritizedEpisodeReplayBuffer(10).set_state(state)


# ------------------------------------------------------- update_priorities after set_state
def test_update_priorities_right_after_set_state_names_the_reason():
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a"))
    buf.sample(3)
    twin = PrioritizedEpisodeReplayBuffer(100)
    twin.set_state(buf.get_state())
    with pytest.raises(ValueError, match="none since set_state: a state holds no last sample"):
        twin.update_priorities(np.array([5.0, 5.0, 5.0]))
    batch = twin.sample(2)  # a sample since: its items, as always
    twin.update_priorities([4.0, 4.0])
    assert twin.get_priorities(batch["indices"]).tolist() == [4.0, 4.0]
