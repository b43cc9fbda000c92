"""Every block of read_steps / read_transitions has one type per step column across the whole
dataset: chunks whose dtypes differ between shards (a runner that widened a column between
samples) join in the type both fit, found before any read task runs, so that Ray Data can
gather blocks of different tasks; what no block can hold is refused by read_steps itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ray = pytest.importorskip("ray")

from episodes import SingleAgentEpisode, io  # noqa: E402
from episodes.distributed import EpisodeDatasource, read_steps, read_transitions  # noqa: E402
from episodes.distributed.rows import step_columns  # noqa: E402
from episodes.distributed.step_blocks import JoinedTypes, join_types  # noqa: E402
from episodes.distributed.step_types import dataset_step_types  # noqa: E402


def _episode(id_: str, obs: Any, actions: Any, extras: dict[str, Any] | None = None) -> Any:
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=actions,
        rewards=[1.0] * len(actions),
        extra_model_outputs=extras or {},
        len_lookback_buffer=0,
    )


def _obs(dtype: Any, shape: tuple[int, ...] = (2,), n: int = 3) -> np.ndarray:
    return (np.arange(n * int(np.prod(shape))) % 7).reshape((n, *shape)).astype(dtype)


def _dataset(path: Path, episodes: list[Any]) -> str:
    with io.DatasetWriter(path, shard_bytes=1) as writer:  # one chunk per shard
        for episode in episodes:
            writer.write(episode)
    return str(path)


def _block_types(path: str, kind: str = "steps") -> list[dict[str, Any]]:
    source = EpisodeDatasource(path, kind)
    blocks = [block for task in source.get_read_tasks(8) for block in task()]
    return [{f.name: str(f.type) for f in block.schema} for block in blocks]


# Chunks in separate shards whose column types join; the type every block then holds.
JOINED = {
    "int8-then-int64-tensor-obs": (
        [_episode("a", _obs(np.int8), [0, 1]), _episode("b", _obs(np.int64), [0, 1])],
        {"obs": np.int64, "next_obs": np.int64},
    ),
    "float32-then-float64-tensor-obs": (
        [_episode("a", _obs(np.float32), [0, 1]), _episode("b", _obs(np.float64), [0, 1])],
        {"obs": np.float64},
    ),
    "uint8-then-int8-scalar-obs": (
        [_episode("a", _obs(np.uint8, ()), [0, 1]), _episode("b", _obs(np.int8, ()), [0, 1])],
        {"obs": np.int16},
    ),
    "int32-then-int64-actions": (
        [
            _episode("a", _obs(np.float32), np.array([0, 1], np.int32)),
            _episode("b", _obs(np.float32), np.array([0, 1], np.int64)),
        ],
        {"action": np.int64, "obs": np.float32},
    ),
    "nested-obs-leaves": (
        [
            _episode("a", {"x": _obs(np.float32), "y": _obs(np.int8, ())}, [0, 1]),
            _episode("b", {"x": _obs(np.float64), "y": _obs(np.int8, ())}, [0, 1]),
        ],
        {"obs.0": np.float64, "obs.1": np.int8, "next_obs.0": np.float64},
    ),
    "float16-then-float32-extras": (
        [
            _episode("a", _obs(np.float32), [0, 1], {"h": np.zeros((2, 4), np.float16)}),
            _episode("b", _obs(np.float32), [0, 1], {"h": np.zeros((2, 4), np.float32)}),
        ],
        {"extra.h": np.float32},
    ),
    "list-mode-chunk-beside-numpyd-one": (
        [
            _episode("a", [np.int8(1), np.int8(2), np.int8(3)], [0, 1]),
            _episode("b", _obs(np.int8, ()), [0, 1]).to_numpy(),
            _episode("c", _obs(np.int32, ()), [0, 1]).to_numpy(),
        ],
        {"obs": np.int32},
    ),
}


@pytest.mark.parametrize("case", list(JOINED))
def test_every_block_holds_the_types_the_whole_dataset_joins_in(tmp_path, case):
    episodes, want = JOINED[case]
    path = _dataset(tmp_path / "ds", episodes)
    types = dataset_step_types(path, "chunks")
    for name, dtype in want.items():
        assert types[name] == np.dtype(dtype), name
    for kind in ("steps", "transitions"):
        schemas = _block_types(path, kind)
        assert len(schemas) == len(episodes)
        assert all(schema == schemas[0] for schema in schemas), schemas


def test_ray_data_batches_and_sorts_blocks_of_shards_with_other_dtypes(ray_local, tmp_path):
    episodes = [_episode("a", _obs(np.int8), [0, 1]), _episode("b", _obs(np.int64), [0, 1])]
    path = _dataset(tmp_path / "ds", [ep.to_numpy() for ep in episodes])
    for dataset in (read_steps(path), read_transitions(path, n_step=2)):
        batches = list(dataset.iter_batches(batch_size=None, batch_format="numpy"))
        obs = np.concatenate([batch["obs"] for batch in batches])
        assert obs.dtype == np.int64 and obs.shape == (4, 2)
        rows = dataset.sort(["episode_id", "t"]).take_all()
        assert [row["obs"].tolist() for row in rows] == [
            row.tolist() for ep in episodes for row in ep.get_observations(slice(0, 2))
        ]


# Chunks in separate shards that no block can hold: read_steps refuses them when called.
REFUSED = {
    "bool-then-int-actions": (
        [_episode("a", _obs(np.float32), [True, False]), _episode("b", _obs(np.float32), [2, 3])],
        r"'action': bool rows of shape \(\) in episode 'a' \(chunk 0\), int64 rows of shape \(\) "
        r"in episode 'b' \(chunk 1\)",
    ),
    "int64-then-uint64-obs": (
        [_episode("a", _obs(np.int64), [0, 1]), _episode("b", _obs(np.uint64), [0, 1])],
        r"'obs': int64 rows of shape \(2,\) in episode 'a'(?: \(chunk \d+\))?, uint64 rows",
    ),
    "obs-row-shapes": (
        [
            _episode("a", _obs(np.float32, (2,)), [0, 1]),
            _episode("b", _obs(np.float32, (3,)), [0, 1]),
        ],
        r"'obs': float32 rows of shape \(2,\) in episode 'a' \(chunk 0\), float32 rows of "
        r"shape \(3,\)",
    ),
    "int-then-float-obs": (
        [_episode("a", _obs(np.int64), [0, 1]), _episode("b", _obs(np.float32), [0, 1])],
        r"'obs': int64 rows of shape \(2,\) in episode 'a'(?: \(chunk \d+\))?, float32 rows",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_read_steps_refuses_shards_no_block_can_join_before_reading(ray_local, tmp_path, case):
    episodes, message = REFUSED[case]
    path = _dataset(tmp_path / "ds", [ep.to_numpy() for ep in episodes])
    for read in (read_steps, read_transitions):
        with pytest.raises(ValueError, match=r"chunks 0-2 of .* do not share the type"):
            read(path)
        with pytest.raises(ValueError, match=message):
            read(path)


def test_chunks_without_steps_take_no_part(tmp_path):
    stepless = SingleAgentEpisode("a", observations=[np.zeros(2, np.float64)])
    path = _dataset(tmp_path / "ds", [stepless.to_numpy(), _episode("b", _obs(np.int8), [0, 1])])
    assert dataset_step_types(path, "chunks")["obs"] == np.int8


# ------------------------------------------------------------------------------ property
DTYPES = {
    "i": [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16],
    "f": [np.float16, np.float32, np.float64],
}


@st.composite
def _chunks(draw: Any) -> list[Any]:
    kind = draw(st.sampled_from(sorted(DTYPES)))
    nested = draw(st.booleans())
    out = []
    for k in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 3))
        dtype = draw(st.sampled_from(DTYPES[kind]))
        obs: Any = _obs(dtype, (2,), n + 1)
        if nested:
            obs = {"a": obs, "b": _obs(draw(st.sampled_from(DTYPES["f"])), (), n + 1)}
        extras = (
            {"v": _obs(draw(st.sampled_from(DTYPES["f"])), (), n)} if draw(st.booleans()) else {}
        )
        episode = _episode(str(k), obs, [0] * n, extras)
        if not nested and draw(st.booleans()):  # a list-mode chunk of numpy rows
            episode = _episode(str(k), list(obs), [0] * n, {k: list(v) for k, v in extras.items()})
        out.append(episode.to_numpy() if draw(st.booleans()) else episode)
    return out


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chunks=_chunks())
def test_planned_types_are_those_of_the_chunks_as_read(tmp_path_factory, chunks):
    """The types from the shards' indexes are the types the read chunks' columns join in."""
    path = _dataset(tmp_path_factory.mktemp("ds") / "ds", chunks)
    joined: JoinedTypes = {}
    names = set()
    for episode in io.read_episodes(path, numpy=True):
        if len(episode):
            columns = step_columns(episode)
            names.add(tuple(sorted(columns)))
            join_types(joined, columns, "chunks")
    if len(names) > 1:  # an extra output in some chunks only
        with pytest.raises(ValueError, match="do not share step columns"):
            dataset_step_types(path, "chunks")
        return
    want = {name: column.dtype for name, (column, _) in joined.items() if name != "episode_id"}
    assert dataset_step_types(path, "chunks") == want
    schemas = _block_types(path)
    column_sets = {tuple(sorted(schema)) for schema in schemas}
    for names in column_sets:  # blocks holding the same columns have one schema
        same = [s for s in schemas if tuple(sorted(s)) == names]
        assert all(s == same[0] for s in same)


# Chunks in separate shards whose step columns differ in name or nesting: refused by name.
OTHER_COLUMNS = {
    "extra-in-one-chunk-only": (
        [
            _episode("a", _obs(np.float32), [0, 1], {"h": np.zeros((2, 3), np.float32)}),
            _episode("b", _obs(np.float32), [0, 1]),
        ],
        r"do not share step columns: .* in episode 'a' \(chunk 0\), .* in episode 'b' "
        r"\(chunk 1\)",
    ),
    "nested-beside-flat-obs": (
        [
            _episode("a", {"x": _obs(np.float32)}, [0, 1]),
            _episode("b", _obs(np.float32), [0, 1]),
        ],
        r"do not share step columns",
    ),
    "dict-obs-with-other-keys": (
        [
            _episode("a", {"pos": _obs(np.float32), "vel": _obs(np.float32)}, [0, 1]),
            _episode("b", {"acc": _obs(np.float32), "pos": _obs(np.float32)}, [0, 1]),
        ],
        r"do not share the nesting of 'obs': leaves \(\('pos',\), \('vel',\)\) in episode 'a' "
        r"\(chunk 0\), \(\('acc',\), \('pos',\)\) in episode 'b' \(chunk 1\)",
    ),
    "tuple-obs-beside-dict-obs": (
        [
            _episode("a", list(zip(_obs(np.float32), _obs(np.float32))), [0, 1]),
            _episode("b", {"0": _obs(np.float32), "2": _obs(np.float32)}, [0, 1]),
        ],
        r"do not share the nesting of 'obs'",
    ),
}


@pytest.mark.parametrize("numpy", [True, False], ids=["numpyd", "list-mode"])
@pytest.mark.parametrize("case", list(OTHER_COLUMNS))
def test_chunks_with_other_columns_or_nestings_are_refused(tmp_path, case, numpy):
    episodes, message = OTHER_COLUMNS[case]
    path = _dataset(tmp_path / "ds", [ep.to_numpy() if numpy else ep for ep in episodes])
    with pytest.raises(ValueError, match=message):
        dataset_step_types(path, "chunks 0-2")
    for kind in ("steps", "transitions"):
        with pytest.raises(ValueError, match=message):
            EpisodeDatasource(path, kind).get_read_tasks(2)


def test_dict_keys_in_another_insertion_order_are_one_nesting(tmp_path):
    a = _episode("a", {"pos": _obs(np.float32), "vel": _obs(np.int8)}, [0, 1])
    b = _episode("b", {"vel": _obs(np.int64), "pos": _obs(np.float32)}, [0, 1])
    path = _dataset(tmp_path / "ds", [a.to_numpy(), b])
    types = dataset_step_types(path, "chunks")
    assert (types["obs.0"], types["obs.1"]) == (np.float32, np.int64)


def test_string_columns_are_not_cast_to_the_widest_string(tmp_path):
    a = _episode("a", np.array(["ab"] * 3), [0, 1])
    b = _episode("b", np.array(["x" * 50] * 3), [0, 1])
    path = _dataset(tmp_path / "ds", [a.to_numpy(), b.to_numpy()])
    assert "obs" not in dataset_step_types(path, "chunks")
    source = EpisodeDatasource(path)
    blocks = [block for task in source.get_read_tasks(2) for block in task()]
    assert sorted(v for b in blocks for v in b["obs"].to_pylist()) == ["ab", "ab"] + ["x" * 50] * 2
    assert {str(b.schema.field("obs").type) for b in blocks} == {"string"}


def test_refusals_name_the_joined_type_and_the_chunk_that_decided_it(tmp_path):
    episodes = [
        _episode("u8", _obs(np.uint8, ()), [0, 1]),
        _episode("i8", _obs(np.int8, ()), [0, 1]),
        _episode("u64", _obs(np.uint64, ()), [0, 1]),
    ]
    path = _dataset(tmp_path / "ds", [ep.to_numpy() for ep in episodes])
    message = (
        r"'obs': int16 rows of shape \(\) in episode 'i8' \(chunk 1\), uint64 rows of shape "
        r"\(\) in episode 'u64' \(chunk 2\)"
    )
    with pytest.raises(ValueError, match=message):
        dataset_step_types(path, "chunks")


@pytest.mark.parametrize(
    "key, value",
    [("dtype", "foo"), ("dtype", "|O"), ("shape", [-1]), ("shape", ["x"])],
    ids=["unknown-dtype", "object-dtype", "negative-shape", "string-shape"],
)
def test_a_damaged_index_entry_is_refused_as_the_readers_refuse_it(tmp_path, key, value):
    import hashlib
    import json
    import zlib

    root = Path(_dataset(tmp_path / "ds", [_episode("a", _obs(np.float32), [0, 1]).to_numpy()]))
    lines = [json.loads(x) for x in (root / "manifest.jsonl").read_bytes().split(b"\n")[:-1]]
    for line in lines:
        line.pop("crc32")
    index_path = root / "shards" / f"{lines[1]['shard']}.json"
    index = json.loads(index_path.read_text())
    index["episodes"][0]["leaves"]["obs.0.npy"][key] = value
    raw = json.dumps(index).encode()
    index_path.write_bytes(raw)
    lines[1]["index_sha256"], lines[1]["index_size"] = hashlib.sha256(raw).hexdigest(), len(raw)
    sealed = b""
    for line in lines:  # the manifest's CRCs, as a forger would recompute them
        prefix = json.dumps(line).encode()[:-1]
        sealed += prefix + b',"crc32":"%08x"}\n' % zlib.crc32(prefix)
    (root / "manifest.jsonl").write_bytes(sealed)
    with pytest.raises(io.CorruptDatasetError):
        list(io.read_episodes(root))
    with pytest.raises(io.CorruptDatasetError, match="obs.0.npy"):
        dataset_step_types(str(root), "chunks")
