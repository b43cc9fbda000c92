"""Minari interop against hostile or unusual input: Arrow extension types in a Minari file,
flags that end an episode mid-way, a relative ``MINARI_DATASETS_PATH``, spaces Minari cannot
store. Every dataset here is a few steps long.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces as S

pytest.importorskip("minari")

import pyarrow as pa  # noqa: E402
import pyarrow.ipc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import (  # noqa: E402
    DatasetError,
    DatasetWriter,
    UnsafeDataError,
    export_minari,
    import_minari,
    read_episodes,
)

EXT_NAME = b"ARROW:extension:name"
DICT = S.Dict({"a": S.Discrete(3), "b": S.Box(-1, 1, (2,), np.float32)})


def ours(path: Path, space: Any = None, obs: Any = None) -> Path:
    space = S.Discrete(3) if space is None else space
    obs = [0, 1, 2] if obs is None else obs
    with DatasetWriter(path) as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=obs,
                actions=[1, 0],
                rewards=[1.0, 0.5],
                infos=[{"k": 1.0}] * 3,
                terminated=True,
                observation_space=space,
                action_space=S.Discrete(2),
                len_lookback_buffer=0,
            )
        )
    return path


# ------------------------------------------- 1: a file's extension type runs the type's code
CONVERTED: list[str] = []  # what converting a value of the test's extension type ran


class _FlagScalar(pa.ExtensionScalar):
    def as_py(self, **kwargs: Any) -> Any:
        CONVERTED.append("as_py")
        return super().as_py(**kwargs)


class _FlagArray(pa.ExtensionArray):
    def to_numpy(self, *args: Any, **kwargs: Any) -> Any:
        CONVERTED.append("to_numpy")
        return self.storage.to_numpy(zero_copy_only=False)

    def to_pylist(self, *args: Any, **kwargs: Any) -> Any:
        CONVERTED.append("to_pylist")
        return self.storage.to_pylist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        CONVERTED.append("__array__")
        return np.asarray(self.storage.to_numpy(zero_copy_only=False), dtype=dtype)


class FlagType(pa.ExtensionType):
    """Stands in for Ray's pickled-object type: converting a value runs this type's code."""

    def __init__(self, storage: pa.DataType) -> None:
        super().__init__(storage, "episodes-tests.flag")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage: pa.DataType, serialized: bytes) -> FlagType:
        CONVERTED.append("deserialize")  # building the type from the file's bytes runs code too
        return cls(storage)

    def __arrow_ext_class__(self) -> type:
        return _FlagArray

    def __arrow_ext_scalar_class__(self) -> type:
        return _FlagScalar


@pytest.fixture
def flag_type():
    pa.register_extension_type(FlagType(pa.null()))
    CONVERTED.clear()
    yield
    pa.unregister_extension_type("episodes-tests.flag")
    CONVERTED.clear()


def _flagged(array: pa.Array) -> pa.Array:
    return pa.ExtensionArray.from_storage(FlagType(array.type), array)


def _in_struct(array: pa.Array, name: str) -> pa.Array:
    fields = [array.type.field(i) for i in range(array.type.num_fields)]
    children = [
        _flagged(array.field(i)) if f.name == name else array.field(i) for i, f in enumerate(fields)
    ]
    names = [f.name for f in fields]
    return pa.StructArray.from_arrays(children, names=names)


def _extra(table: pa.Table) -> pa.Table:
    return table.append_column("extra", _flagged(pa.array(range(table.num_rows))))


def _listed(table: pa.Table) -> pa.Table:
    items = pa.ListArray.from_arrays(pa.array(range(table.num_rows + 1)), pa.array([0] * 99))
    index = table.schema.get_field_index("infos")
    infos = table.column(index).combine_chunks()
    # A list of the extension type inside the infos struct.
    column = pa.StructArray.from_arrays(
        [infos.field(0), pa.ListArray.from_arrays(items.offsets, _flagged(items.values))],
        names=["k", "listed"],
    )
    return table.set_column(index, "infos", column)


def _column(name: str, inner: str | None = None) -> Any:
    def change(table: pa.Table) -> pa.Table:
        index = table.schema.get_field_index(name)
        column = table.column(index).combine_chunks()
        new = _flagged(column) if inner is None else _in_struct(column, inner)
        return table.set_column(index, name, new)

    return change


def _named_only(table: pa.Table) -> pa.Table:
    """Ray's pickled-object type named in field metadata, as a file names it (none registered)."""
    index = table.schema.get_field_index("observations")
    name = {EXT_NAME: b"ray.data.arrow_pickled_object"}
    column = pa.array([b"\x80\x04N."] * table.num_rows, pa.large_binary())  # pickle of None
    return table.set_column(
        index, pa.field("observations", pa.large_binary(), metadata=name), column
    )


def _named_in_struct(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index("infos")
    infos = table.column(index).combine_chunks()
    name = {EXT_NAME: b"some.other"}
    field = pa.field("infos", pa.struct([pa.field("k", infos.type.field(0).type, metadata=name)]))
    return table.set_column(index, field, pa.StructArray.from_arrays([infos.field(0)], ["k"]))


# name: (observation space, table change, the column the error names)
EXTENSIONS = {
    "observations": (None, _column("observations"), "'observations'"),
    "dict_field": (DICT, _column("observations", "a"), "'observations'"),
    "rewards": (None, _column("rewards"), "'rewards'"),
    "terminations": (None, _column("terminations"), "'terminations'"),
    "infos_field": (None, _column("infos", "k"), "'infos'"),
    "list_in_infos": (None, _listed, "'infos'"),
    "column_minari_skips": (None, _extra, "'extra'"),
    "named_not_registered": (None, _named_only, "'observations'"),
    "named_in_a_struct": (None, _named_in_struct, "'infos'"),
}


def _minari_of(tmp_path: Path, space: Any, data_format: str = "arrow") -> Path:
    obs = [{"a": k, "b": np.zeros(2, np.float32)} for k in range(3)] if space == DICT else None
    if data_format == "arrow":
        export_minari(ours(tmp_path / "ours", space, obs), "hunt/x-v0", root=tmp_path / "m")
        return tmp_path / "m" / "hunt" / "x-v0"
    from minari.data_collector import EpisodeBuffer

    buffer = EpisodeBuffer(
        id=0,
        observations=np.array([0, 1, 2]),
        actions=np.array([1, 0]),
        rewards=[1.0, 0.5],
        terminations=[False, True],
        truncations=[False, False],
    )
    _minari_made(tmp_path, "hunt/x-v0", buffer, S.Discrete(3), data_format)
    return tmp_path / "m" / "hunt" / "x-v0"


def _minari_made(tmp_path: Path, dataset_id: str, buffer: Any, space: Any, data_format: str):
    """Minari's own writer makes ``dataset_id`` of one buffer under ``tmp_path / "m"``."""
    import minari

    os.environ["MINARI_DATASETS_PATH"] = str(tmp_path / "m")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            minari.create_dataset_from_buffers(
                dataset_id,
                [buffer],
                observation_space=space,
                action_space=S.Discrete(2),
                data_format=data_format,
            )
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def _rewrite(dataset: Path, change: Any) -> None:
    (part,) = (dataset / "data" / "0").glob("part-0.*")
    if part.suffix == ".parquet":
        pq.write_table(change(pq.read_table(part)), part)
        return
    table = change(pa.ipc.open_file(part).read_all())
    with pa.ipc.new_file(part, table.schema) as out:
        out.write_table(table)


@pytest.mark.parametrize("space, change, column", EXTENSIONS.values(), ids=EXTENSIONS.keys())
def test_an_extension_type_is_refused_before_any_value_converts(
    tmp_path, flag_type, space, change, column
):
    dataset = _minari_of(tmp_path, space)
    _rewrite(dataset, change)
    refusal = _import_refusal(dataset, tmp_path / "back")
    assert CONVERTED == []  # no value went through the type's code
    assert isinstance(refusal, UnsafeDataError), refusal
    named = f"column {column[:-1]}(/[^']*)?' holds the Arrow extension"  # nested: 'top/field'
    assert re.search(named, str(refusal)), refusal
    assert not (tmp_path / "back").exists()


def _import_refusal(dataset: Path, dst: Path) -> Exception | None:
    try:
        import_minari(dataset, dst)
    except DatasetError as err:
        return err
    return None


def test_an_extension_type_in_a_parquet_file_is_refused(tmp_path, flag_type):
    dataset = _minari_of(tmp_path, None, data_format="parquet")
    _rewrite(dataset, _column("observations"))
    refusal = _import_refusal(dataset, tmp_path / "back")
    assert CONVERTED == []
    assert isinstance(refusal, UnsafeDataError), refusal
    assert "column 'observations' holds the Arrow extension" in str(refusal)


def _as_type(name: str, t: pa.DataType) -> Any:
    def change(table: pa.Table) -> pa.Table:
        index = table.schema.get_field_index(name)
        return table.set_column(index, name, table.column(index).cast(t))

    return change


def _renamed(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index("observations")
    column = table.column(index).combine_chunks()
    renamed = pa.StructArray.from_arrays([column.field(0), column.field(1)], names=["z", "b"])
    return table.set_column(index, "observations", renamed)


def _box_as_strings(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index("observations")
    column = table.column(index).combine_chunks()
    strings = pa.array(["x"] * len(column))
    return table.set_column(
        index, "observations", pa.StructArray.from_arrays([column.field(0), strings], ["a", "b"])
    )


WRONG_TYPES = {
    "discrete_as_strings": (None, _as_type("observations", pa.string()), "'observations'"),
    "rewards_as_strings": (None, _as_type("rewards", pa.string()), "'rewards'"),
    "flags_as_strings": (None, _as_type("truncations", pa.string()), "'truncations'"),
    "dict_missing_a_key": (DICT, _renamed, "'observations'"),
    "box_as_strings": (DICT, _box_as_strings, r"'observations'\['b'\]"),
    "no_rewards": (None, lambda t: t.drop_columns(["rewards"]), "'rewards'"),
}


@pytest.mark.parametrize("space, change, column", WRONG_TYPES.values(), ids=WRONG_TYPES.keys())
def test_a_column_of_another_type_than_the_space_is_refused(tmp_path, space, change, column):
    dataset = _minari_of(tmp_path, space)
    _rewrite(dataset, change)
    with pytest.raises(DatasetError, match=f"column {column}"):
        import_minari(dataset, tmp_path / "back")
    assert not (tmp_path / "back").exists()


def test_extension_types_are_found_through_every_nesting():
    from episodes.io.arrow_types import extension_in_schema

    ext = FlagType(pa.int64())
    for t in (
        pa.map_(pa.string(), ext),
        pa.large_list(pa.struct({"a": ext})),
        pa.list_(ext, 3),
        pa.dense_union([pa.field("a", ext)]),
        pa.run_end_encoded(pa.int32(), ext),
    ):
        found = extension_in_schema(pa.schema({"c": t}))
        assert found is not None and found[1] == ext.extension_name, t
    assert extension_in_schema(pa.schema({"c": pa.dictionary(pa.int32(), pa.string())})) is None


def test_a_schema_is_checked_once():
    from episodes.io.minari_checks import ColumnTypes

    types = ColumnTypes(S.Discrete(3), S.Discrete(2), jpeg_encoding=True)
    schema = pa.schema(
        {
            "observations": pa.int64(),
            "actions": pa.int64(),
            "rewards": pa.float64(),
            "terminations": pa.bool_(),
            "truncations": pa.bool_(),
        }
    )
    types.check(schema, "one")
    types.check(pa.schema(list(schema)), "two")  # an equal schema: not walked again
    assert len(types._checked) == 1
    # Equal but for a field's metadata naming an extension type: checked, and refused.
    named = schema.set(0, pa.field("observations", pa.int64(), metadata={EXT_NAME: b"x.y"}))
    with pytest.raises(UnsafeDataError, match="three: column 'observations' holds .*'x.y'"):
        types.check(named, "three")


# Minari's own datasets (its defaults: JPEG images) of every space it stores still import.
IMAGE = S.Box(0, 255, (32, 32, 3), np.uint8)
MINARI_SPACES = {
    "jpeg_image": (IMAGE, list(np.zeros((3, 32, 32, 3), np.uint8))),
    "dict": (DICT, {"a": np.array([0, 1, 2]), "b": np.zeros((3, 2), np.float32)}),
    "tuple_text": (
        S.Tuple((S.Text(4), S.MultiBinary(2))),
        (["ab", "c", "d"], np.zeros((3, 2), np.int8)),
    ),
    "multidiscrete": (S.MultiDiscrete([2, 3]), np.zeros((3, 2), np.int64)),
}


@pytest.mark.parametrize("space, obs", MINARI_SPACES.values(), ids=MINARI_SPACES.keys())
def test_minari_datasets_of_every_space_import(tmp_path, space, obs):
    from minari.data_collector import EpisodeBuffer

    buffer = EpisodeBuffer(
        id=0,
        observations=obs,
        actions=np.array([1, 0]),
        rewards=[1.0, 0.5],
        terminations=[False, True],
        truncations=[False, False],
    )
    # Minari's other defaults: JPEG image Boxes
    _minari_made(tmp_path, "hunt/ok-v0", buffer, space, "arrow")
    assert import_minari(tmp_path / "m" / "hunt" / "ok-v0", tmp_path / "back") == 1
    (back,) = read_episodes(tmp_path / "back")
    assert len(back) == 2 and back.is_terminated


# -------------------------------------- 2: flags before the last step were dropped silently
def _minari_flags(tmp_path: Path, terminations: list[bool], truncations: list[bool]) -> Path:
    from minari.data_collector import EpisodeBuffer

    buffer = EpisodeBuffer(
        id=0,
        observations=np.array([0, 1, 2, 3]),
        actions=np.array([0, 1, 0]),
        rewards=[1.0, 2.0, 3.0],
        terminations=terminations,
        truncations=truncations,
    )
    _minari_made(tmp_path, "hunt/mid-v0", buffer, S.Discrete(4), "arrow")
    return tmp_path / "m" / "hunt" / "mid-v0"


F, T = False, True
MID_FLAGS = {
    "terminated_mid_way": ([F, T, F], [F, F, F]),
    "truncated_first": ([F, F, F], [T, F, F]),
    "both_mid_way": ([F, T, F], [T, F, F]),
    "terminated_mid_and_last": ([T, F, T], [F, F, F]),
}


@pytest.mark.parametrize("terminations, truncations", MID_FLAGS.values(), ids=MID_FLAGS.keys())
def test_an_episode_ended_before_its_last_step_is_refused(tmp_path, terminations, truncations):
    dataset = _minari_flags(tmp_path, terminations, truncations)
    with pytest.raises(DatasetError, match="episode 0 is terminated or truncated before its last"):
        import_minari(dataset, tmp_path / "back")
    assert not (tmp_path / "back").exists()


@pytest.mark.parametrize("terminated", [True, False])
def test_flags_on_the_last_step_import(tmp_path, terminated):
    dataset = _minari_flags(tmp_path, [F, F, terminated], [F, F, not terminated])
    import_minari(dataset, tmp_path / "back")
    (back,) = read_episodes(tmp_path / "back")
    assert (len(back), back.is_terminated, back.is_truncated) == (3, terminated, not terminated)


# ------------------------------------------- 3: a relative MINARI_DATASETS_PATH broke export
def test_a_relative_minari_datasets_path_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MINARI_DATASETS_PATH", "minari-data")
    assert export_minari(ours(Path("ours")), "hunt/rel-v0") == 1
    assert (tmp_path / "minari-data" / "hunt" / "rel-v0" / "data" / "0").is_dir()
    assert os.environ["MINARI_DATASETS_PATH"] == "minari-data"  # as the caller set it
    assert import_minari("hunt/rel-v0", "back") == 1
    (back,) = read_episodes(tmp_path / "back")
    assert back.get_actions().tolist() == [1, 0]


# ------------------------------------------- 4: spaces Minari cannot store, refused up front
REFUSED_SPACES = {
    "dict_int_keys": (
        S.Dict({1: S.Discrete(2), 2: S.Discrete(3)}),
        [{1: 0, 2: 1}, {1: 1, 2: 2}],
        "has the key 1, not a str",
    ),
    "nested_int_key": (
        S.Dict({"a": S.Dict({3: S.Discrete(2)})}),
        [{"a": {3: 0}}, {"a": {3: 1}}],
        r"\['a'\] Dict\(3: .* has the key 3, not a str",
    ),
    "big_endian_box": (
        S.Box(-1, 1, (2,), np.dtype(">f4")),
        [np.array([0.5, 0.25], ">f4")] * 2,
        "non-native byte order dtype >f4",
    ),
    "big_endian_discrete": (
        S.Discrete(3, dtype=np.dtype(">i8")),
        [np.array(1, ">i8"), np.array(2, ">i8")],
        "non-native byte order dtype >i8",
    ),
}


@pytest.mark.parametrize("space, obs, message", REFUSED_SPACES.values(), ids=REFUSED_SPACES.keys())
def test_spaces_minari_cannot_store_are_refused_naming_them(tmp_path, space, obs, message):
    with DatasetWriter(tmp_path / "ours") as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=obs,
                actions=[0],
                rewards=[1.0],
                observation_space=space,
                action_space=S.Discrete(2),
                len_lookback_buffer=0,
            )
        )
    with pytest.raises(DatasetError, match=f"the observation space.*{message}"):
        export_minari(tmp_path / "ours", "hunt/x-v0", root=tmp_path / "m")
    assert not (tmp_path / "m").exists()
