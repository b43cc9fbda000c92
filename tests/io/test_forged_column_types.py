"""Forged v2 shards (every checksum recomputed) whose columns have other than plain types.

An Arrow extension type runs the registered class's code on a column's values (Ray Data
registers one whose values are unpickled): a shard naming one anywhere is refused when it is
opened, on every read path, before any value is converted. A test extension type here flags
any conversion of its values. Columns the reader converts to Python (JSON texts, the blob)
must have their exact plain type too. Also: the pyarrow recipe of docs/format.md counts each
step once when pieces carry lookback.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetWriter,
    dataset_info,
    load_episode,
    read_episodes,
    validate_dataset,
)
from episodes.io.manifest_lines import seal_lines

_NAME = "episodes-test.flagging"
CONVERTED: list[str] = []  # what converted a value of a flagging column


class _FlagScalar(pa.ExtensionScalar):
    def as_py(self, *args, **kwargs):
        CONVERTED.append("as_py")
        return self.value.as_py() if self.value is not None else None


class _FlagArray(pa.ExtensionArray):
    def to_pylist(self, *args, **kwargs):
        CONVERTED.append("to_pylist")
        return self.storage.to_pylist()

    def to_numpy(self, *args, **kwargs):
        CONVERTED.append("to_numpy")
        return self.storage.to_numpy(*args, **kwargs)


class _Flagging(pa.ExtensionType):
    def __init__(self, storage: pa.DataType):
        super().__init__(storage, _NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        # Building the type runs code on the file's bytes (Ray's tensor type unpickles them):
        # a shard naming an extension is refused before pyarrow builds its schema.
        CONVERTED.append("deserialize")
        return cls(storage_type)

    def __arrow_ext_scalar_class__(self):
        return _FlagScalar

    def __arrow_ext_class__(self):
        return _FlagArray


@pytest.fixture
def flagging():
    pa.register_extension_type(_Flagging(pa.null()))
    CONVERTED.clear()
    yield CONVERTED
    pa.unregister_extension_type(_NAME)
    CONVERTED.clear()


def _episode() -> SingleAgentEpisode:
    """Every kind of column: nested leaves, JSON (actions, infos), a blob, extras."""
    return SingleAgentEpisode(
        "a",
        observations=[{"pos": np.array([i, i], np.float32), "n": i} for i in range(3)],
        actions=[1, {"a": 1}],  # mixed items: a JSON column
        rewards=[1.0, 2.0],
        infos=[{"k": np.float32(1)}, {}, {}],  # a numpy value: the blob column is filled
        extra_model_outputs={"vf": [0.5, 0.25]},
        len_lookback_buffer=0,
    )


def _dataset(tmp_path: Path, data_format: str = "arrow") -> Path:
    root = tmp_path / "ds"
    with DatasetWriter(root, data_format=data_format) as w:
        w.write(_episode())
    return root


def _lines(root: Path) -> list[dict]:
    out = [json.loads(line) for line in (root / "manifest.jsonl").read_bytes().splitlines()]
    for obj in out:
        obj.pop("crc32")
    return out


def _replace(array: pa.Array, path: list[str], make) -> tuple[pa.Array, pa.Field]:
    """``array`` with its leaf at ``path`` (struct fields) replaced by ``make(leaf)``."""
    if not path:
        return make(array)
    fields, arrays = [], []
    for i in range(array.type.num_fields):
        child = array.type.field(i)
        if child.name == path[0]:
            new, field = _replace(array.field(i), path[1:], make)
            fields.append(field.with_name(child.name))
            arrays.append(new)
        else:
            fields.append(child)
            arrays.append(array.field(i))
    return pa.StructArray.from_arrays(arrays, fields=fields), pa.field("x", pa.struct(fields))


def _as_extension(leaf: pa.Array) -> tuple[pa.Array, pa.Field]:
    kind = _Flagging(leaf.type)
    return pa.ExtensionArray.from_storage(kind, leaf), pa.field("x", kind)


def _named_unregistered(leaf: pa.Array) -> tuple[pa.Array, pa.Field]:
    """A plain column whose field names an extension no module registered (in this process)."""
    metadata = {b"ARROW:extension:name": b"some.other.extension", b"ARROW:extension:metadata": b""}
    return leaf, pa.field("x", leaf.type, metadata=metadata)


def _forge(root: Path, path: list[str], make) -> None:
    """Rewrites the shard's data file with one column changed; every checksum recomputed."""
    lines = _lines(root)
    name, fmt = lines[1]["shard"], lines[1]["data_format"]
    data_path = root / "shards" / f"{name}.{fmt}"
    index_path = root / "shards" / f"{name}.json"
    if fmt == "arrow":
        reader = pa.ipc.open_file(data_path)
        batches = [reader.get_batch(k) for k in range(reader.num_record_batches)]
    else:
        batches = pq.read_table(data_path).to_batches()
    out, schema = [], None
    for batch in batches:
        k = batch.schema.get_field_index(path[0])
        column, field = _replace(batch.column(k), path[1:], make)
        schema = batch.schema.set(k, field.with_name(path[0]))
        columns = [column if i == k else batch.column(i) for i in range(batch.num_columns)]
        out.append(pa.RecordBatch.from_arrays(columns, schema=schema))
    if fmt == "arrow":
        with pa.ipc.new_file(data_path, schema) as writer:
            for batch in out:
                writer.write_batch(batch)
    else:
        pq.write_table(pa.Table.from_batches(out, schema), data_path)
    raw = data_path.read_bytes()
    index = json.loads(index_path.read_text())
    index["data"].update(crc32=zlib.crc32(raw), size=len(raw))
    index_raw = json.dumps(index).encode()
    index_path.write_bytes(index_raw)
    lines[1].update(
        data_size=len(raw),
        index_size=len(index_raw),
        index_sha256=hashlib.sha256(index_raw).hexdigest(),
    )
    lines[1].pop("prev", None)
    (root / "manifest.jsonl").write_bytes(seal_lines(lines))


READS = {
    "read_episodes": lambda root: list(read_episodes(root)),
    "read_episodes_verify": lambda root: list(read_episodes(root, verify=True)),
    "load_episode": lambda root: load_episode(root, "a"),
    "Dataset.episode": lambda root: Dataset(root).episode(0),
    "Dataset.steps": lambda root: Dataset(root).steps(0, 0, 2),
    "dataset_info": lambda root: dataset_info(root),
}

COLUMNS = {
    "blob": ["blob"],
    "json_actions": ["actions"],
    "json_infos": ["infos"],
    "leaf": ["rewards"],
    "nested_leaf": ["observations", "pos"],
    "extra_model_output": ["extra_model_outputs", "vf"],
    "unread_t": ["t"],
    "unread_episode_id": ["episode_id"],
}


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
@pytest.mark.parametrize("column", list(COLUMNS), ids=list(COLUMNS))
def test_an_extension_typed_column_is_refused_before_any_value_is_converted(
    tmp_path, flagging, column, read
):
    root = _dataset(tmp_path)
    _forge(root, COLUMNS[column], _as_extension)
    label = "/".join(COLUMNS[column])
    with pytest.raises(CorruptDatasetError, match=f"column {label} has the Arrow extension type"):
        READS[read](root)
    assert flagging == []


@pytest.mark.parametrize("column", ["blob", "json_actions", "nested_leaf"])
def test_an_extension_typed_column_of_a_parquet_shard_is_refused(tmp_path, flagging, column):
    root = _dataset(tmp_path, "parquet")
    _forge(root, COLUMNS[column], _as_extension)
    for read in ("read_episodes", "Dataset.steps"):
        with pytest.raises(CorruptDatasetError, match="has the Arrow extension type"):
            READS[read](root)
    assert flagging == []


def test_validate_dataset_reports_an_extension_typed_column(tmp_path, flagging):
    root = _dataset(tmp_path)
    _forge(root, ["blob"], _as_extension)
    report = validate_dataset(root)
    assert not report.ok
    assert any("column blob has the Arrow extension type" in p for p in report.problems)
    assert flagging == []


def test_the_torch_datasets_refuse_an_extension_typed_column(tmp_path, flagging):
    torch_data = pytest.importorskip("episodes.io.torch_data")
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:
        w.write(
            SingleAgentEpisode(
                "a",
                observations=[0, 1, 2],
                actions=[1, 0],
                rewards=[1.0, 2.0],
                len_lookback_buffer=0,
            )
        )
    _forge(root, ["observations"], _as_extension)
    with pytest.raises(CorruptDatasetError, match="column observations has the Arrow extension"):
        torch_data.TransitionDataset(root)[0]
    assert flagging == []


@pytest.mark.parametrize("column", ["blob", "json_actions", "nested_leaf", "unread_t"])
def test_a_field_naming_an_unregistered_extension_is_refused_too(tmp_path, column):
    """Whether a name is registered depends on the process: the answer must not."""
    root = _dataset(tmp_path)
    _forge(root, COLUMNS[column], _named_unregistered)
    label = "/".join(COLUMNS[column])
    for read in ("read_episodes", "Dataset.steps"):
        with pytest.raises(CorruptDatasetError, match=f"{label} has the Arrow extension type some"):
            READS[read](root)


def _plain(kind: pa.DataType, values):
    return lambda leaf: (pa.array(values(leaf), kind), pa.field("x", kind))


PLAIN_FORGERIES = {
    # (column, new type and values, what the reader says)
    "json_as_large_binary": (
        ["actions"],
        _plain(pa.large_binary(), lambda leaf: [b'"x"'] * len(leaf)),
        "JSON column actions is malformed",
    ),
    "json_as_string": (
        ["actions"],
        _plain(pa.string(), lambda leaf: ['"x"'] * len(leaf)),
        "JSON column actions is malformed",
    ),
    "json_null_in_its_rows": (
        ["actions"],
        _plain(pa.large_string(), lambda leaf: [None] * len(leaf)),
        "JSON column actions is malformed|bad JSON item",
    ),
    "blob_as_binary": (
        ["blob"],
        _plain(pa.binary(), lambda leaf: leaf.to_pylist()),
        "column blob has Arrow type binary, expected large_binary",
    ),
    "blob_as_large_string": (
        ["blob"],
        _plain(pa.large_string(), lambda leaf: ["x"] * len(leaf)),
        "column blob has Arrow type large_string, expected large_binary",
    ),
}


@pytest.mark.parametrize("read", ["read_episodes", "Dataset.episode", "Dataset.steps"])
@pytest.mark.parametrize("case", list(PLAIN_FORGERIES), ids=list(PLAIN_FORGERIES))
def test_a_column_of_another_plain_type_is_corrupt_on_every_read(tmp_path, case, read):
    """A JSON column or blob of another type is a CorruptDatasetError, not a raw TypeError."""
    path, make, match = PLAIN_FORGERIES[case]
    root = _dataset(tmp_path)
    _forge(root, path, make)
    with pytest.raises(CorruptDatasetError, match=match):
        READS[read](root)


def test_piece_rows_from_t_started_count_each_step_once_as_the_reader_does(tmp_path):
    """docs/format.md's recipe: a piece's lookback rows (t < its t_started) are left out."""
    root = tmp_path / "ds"
    first = SingleAgentEpisode(
        "e", observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    second = first.cut(len_lookback_buffer=2)  # repeats the first piece's two steps
    second.add_env_step(3, 1, 4.0)
    third = second.cut(len_lookback_buffer=1)
    third.add_env_step(4, 0, 8.0, terminated=True)
    other = SingleAgentEpisode(
        "o", observations=[5, 6], actions=[0], rewards=[16.0], len_lookback_buffer=0
    )
    with DatasetWriter(root, shard_bytes=1) as w:  # a shard per piece
        w.write_many([first, second, other, third])
    totals: dict[str, tuple[float, int]] = {}
    lines = (root / "manifest.jsonl").read_text().splitlines()
    for line in lines[1:]:
        shard = json.loads(line)
        name = root / "shards" / shard["shard"]
        table = pa.ipc.open_file(f"{name}.arrow").read_all()
        index = json.loads(Path(f"{name}.json").read_text())
        starts = [piece[1] for piece in shard["episodes"]]
        t_started = np.repeat(starts, [e["rows"][1] for e in index["episodes"]])
        steps = table.filter(pa.compute.greater_equal(table.column("t"), pa.array(t_started)))
        aggregate = [("rewards", "sum"), ("rewards", "count")]
        for row in steps.group_by("episode_id").aggregate(aggregate).to_pylist():
            ret, n = totals.get(row["episode_id"], (0.0, 0))
            totals[row["episode_id"]] = (
                ret + (row["rewards_sum"] or 0.0),
                n + row["rewards_count"],
            )
    library = {e.id_: (e.ret, e.length) for e in dataset_info(root).episodes}
    assert totals == library == {"e": (15.0, 4), "o": (16.0, 1)}
