"""Hunt 22: NaN in an episode's clocks and ids.

- a clock that is NaN or infinite is refused: by ``from_state``/``from_fields`` as a
  ``ValueError`` naming the field, and by both writers at ``write`` as an
  ``UnstorableValueError`` naming the field and the episode, nothing written and the writer
  still usable (the shard's other episodes are no longer lost at commit);
- an id that is or holds a NaN equals its copies (contract §7.4: a copy or a state round trip
  equals its source), so ``check_does_not_mutate`` no longer reports it as changed and a
  ``cut()`` successor concatenates back.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer as Buf
from episodes import SingleAgentEpisode as Episode
from episodes.io import DatasetWriter, EpisodeWriter, UnstorableValueError, read_episodes
from episodes.testing import check_does_not_mutate

NAN, INF = float("nan"), float("inf")


def _episode(id_: Any = "a") -> Episode:
    return Episode(
        id_,
        observations=[np.float32([0]), np.float32([1])],
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    )


# ------------------------------------------------------ 1. clocks: from_state / from_fields
BAD_CLOCKS = {
    "nan": NAN,
    "inf": INF,
    "minus inf": -INF,
    "numpy float32 nan": np.float32("nan"),
    "numpy float64 inf": np.float64("inf"),
    "int beyond float": 10**400,
}


@pytest.mark.parametrize("field", ["start_time", "last_step_time"])
@pytest.mark.parametrize("name", BAD_CLOCKS)
def test_from_state_refuses_a_clock_that_is_not_finite(name: str, field: str) -> None:
    state = _episode().get_state()
    state[field] = BAD_CLOCKS[name]
    before = dict(state)
    with pytest.raises(ValueError, match=f"episode state's {field} must be a finite number"):
        Episode.from_state(state)
    assert state.keys() == before.keys()
    assert all(state[k] is before[k] for k in state)  # the state is left as it was


@pytest.mark.parametrize("field", ["start_time", "last_step_time"])
@pytest.mark.parametrize("name", BAD_CLOCKS)
def test_from_fields_refuses_a_clock_that_is_not_finite(name: str, field: str) -> None:
    values = {"id_": "a", "observations": Buf([0, 1]), "actions": Buf([1]), "rewards": Buf([0.5])}
    with pytest.raises(ValueError, match=f"^{field} must be a finite number or None, got "):
        Episode.from_fields({**values, field: BAD_CLOCKS[name]})


def test_finite_and_missing_clocks_still_restore() -> None:
    for start, last in ((None, None), (1.5, 4.0), (np.float32(2.0), 3), (-1e308, 1e308)):
        state = {**_episode().get_state(), "start_time": start, "last_step_time": last}
        ep = Episode.from_state(state)
        want = None if start is None else float(start)
        assert ep.get_state()["start_time"] == want


# ------------------------------------------------------------ 1. clocks: both writers
def _with_clock(field: str, value: float) -> Episode:
    ep = _episode("bad")
    setattr(ep, f"_{field}", value)  # no public way sets one any more: by hand
    return ep


def _writer(kind: str, path: Path) -> Any:
    if kind == "v1":
        return EpisodeWriter(path)
    return DatasetWriter(path, data_format=kind)


@pytest.mark.parametrize("kind", ["v1", "arrow", "parquet"])
@pytest.mark.parametrize("field", ["start_time", "last_step_time"])
@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=["nan", "inf", "minus_inf"])
def test_writers_refuse_a_clock_that_is_not_finite_at_write(
    tmp_path: Path, kind: str, field: str, value: float
) -> None:
    path = tmp_path / "ds"
    writer = _writer(kind, path)
    writer.write(_episode("0"))
    with pytest.raises(UnstorableValueError, match=f"episode 'bad': {field} is "):
        writer.write(_with_clock(field, value))
    writer.write(_episode("1"))  # still usable, and the first episode is still there
    writer.close()
    assert [ep.id_ for ep in read_episodes(path)] == ["0", "1"]


@pytest.mark.parametrize("kind", ["v1", "arrow", "parquet"])
def test_writers_store_finite_clocks_and_nan_data(tmp_path: Path, kind: str) -> None:
    ep = _episode("x")
    ep.custom_data["k"] = NAN  # NaN data is stored, only clocks must be finite
    ep.rewards.set(NAN, at_indices=0)
    ep._start_time, ep._last_step_time = 10.0, 12.5
    with _writer(kind, tmp_path / "ds") as writer:
        writer.write(ep)
    (back,) = read_episodes(tmp_path / "ds")
    assert back == ep and back.get_duration_s() == 2.5


# ------------------------------------------------------------------- 2. NaN ids
NAN_IDS = {
    "nan": lambda: float("nan"),
    "numpy nan": lambda: np.float64("nan"),
    "tuple holding nan": lambda: ("a", float("nan")),
    "list holding nan": lambda: ["a", float("nan")],
    "dict value nan": lambda: {"k": float("nan")},
    "dict key nan": lambda: {float("nan"): 1, "b": float("nan")},
}


@pytest.mark.parametrize("name", NAN_IDS)
def test_an_episode_with_a_nan_id_equals_its_copies(name: str) -> None:
    ep = _episode(NAN_IDS[name]())
    assert ep == ep
    assert ep == copy.deepcopy(ep)
    assert ep == pickle.loads(pickle.dumps(ep))
    assert ep == Episode.from_state(ep.get_state())
    assert ep == _episode(NAN_IDS[name]())  # another NaN object in the same place


UNEQUAL_IDS = {
    "nan vs tuple": (NAN, (NAN,)),
    "tuple vs list": ((NAN,), [NAN]),
    "other string beside nan": (("a", NAN), ("b", NAN)),
    "nan vs number": (("a", NAN), ("a", 1.0)),
    "other dict key": ({NAN: 1}, {"a": 1}),
    "other dict value beside nan key": ({NAN: 1}, {NAN: 2}),
    "longer tuple": (("a", NAN), ("a", NAN, NAN)),
}


@pytest.mark.parametrize("name", UNEQUAL_IDS)
def test_episodes_with_different_nan_ids_stay_unequal(name: str) -> None:
    a, b = UNEQUAL_IDS[name]
    assert _episode(a) != _episode(b)
    nxt = _episode(a).cut()
    with pytest.raises(AssertionError, match="different ids"):
        _episode(b).concat_episode(nxt)


def test_check_does_not_mutate_passes_a_nan_id_episode() -> None:
    check_does_not_mutate(lambda episodes, batch: {"n": len(episodes)}, [_episode(NAN)])


@pytest.mark.parametrize("name", NAN_IDS)
def test_a_cut_successor_of_a_nan_id_episode_concatenates_back(name: str) -> None:
    ep = _episode(NAN_IDS[name]())
    own = ep.id_
    for copied in (False, True):  # the same NaN object, then another one (a pickled copy's)
        successor = (pickle.loads(pickle.dumps(ep)) if copied else ep).cut()
        successor.add_env_step(np.float32([len(ep) + 1]), 0, 1.0)
        ep.concat_episode(successor)
        assert ep.id_ is own
    assert len(ep) == 3 and ep.get_observations()[-1] == np.float32([3])
