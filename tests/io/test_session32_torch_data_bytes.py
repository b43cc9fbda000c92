"""Torch datasets: decompressed memory bounded in bytes; pieces with other extras refused early."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, Dataset, DatasetError, DatasetWriter, merge
from episodes.io.shard_columns import plan_columns
from episodes.io.torch_data import SequenceDataset, TransitionDataset, _UncachedViews

FRAME = (16, 32, 32)  # 16 KiB a frame: a piece of 13 observations is about 208 KiB
PIECES = 40


def _frames(i: int, n: int) -> np.ndarray:
    obs = np.zeros((n, *FRAME), np.uint8)
    obs[:, 0, 0, 0] = np.arange(n)
    obs[:, 1, 1, 1] = i
    return obs


def _write(path, *, compression=None, data_format="arrow"):
    with DatasetWriter(path, compression=compression, data_format=data_format, sync=False) as w:
        for i in range(PIECES):
            w.write(
                SingleAgentEpisode(
                    f"e{i}",
                    observations=_frames(i, 13),
                    actions=np.arange(12, dtype=np.int64),
                    rewards=np.full(12, i, np.float32),
                    extra_model_outputs={"logp": np.linspace(0, 1, 12, dtype=np.float32)},
                    terminated=True,
                    len_lookback_buffer=0,
                ).to_numpy()
            )
    return path


def _arrow_growth(data, indices) -> int:
    before = pa.total_allocated_bytes()
    for i in indices:
        data[int(i)]
    return pa.total_allocated_bytes() - before


def test_compressed_plans_keep_no_more_than_the_byte_budget(tmp_path):
    path = _write(tmp_path / "z", compression="zstd")
    piece = 13 * int(np.prod(FRAME))
    budget = 4 * piece
    data = TransitionDataset(path, max_cached_bytes=budget)
    order = np.random.default_rng(0).permutation(len(data))
    growth = _arrow_growth(data, order)
    # Every piece was read; without the bound the plans (and the shard's views) kept all 40
    # pieces decompressed. With it: the budget, plus the shard's last 4 batches.
    assert growth < budget + 6 * piece < PIECES * piece / 2
    assert data._pinned <= budget


def test_uncompressed_plans_are_kept_as_before(tmp_path):
    path = _write(tmp_path / "u")
    data = TransitionDataset(path, max_cached_bytes=0)
    _arrow_growth(data, range(len(data)))
    # Their views are the mapped file: nothing pinned, so none is evicted for bytes.
    assert data._pinned == 0 and len(data._plans) == PIECES


@pytest.mark.parametrize(
    ("compression", "data_format", "budget"),
    [
        (None, "arrow", 0),
        ("zstd", "arrow", 0),
        ("zstd", "arrow", 1),
        ("zstd", "arrow", 1 << 40),
        (None, "parquet", 0),
        ("zstd", "parquet", 0),
    ],
)
def test_items_do_not_depend_on_the_budget(tmp_path, compression, data_format, budget):
    path = _write(tmp_path / "d", compression=compression, data_format=data_format)
    small = SequenceDataset(path, length=3, max_cached_bytes=budget)
    order = np.random.default_rng(1).permutation(len(small))
    for index in order[:150]:
        item = small[int(index)]
        i, t = divmod(int(index), 10)  # 10 windows of 3 steps in 12
        np.testing.assert_array_equal(item["obs"], _frames(i, 13)[t : t + 4])
        np.testing.assert_array_equal(item["actions"], np.arange(t, t + 3))
        np.testing.assert_array_equal(item["rewards"], np.full(3, i, np.float32))
        want = np.linspace(0, 1, 12, dtype=np.float32)[t : t + 3]
        np.testing.assert_array_equal(item["extra_model_outputs"]["logp"], want)
        assert item["terminated"].tolist() == [False, False, t == 9]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1", None])
def test_max_cached_bytes_is_checked(tmp_path, bad):
    path = _write(tmp_path / "d")
    for make in (
        lambda: TransitionDataset(path, max_cached_bytes=bad),
        lambda: SequenceDataset(path, length=2, max_cached_bytes=bad),
    ):
        with pytest.raises(ValueError, match="max_cached_bytes must be an int >= 0"):
            make()


def test_a_pickled_dataset_starts_with_no_plans(tmp_path):
    data = TransitionDataset(_write(tmp_path / "z", compression="zstd"), max_cached_bytes=1 << 30)
    data[0], data[20]
    assert data._pinned > 0
    copy = pickle.loads(pickle.dumps(data))
    assert (copy._pinned, len(copy._plans), copy.max_cached_bytes) == (0, 0, 1 << 30)
    np.testing.assert_array_equal(copy[20]["obs"], data[20]["obs"])


def _odd_episodes():
    box = np.arange(6, dtype=">f4").reshape(3, 2)  # big-endian
    return [
        SingleAgentEpisode(
            "numpy",
            observations={"a": box, "b": np.array([True, False, True])},
            actions=np.array(["x", "yy"]),
            rewards=np.array([1.0, 2.0], ">f8"),
            extra_model_outputs={"h": np.zeros((2, 0, 3), np.int16)},
            len_lookback_buffer=0,
        ).to_numpy(),
        SingleAgentEpisode(
            "lists",
            observations=[[0.5, 1.0], [1.5, 2.0], [2.5, 3.0]],
            actions=[0, 1],
            rewards=[1, 2],
            infos=[{"k": 1}, {"k": 2}, {"k": 3}],
            len_lookback_buffer=1,
        ),
        SingleAgentEpisode("empty", observations=[np.zeros(3, np.uint8)]).to_numpy(),
    ]


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_uncached_views_equal_the_shards_own(tmp_path, compression, data_format):
    with DatasetWriter(tmp_path / "d", compression=compression, data_format=data_format) as w:
        w.write_many(_odd_episodes())
    reader = Dataset(tmp_path / "d")
    for i in range(len(reader)):
        shard, j = reader.locate(i)
        k = shard.part_of(j)[0]
        for info in shard.entry_of(j)["leaves"].values():
            fresh, cached = _UncachedViews(shard).view(info, k), shard.view(info, k)
            assert fresh.dtype == cached.dtype and fresh.shape == cached.shape
            np.testing.assert_array_equal(fresh, cached)
        plans, theirs = plan_columns(_UncachedViews(shard), j), plan_columns(shard, j)
        assert plans.keys() == theirs.keys()
        for name in ("observations", "actions", "rewards"):
            n = plans[name].size - plans[name].lookback
            a, b = plans[name].take(0, n), theirs[name].take(0, n)
            assert repr(a) == repr(b)


def _piece(id_, extras):
    return SingleAgentEpisode(
        id_,
        observations=[np.zeros(2, np.float32)] * 4,
        actions=[0] * 3,
        rewards=[1.0] * 3,
        extra_model_outputs={k: [0.0] * 3 for k in extras},
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda p: TransitionDataset(p),
        lambda p: TransitionDataset(p, n_step=3),
        lambda p: SequenceDataset(p, length=2),
    ],
)
def test_pieces_with_other_extras_are_refused_at_the_first_item_of_the_other(tmp_path, make):
    for name, extras in (("expert", ["action_logp"]), ("random", [])):
        with DatasetWriter(tmp_path / name) as w:
            w.write(_piece(name, extras))
    merge([tmp_path / "expert", tmp_path / "random"], tmp_path / "mixed")
    data = make(tmp_path / "mixed")  # made from the manifest alone: no index or data read
    assert "extra_model_outputs" in data[0]
    with pytest.raises(DatasetError) as caught:  # not a KeyError inside default_collate
        data[len(data) - 1]
    text = str(caught.value)
    for part in ("'expert'", "'random'", "['action_logp'] and []", "pieces 0 ", " and 1 "):
        assert part in text


def test_pieces_with_the_same_extras_in_any_order_are_taken(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(_piece("a", ["x", "y"]))
        w.write(_piece("b", ["y", "x"]))
        # No steps and a piece too short for a window: they give no items, so no batch.
        w.write(SingleAgentEpisode("c", observations=[np.zeros(2, np.float32)]))
    for data in (TransitionDataset(tmp_path / "d"), SequenceDataset(tmp_path / "d", length=3)):
        batch = next(iter(torch.utils.data.DataLoader(data, batch_size=len(data))))
        assert sorted(batch["extra_model_outputs"]) == ["x", "y"]


def test_a_piece_giving_no_items_is_not_compared(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(_piece("long", ["x"]))
        short = SingleAgentEpisode(  # the same column types but for its extras
            "short",
            observations=[np.zeros(2, np.float32)] * 2,
            actions=[0],
            rewards=[1.0],
            len_lookback_buffer=0,
        )
        w.write(short)
    data = SequenceDataset(tmp_path / "d", length=3)  # "short" has 1 step: no window
    assert len(data) == 1
    transitions = TransitionDataset(tmp_path / "d")
    transitions[0]
    with pytest.raises(DatasetError, match="'long'.*'short'"):
        transitions[len(transitions) - 1]


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
@pytest.mark.parametrize("damaged", ["index", "data"])
def test_a_damaged_shard_is_still_refused_at_its_first_item(tmp_path, data_format, damaged):
    with DatasetWriter(tmp_path / "d", data_format=data_format, shard_bytes=1) as w:
        w.write_many([_piece("a", ["x"]), _piece("b", ["x"])])
    shard = Dataset(tmp_path / "d").shards[1]
    suffix = ".json" if damaged == "index" else f".{data_format}"
    (victim,) = (tmp_path / "d").rglob(shard.name + suffix)
    raw = bytearray(victim.read_bytes())
    raw[-4:] = b"\0" * 4  # the index's closing text, the data file's footer magic
    victim.write_bytes(bytes(raw))
    # Made from the manifest and the intact indexes, as before: no data file is read.
    data = TransitionDataset(tmp_path / "d")
    assert float(data[0]["rewards"]) == 1.0
    with pytest.raises(CorruptDatasetError):
        data[len(data) - 1]


@pytest.mark.parametrize("make", [TransitionDataset, SequenceDataset])
def test_a_pickle_of_an_older_build_still_reads(tmp_path, make):
    path = _write(tmp_path / "d")
    dataset = make(path) if make is TransitionDataset else make(path, length=2)
    state = dataset.__getstate__()
    for newer in ("_shards", "max_cached_bytes", "_pinned"):  # fields older builds lacked
        state.pop(newer)
    old = make.__new__(make)
    old.__setstate__(state)
    fresh = pickle.loads(pickle.dumps(dataset))
    for key, value in fresh[0].items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(old[0][key], value)
