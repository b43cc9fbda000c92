"""Behaviour that hand-made mutants of ``episodes.rollout.generators`` and
``episodes.io.shard_codec`` showed no test pinned (session 43).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

try:
    import torch
except ImportError:  # the rollout tests need torch; the shard tests do not
    torch = None  # type: ignore[assignment]

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


# ------------------------------------------------------------------ rollout.generators


def _storage(num_envs: int, steps: int, **kwargs: Any) -> Any:
    from episodes.rollout import RolloutStorage

    return RolloutStorage("rl", num_envs, steps, (2,), (1,), **kwargs)


@needs_torch
@pytest.mark.parametrize("kind", ["flat", "recurrent"])
def test_equal_float32_advantages_normalise_to_zero_per_mini_batch(kind):
    # Mutant: the float32 per-mini-batch normalisation dividing by the std without its 1e-8
    # (equal advantages: 0 / 0, NaN).
    storage = _storage(2, 3, normalize_advantage_per_mini_batch=True)
    storage.advantages.fill_(0.5)
    make = (
        storage.mini_batch_generator if kind == "flat" else storage.recurrent_mini_batch_generator
    )
    for batch in make(2, num_epochs=1):
        assert batch.advantages.tolist() == torch.zeros_like(batch.advantages).tolist()


@needs_torch
def test_recurrent_batches_with_valid_cells_leave_the_storage_advantages_as_they_were():
    # Mutant: the masked per-mini-batch normalisation working on the batch's slice itself (a
    # view of storage.advantages), not a copy: the storage's advantages overwritten.
    storage = _storage(2, 3, normalize_advantage_per_mini_batch=True)
    storage.advantages.copy_(torch.arange(6.0).view(3, 2, 1))
    storage.valid = torch.tensor([[True, True], [True, False], [True, True]])
    before = storage.advantages.clone()
    batches = list(storage.recurrent_mini_batch_generator(1, num_epochs=2))
    assert torch.equal(storage.advantages, before)
    # Both epochs normalise the same advantages: equal batches.
    assert torch.equal(batches[0].advantages, batches[1].advantages)
    assert batches[0].advantages[1, 1, 0].item() == 0.0  # the invalid cell


@needs_torch
def test_recurrent_batches_with_valid_cells_leave_the_storage_dones_as_they_were():
    # Mutant: the trajectory ends (dones, split where validity changes) built on the bool
    # dones themselves, not a copy: the storage's dones gain ends at every validity change.
    storage = _storage(2, 4)
    storage.valid = torch.tensor([[True, True], [True, False], [False, True], [True, True]])
    before = storage.dones.clone()
    for _ in storage.recurrent_mini_batch_generator(2, num_epochs=1):
        pass
    assert torch.equal(storage.dones, before)


@needs_torch
@pytest.mark.parametrize("kind", ["flat", "recurrent"])
def test_a_generator_of_no_epochs_yields_nothing_even_after_a_refill(kind):
    # Mutant: the recurrent generator checking for a refill before its first epoch when it
    # has none to give (the flat one yields nothing, and so does the recurrent one).
    storage = _storage(2, 3)
    make = (
        storage.mini_batch_generator if kind == "flat" else storage.recurrent_mini_batch_generator
    )
    batches = make(1, num_epochs=0)
    storage.clear()
    assert list(batches) == []


@needs_torch
def test_a_refused_flat_batch_draws_nothing_from_the_generator():
    # Mutant: the flat generator's refill check before each epoch's permutation dropped (the
    # check before each batch still refuses, but only after the draw).
    storage = _storage(2, 3)
    generator = torch.Generator().manual_seed(0)
    batches = storage.mini_batch_generator(1, num_epochs=2, generator=generator)
    next(batches)
    state = generator.get_state()
    storage.clear()
    with pytest.raises(RuntimeError, match="the storage changed"):
        next(batches)
    assert torch.equal(generator.get_state(), state)


# ------------------------------------------------------------------ io.shard_codec

MALFORMED_STRUCTURES = {
    "two kinds in one node": {"dict": [], "tuple": []},
    "dict entry of three": {"dict": [["a", "*", "*"]]},
    "dict entry keyed by a number": {"dict": [[1, "*"]]},
}


@pytest.mark.parametrize(
    "structure", list(MALFORMED_STRUCTURES.values()), ids=list(MALFORMED_STRUCTURES)
)
@pytest.mark.parametrize("read", ["skeleton_of", "skeleton_paths"])
def test_a_malformed_item_structure_is_a_corrupt_dataset(structure, read):
    # Mutants: ``len(enc) == 1`` read as ``>= 1`` (a node of two kinds unpacked as one:
    # ValueError), a dict entry's ``len(pair) == 2`` or ``isinstance(pair[0], str)`` dropped.
    from episodes.io import shard_codec
    from episodes.io.errors import CorruptDatasetError

    with pytest.raises(CorruptDatasetError, match="where"):
        getattr(shard_codec, read)(structure, "where")


@pytest.mark.parametrize(
    ("structure", "skeleton"),
    [
        ({"list": ["*", "*"]}, [0, 0]),
        ({"tuple": ["*", {"list": ["*"]}]}, (0, [0])),
        ({"dict": [["k", {"list": []}]]}, {"k": []}),
    ],
    ids=["list", "list in a tuple", "empty list in a dict"],
)
def test_a_list_structure_keeps_its_list_skeleton(structure, skeleton):
    # Mutant: every sequence node read back as a tuple (``tuple(parts)`` for lists too).
    from episodes.io.shard_codec import skeleton_of

    assert skeleton_of(structure, "x") == skeleton  # [0] != (0,)


def _encoded(episode: Any) -> tuple[Any, Any]:
    import pyarrow as pa

    from episodes.io.shard_codec import encode_rows

    enc = encode_rows(episode)
    return enc, pa.table(enc.columns)


def _sample_episode() -> Any:
    from episodes import SingleAgentEpisode

    return SingleAgentEpisode(
        "e",
        observations=[0, 1, 2],
        actions=[1, 0],
        rewards=[1.0, 0.5],
        infos=[{"k": np.arange(3)}, {}, {"x": 1}],
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    "observations",
    [[0, False, 0], [[], [], []], [0, "", None]],
    ids=["falsy numbers", "empty lists", "falsy mixed"],
)
def test_json_items_that_are_all_falsy_read_back_as_written(observations):
    # Mutant: the all-empty-dicts shortcut taken for any all-falsy items (``and not
    # any(items)`` read as ``or``): [], 0 and False stored as {}.
    from episodes import SingleAgentEpisode
    from episodes.io.shard_codec import decode_rows

    episode = SingleAgentEpisode(
        observations=observations, actions=[0, 0], rewards=[0.0, 0.0], len_lookback_buffer=0
    )
    enc, table = _encoded(episode)
    back = decode_rows(enc.entry, table, 0, spaces=enc.spaces, where="x")
    assert back == episode
    assert back.get_observations(slice(None)) == observations


def test_nested_columns_are_null_in_the_rows_past_their_steps():
    # Mutants: the struct column null from row ``size + 1`` on, or never (``meta["size"]``
    # read as the episode's rows): a nested column's steps counted as a flat one's.
    from episodes import SingleAgentEpisode

    episode = SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[{"a": 1, "b": 2.0}, {"a": 3, "b": 4.0}],
        rewards=[1.0, 0.5],
        extra_model_outputs={"out": [{"p": 0.5}, {"p": 0.25}]},
        len_lookback_buffer=0,
    )
    enc, _ = _encoded(episode)
    assert enc.columns["actions"].to_pylist() == [{"a": 1, "b": 2.0}, {"a": 3, "b": 4.0}, None]
    assert enc.columns["actions"].null_count == enc.columns["rewards"].null_count == 1
    extras = enc.columns["extra_model_outputs"].to_pylist()
    assert extras == [{"out": {"p": 0.5}}, {"out": {"p": 0.25}}, None]


MISSING_COLUMN_PATHS = {
    "no such column": ["y"],
    "through a flat column": ["x", "a"],
    "no such field": ["s", "nope"],
    "no name at all": [],
}


@pytest.mark.parametrize(
    "path", list(MISSING_COLUMN_PATHS.values()), ids=list(MISSING_COLUMN_PATHS)
)
def test_a_missing_column_path_is_a_corrupt_dataset_naming_the_table(path):
    # Mutants: the struct check before ``.field`` dropped (AttributeError), and KeyError,
    # IndexError or TypeError no longer turned into the dataset error.
    import pyarrow as pa

    from episodes.io.errors import CorruptDatasetError
    from episodes.io.shard_codec import column_of

    struct = pa.StructArray.from_arrays([pa.array([1, 2])], names=["a"])
    table = pa.table({"x": [1, 2], "s": struct})
    with pytest.raises(CorruptDatasetError, match=r"^shard s: column .* is missing"):
        column_of(table, path, "shard s")


def test_a_column_of_several_chunks_is_read_whole():
    # Mutant: only a column of more than two chunks combined (two chunks: the first alone).
    import pyarrow as pa

    from episodes.io.shard_codec import column_of

    table = pa.table({"x": pa.chunked_array([[1, 2], [3]])})
    assert column_of(table, ["x"]).to_pylist() == [1, 2, 3]


def test_a_blob_past_the_table_or_of_another_type_is_a_corrupt_dataset():
    # Mutants: ``start < len(array)`` read as ``<=`` (IndexError), the blob column's type
    # check dropped (a plain binary column read as a blob).
    import pyarrow as pa

    from episodes.io.errors import CorruptDatasetError
    from episodes.io.shard_codec import blob_of

    enc, table = _encoded(_sample_episode())
    assert blob_of(table, 0, "x")  # this episode has one
    with pytest.raises(CorruptDatasetError, match="blob is missing"):
        blob_of(table, len(table), "x")
    plain = table.set_column(
        table.schema.get_field_index("blob"), "blob", table["blob"].cast(pa.binary())
    )
    with pytest.raises(CorruptDatasetError):
        blob_of(plain, 0, "x")


def _set_meta(key: str, value: Any) -> Any:
    def forge(entry: dict, table: Any) -> Any:
        entry["meta"][key] = value
        return table

    return forge


def _set_column_meta(name: str, key: str | None, value: Any) -> Any:
    def forge(entry: dict, table: Any) -> Any:
        if key is None:
            entry["meta"]["columns"][name] = value
        else:
            entry["meta"]["columns"][name][key] = value
        return table

    return forge


def _set_infos_texts(texts: list, kind: Any = None) -> Any:
    def forge(entry: dict, table: Any) -> Any:
        import pyarrow as pa

        column = pa.array(texts, kind or pa.large_string())
        return table.set_column(table.schema.get_field_index("infos"), "infos", column)

    return forge


def _drop_leaves(entry: dict, table: Any) -> Any:
    entry["leaves"] = []
    return table


FORGED = {
    # _restore: a space reference is one int key, a valid index and no bool.
    "space ref True": _set_meta("observation_space", {"space_ref": True}),
    "space ref -1": _set_meta("observation_space", {"space_ref": -1}),
    "space ref with another key": _set_meta("observation_space", {"space_ref": 0, "k": 1}),
    # _column_metas / prepare_meta: containers of the wrong kind.
    "columns a list": _set_meta("columns", []),
    "leaf table a list": _drop_leaves,
    "column meta a list": _set_column_meta("actions", None, []),
    # the JSON column's declared size.
    "infos size True": _set_column_meta("infos", "size", True),
    "infos size -1": _set_column_meta("infos", "size", -1),
    # the JSON column's texts.
    "infos texts not large_string": _set_infos_texts(["{}", "{}", "{}"], "string"),
    "infos text nested too deeply": _set_infos_texts(["[" * 100_000 + "]" * 100_000, "{}", "{}"]),
    "infos text null": _set_infos_texts([None, "{}", "{}"]),
}


@pytest.mark.parametrize("forge", list(FORGED.values()), ids=list(FORGED))
def test_a_forged_entry_or_column_is_a_corrupt_dataset(forge):
    # Mutants: each check of _restore (bool, negative or extra keys accepted), of
    # _column_metas' ``or`` (read as ``and``), of the leaf table's and a column meta's kind,
    # of the JSON size (bool, negative) and text type dropped, and RecursionError or
    # TypeError of a JSON text no longer turned into the dataset error.
    import copy

    from episodes.io.errors import CorruptDatasetError
    from episodes.io.shard_codec import decode_rows

    enc, table = _encoded(_sample_episode())
    entry = copy.deepcopy(enc.entry)
    table = forge(entry, table)
    with pytest.raises(CorruptDatasetError, match="^episode e"):
        decode_rows(entry, table, 0, spaces=enc.spaces, where="episode e")


@pytest.mark.parametrize("column", ["infos", "actions"])
@pytest.mark.parametrize("table_where", [None, "shard s"])
def test_a_missing_column_names_the_table_or_else_the_episode(column, table_where):
    # Mutants: decode_rows passing ``table_where`` unfilled (None: no name at all), or the
    # episode's name where the table's is given, for a JSON column or a leaf column.
    from episodes.io.errors import CorruptDatasetError
    from episodes.io.shard_codec import decode_rows

    enc, table = _encoded(_sample_episode())
    table = table.drop_columns([column])
    name = table_where or "episode e"
    with pytest.raises(CorruptDatasetError, match=f"^{name}: column {column} is missing"):
        decode_rows(
            enc.entry, table, 0, spaces=enc.spaces, where="episode e", table_where=table_where
        )


def test_decoding_leaves_the_entry_alone_and_gives_writable_arrays():
    # Mutants: prepare_meta filling in the caller's entry (no private copy), the blob read
    # as a view of the table (read-only arrays in the infos).
    import copy

    from episodes.io.shard_codec import decode_rows

    episode = _sample_episode()
    enc, table = _encoded(episode)
    entry = copy.deepcopy(enc.entry)
    first = decode_rows(entry, table, 0, spaces=enc.spaces, where="x")
    assert entry == enc.entry
    assert decode_rows(entry, table, 0, spaces=enc.spaces, where="x") == first == episode
    array = first.get_infos(0)["k"]
    array[0] = 7  # the episode's own
    assert array.tolist() == [7, 1, 2]


def _set_extras(value: Any) -> Any:
    def forge(entry: dict, table: Any) -> Any:
        entry["meta"]["extra_model_outputs"] = value
        return table

    return forge


META_FORGED = {
    "extras entry of three": _set_extras([["out", {"space": {"space_ref": 0}}, "more"]]),
    "infos size True": _set_column_meta("infos", "size", True),
    "infos past the table": _set_column_meta("infos", "size", 4),
}


@pytest.mark.parametrize("forge", list(META_FORGED.values()), ids=list(META_FORGED))
def test_prepare_meta_refuses_a_forged_entry(forge):
    # Mutants: _column_metas' ``len(pair) == 2`` dropped, the JSON size's bool check dropped,
    # ``start + size > len(array)`` dropped (fewer items read than the entry declares).
    import copy

    from episodes.io.errors import CorruptDatasetError
    from episodes.io.shard_codec import prepare_meta

    enc, table = _encoded(_sample_episode())
    entry = copy.deepcopy(enc.entry)
    table = forge(entry, table)
    with pytest.raises(CorruptDatasetError, match="^episode e"):
        prepare_meta(entry, table, 0, enc.spaces, "episode e")


@pytest.mark.parametrize(
    ("item", "stored"),
    [
        ("a" * 25, True),  # <U25: 100 bytes an item, the widest taken
        ("a" * 26, False),  # 104 bytes
        (np.full(20, 0.5), True),  # float64 x 20: 160 bytes, a list of numbers, not one wide item
    ],
    ids=["text at the limit", "text past the limit", "numbers past the limit"],
)
def test_only_items_stored_raw_and_wider_than_the_limit_are_refused(monkeypatch, item, stored):
    # Mutants: ``width > _ARROW_MAX_BYTE_WIDTH`` read as ``>=``, and the ``storage == "raw"``
    # condition dropped (numeric leaves, stored as Arrow lists, refused by their width).
    from episodes import SingleAgentEpisode
    from episodes.io import UnstorableValueError, shard_codec

    monkeypatch.setattr(shard_codec, "_ARROW_MAX_BYTE_WIDTH", 100)
    episode = SingleAgentEpisode(observations=[item, item], actions=[0], rewards=[1.0])
    episode.to_numpy()
    if stored:
        _encoded(episode)
    else:
        with pytest.raises(UnstorableValueError, match="observations: items of 104 bytes"):
            _encoded(episode)


@pytest.mark.parametrize(
    "where",
    ["observations", "extra_model_outputs"],
)
def test_a_key_with_a_lone_surrogate_is_unstorable_in_a_shard(where):
    # Mutant: the UTF-8 check of non-ASCII field names dropped (Arrow's own error, or a
    # column name no reader takes).
    from episodes import SingleAgentEpisode
    from episodes.io import UnstorableValueError

    key = "k\ud800"
    if where == "observations":
        episode = SingleAgentEpisode(observations=[{key: 1}, {key: 2}], actions=[0], rewards=[1.0])
    else:
        episode = SingleAgentEpisode(
            observations=[0, 1], actions=[0], rewards=[1.0], extra_model_outputs={key: [0.5]}
        )
    with pytest.raises(UnstorableValueError, match="lone surrogate"):
        _encoded(episode)
    _encoded(SingleAgentEpisode(observations=[{"ké": 1}], actions=[], rewards=[]))  # UTF-8 is


def _nested(depth: int) -> Any:
    item: Any = 0
    for _ in range(depth):
        item = {"a": item}
    return item


def test_the_deepest_column_arrow_writes_is_stored_and_one_level_more_refused(tmp_path):
    # Mutants: the depth limit's ``>`` read as ``>=``, the limit raised to 64 (Arrow's IPC
    # writer then fails part-way), and the type depth counting its last, empty level.
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, UnstorableValueError, read_episodes

    def episode(id_: str, depth: int) -> SingleAgentEpisode:
        item = _nested(depth)
        return SingleAgentEpisode(id_, observations=[item, item], actions=[0], rewards=[1.0])

    deepest = episode("deepest", 63)
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(deepest)
        with pytest.raises(UnstorableValueError, match="nested too deeply for an Arrow column"):
            writer.write(episode("deeper", 64))
    assert list(read_episodes(tmp_path / "ds")) == [deepest]


def _structure(depth: int) -> Any:
    node: Any = "*"
    for _ in range(depth):
        node = {"dict": [["a", node]]}
    return node


@pytest.mark.parametrize("read", ["skeleton_of", "skeleton_paths"])
def test_structures_as_deep_as_the_encoder_writes_are_read_and_deeper_ones_refused(read):
    # Mutants: the skeleton's depth guard at 63 (a structure the v1 encoder writes, 64
    # levels, refused) or at 65 (one no writer makes read as sound).
    from episodes.io import shard_codec
    from episodes.io.errors import CorruptDatasetError

    getattr(shard_codec, read)(_structure(64), "x")
    with pytest.raises(CorruptDatasetError, match="nested too deeply"):
        getattr(shard_codec, read)(_structure(65), "x")


@pytest.mark.parametrize(("last_t", "stored"), [(2**63 - 1, True), (2**63, False)])
def test_time_steps_up_to_the_largest_int64_are_stored(last_t, stored):
    # Mutant: the t column's upper bound checked on ``first_t + rows`` (one past the last
    # row's step): an episode whose last row is at 2**63 - 1 refused.
    from episodes import SingleAgentEpisode
    from episodes.io import UnstorableValueError

    episode = SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        t_started=last_t - 2,
        len_lookback_buffer=0,
    )
    if stored:
        enc, _ = _encoded(episode)
        assert enc.columns["t"].to_pylist() == [last_t - 2, last_t - 1, last_t]
    else:
        with pytest.raises(UnstorableValueError, match="int64 t column"):
            _encoded(episode)
