"""The copy tools read only what they copy; the torch datasets decode their ids once.

A scale hunt found ``filter_dataset`` and ``split`` reading and verifying every piece of the
source whatever the manifest decision kept (a filter keeping nothing took 16 s over 8,000
pieces), ``split`` twice, and ``episode_steps`` decoding the ids of the runs asked for at every
call. ``filter_dataset`` now picks the kept ids' pieces from the manifest: what it copies is
verified as before, and a shard (a v1 chunk) holding none of them is not read at all, so its
damage no longer stops a copy that takes nothing from it. Everything else must stay: the
pieces copied, their order and wall times, the refusals, ``split``'s sides.
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    dataset_info,
    filter_dataset,
    read_episodes,
    split,
)
from episodes.io.values import id_key


def _piece(
    id_: Any, t0: int, n: int, *, done: bool = False, data: Any = None
) -> SingleAgentEpisode:
    episode = SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(t0, t0 + n + 1)],
        actions=[t % 2 for t in range(t0, t0 + n)],
        rewards=[1.0] * n,
        t_started=t0,
        terminated=done,
        len_lookback_buffer=0,
    )
    episode.custom_data.update(data or {})
    return episode


def _v2(path: Path, pieces: list[SingleAgentEpisode]) -> Path:
    with DatasetWriter(path, sync=False, shard_bytes=1) as writer:  # a shard per piece
        writer.write_many(pieces)
    return path


def _v1(path: Path, pieces: list[SingleAgentEpisode]) -> Path:
    with EpisodeWriter(path, sync=False) as writer:
        writer.write_many(pieces)
    return path


def _damage_v2(path: Path, piece: int) -> None:
    """Flips a byte of the data file of the shard holding ``piece`` (its CRC-32 fails)."""
    name = Dataset(path).shards[piece].name
    data = path / "shards" / f"{name}.arrow"
    raw = bytearray(data.read_bytes())
    raw[100] ^= 1
    data.write_bytes(raw)


def _damage_v1(path: Path, piece: int) -> None:
    """Flips the last byte of the observations of chunk ``piece`` (only its CRC-32 tells)."""
    lines = (path / "manifest.jsonl").read_text().splitlines()
    chunk = path / json.loads(lines[piece])["chunk"]
    obs = chunk / "obs.0.npy"
    raw = bytearray(obs.read_bytes())
    raw[-1] ^= 1
    obs.write_bytes(raw)


WRITE = {"v2": (_v2, _damage_v2), "v1": (_v1, _damage_v1)}

# Pieces: "short" (1 step), "long" (two pieces of 3 steps, done), "mid" (2 steps, tagged).
PIECES = [
    lambda: _piece("long", 0, 3, data={"k": 1}),
    lambda: _piece("short", 0, 1, data={"k": 1}),
    lambda: _piece("mid", 0, 2, done=True, data={"k": 2}),
    lambda: _piece("long", 3, 3, done=True, data={"k": 1}),
]
SHORT, MID = 1, 2  # manifest positions

# name: (filter kwargs, the ids kept, the manifest position of a piece not kept)
FILTERS = {
    "keeps_nothing": ({"min_return": 100.0}, [], SHORT),
    "min_length": ({"min_length": 2}, ["long", "mid"], SHORT),
    "max_length": ({"max_length": 2}, ["short", "mid"], 0),
    "done_only": ({"done_only": True}, ["long", "mid"], SHORT),
    "predicate": ({"predicate": lambda s: s.id_ == "short"}, ["short"], MID),
    "custom_data_after_a_bound": ({"min_length": 2, "custom_data": {"k": 1}}, ["long"], SHORT),
    "custom_data_keeping_nothing": ({"max_length": 1, "custom_data": {"k": 2}}, [], MID),
}


@pytest.mark.parametrize("version", WRITE.keys())
@pytest.mark.parametrize("name", FILTERS.keys())
def test_a_filter_copies_past_damage_in_a_piece_it_does_not_keep(tmp_path, version, name):
    # Every piece was read and verified: the CRC-32 of a piece the filter dropped failed it.
    write, damage = WRITE[version]
    kwargs, ids, dropped = FILTERS[name]
    src = write(tmp_path / "src", [make() for make in PIECES])
    damage(src, dropped)
    count = filter_dataset(src, tmp_path / "out", **kwargs)
    got = [(e.id_, e.t_started) for e in read_episodes(tmp_path / "out", verify=True)]
    want = [
        (e.id_, e.t_started) for e in (make() for make in PIECES) if e.id_ in ids
    ]  # manifest order
    assert count == len(got) and got == want


@pytest.mark.parametrize("version", WRITE.keys())
@pytest.mark.parametrize("name", [n for n, f in FILTERS.items() if f[1]])
def test_damage_in_a_piece_kept_is_still_refused(tmp_path, version, name):
    write, damage = WRITE[version]
    kwargs, ids, _ = FILTERS[name]
    src = write(tmp_path / "src", [make() for make in PIECES])
    kept = next(i for i, make in enumerate(PIECES) if make().id_ in ids)
    damage(src, kept)
    with pytest.raises(DatasetError, match="CRC"):
        filter_dataset(src, tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


def test_pieces_stored_twice_are_refused_whatever_the_filter_keeps(tmp_path):
    # Refused from the manifest, before anything is read: also where the filter keeps nothing.
    src = _v2(tmp_path / "src", [_piece("a", 0, 2), _piece("a", 0, 2), _piece("b", 0, 1)])
    for kwargs in ({"min_return": 100.0}, {"predicate": lambda s: s.id_ == "b"}):
        with pytest.raises(DatasetError, match="stored twice"):
            filter_dataset(src, tmp_path / "out", **kwargs)
        assert not (tmp_path / "out").exists()


# ------------------------------------------------------------ what the copies hold
IDS = st.sampled_from(["a", "b", 7, 7.0, ("t", 1), float("nan"), ("n", float("nan")), -0.0, 0.0])


@st.composite
def _datasets(draw: st.DrawFn) -> list[SingleAgentEpisode]:
    """Pieces of a few ids, each id's pieces continuing one another (in a shuffled order)."""
    pieces = []
    for id_ in draw(st.lists(IDS, min_size=1, max_size=5, unique_by=id_key)):
        t = 0
        for _ in range(draw(st.integers(1, 3))):
            n = draw(st.integers(0, 3))
            pieces.append(_piece(id_, t, n, data={"k": draw(st.integers(0, 1))}))
            t += n
    return draw(st.permutations(pieces))


def _stored(path: Path) -> list[tuple[str, int, int, list[Any], dict[Any, Any]]]:
    """Each piece's (id key, t_started, t, observations, custom_data), in manifest order."""
    return [
        (id_key(e.id_), e.t_started, e.t, e.get_observations(), e.custom_data)
        for e in read_episodes(path)
    ]


def _walls(path: Path) -> list[tuple[Any, Any]]:
    ds = Dataset(path)
    out = []
    for i in range(len(ds)):
        shard, j = ds.locate(i)
        out.append((shard.entry_of(j).get("wall_start"), shard.entry_of(j).get("wall_end")))
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=_datasets(), low=st.integers(0, 6), tag=st.sampled_from([None, 0, 1]))
def test_a_filter_copies_exactly_the_pieces_of_the_ids_that_pass(
    tmp_path_factory, pieces, low, tag
):
    root = tmp_path_factory.mktemp("f")
    with DatasetWriter(root / "src", sync=False, shard_bytes=200) as writer:
        writer.write_many(pieces)
    source = _stored(root / "src")
    length: dict[str, int] = {}
    data: dict[str, dict[Any, Any]] = {}
    for key, t0, t, _, custom in sorted(source, key=lambda p: (p[1], p[2])):  # time order
        length[key] = length.get(key, 0) + t - t0
        data.setdefault(key, {}).update(custom)
    passing = {k for k in length if length[k] >= low and (tag is None or data[k]["k"] == tag)}
    custom = None if tag is None else {"k": tag}
    count = filter_dataset(root / "src", root / "out", min_length=low, custom_data=custom)
    want = [p for p in source if p[0] in passing]
    assert _stored(root / "out") == want and count == len(want)
    walls = dict(zip(((p[0], p[1], p[2]) for p in source), _walls(root / "src")))
    kept = zip(((p[0], p[1], p[2]) for p in want), _walls(root / "out"))
    assert all(walls[where] == w for where, w in kept)  # the source's wall times


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=_datasets(), fraction=st.sampled_from([0.0, 0.3, 0.5, 1.0]), seed=st.integers(0, 3))
def test_split_sends_every_piece_once_its_id_to_one_side(tmp_path_factory, pieces, fraction, seed):
    root = tmp_path_factory.mktemp("s")
    with DatasetWriter(root / "src", sync=False, shard_bytes=200) as writer:
        writer.write_many(pieces)
    n_train, n_val = split(root / "src", root / "t", root / "v", fraction=fraction, seed=seed)
    source, train, val = (_stored(root / name) for name in ("src", "t", "v"))
    assert (n_train, n_val) == (len(train), len(val))
    assert not {p[0] for p in train} & {p[0] for p in val}
    on_train = {p[0] for p in train}
    assert train == [p for p in source if p[0] in on_train]  # manifest order, all of an id
    assert val == [p for p in source if p[0] not in on_train]
    if fraction in (0.0, 1.0):
        assert (train, val) == ((source, []) if fraction == 0.0 else ([], source))
    for name in ("t", "v"):
        assert dataset_info(root / name).metadata["user"]["split"]["fraction"] == fraction


def test_split_of_a_damaged_dataset_leaves_neither_side(tmp_path):
    src = _v2(tmp_path / "src", [_piece(str(i), 0, 2) for i in range(6)])
    _damage_v2(src, 4)
    with pytest.raises(DatasetError, match="CRC"):
        split(src, tmp_path / "t", tmp_path / "v", fraction=0.5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


# ------------------------------------------------------------ episode_steps
torch = pytest.importorskip("torch")

from episodes.io.torch_data import SequenceDataset, TransitionDataset  # noqa: E402

STEP_IDS = ["a", ("t", 1, ("u", 2.5)), 3, float("nan"), {"d": [1, 2]}, -0.0]


@pytest.mark.parametrize("kind", ["transitions", "sequences"])
def test_episode_steps_over_many_calls_name_the_ids_the_readers_give(tmp_path, kind):
    pieces = [_piece(id_, 0, 3 + i, done=True) for i, id_ in enumerate(STEP_IDS)]
    with DatasetWriter(tmp_path / "src", sync=False) as writer:
        writer.write_many(pieces)
    data = (
        TransitionDataset(tmp_path / "src")
        if kind == "transitions"
        else SequenceDataset(tmp_path / "src", length=2)
    )
    before = len(pickle.dumps(data))
    want = []
    for e in read_episodes(tmp_path / "src"):
        starts = range(len(e)) if kind == "transitions" else range(len(e) - 1)
        want += [(e.id_, e.t_started + k) for k in starts]
    rng = np.random.default_rng(0)
    for indices in ([0], list(range(len(data)))[::-1], rng.integers(0, len(data), 50), []):
        ids, t = data.episode_steps(indices)
        expected = [want[i] for i in np.asarray(indices, dtype=np.int64).tolist()]
        assert [id_key(x) for x in ids] == [id_key(x) for x, _ in expected]
        assert [type(x) for x in ids] == [type(x) for x, _ in expected]
        assert t.tolist() == [w for _, w in expected] and ids.dtype == object
        assert ids.shape == (len(expected),)
    assert len(pickle.dumps(data)) == before  # nothing kept for it goes to the workers
    copy = pickle.loads(pickle.dumps(data))
    assert [id_key(x) for x in copy.episode_steps([0, len(data) - 1])[0]] == [
        id_key(want[0][0]),
        id_key(want[-1][0]),
    ]
    nan_id = [x for x in data.episode_steps(range(len(data)))[0] if isinstance(x, float)]
    assert any(math.isnan(x) for x in nan_id)
