"""Session 52: cases that hand-made mutants of ``flat_transitions``, the episode tally, the npz
export and the given columns survived in the other tests (joins of dtypes, refusals, the order
pieces are read in, empty datasets), each pinned to the behaviour the docs state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetError, DatasetWriter
from episodes.io.flat_arrays import FLAT_KEYS, flat_transitions


def episode(id_: str, obs: Any, *, numpy: bool = True, **kw: Any) -> SingleAgentEpisode:
    """A two-step episode (observations ``obs``) in numpy mode unless ``numpy`` is False."""
    kw = {"actions": [0, 1], "rewards": [1.0, 2.0], **kw}
    ep = SingleAgentEpisode(id_, observations=obs, len_lookback_buffer=0, **kw)
    return ep.to_numpy() if numpy else ep


def written(path: Any, *episodes: SingleAgentEpisode) -> Any:
    with DatasetWriter(path) as w:
        for ep in episodes:
            w.write(ep)
    return path


# ------------------------------------------------------------------- flat_transitions joins
JOINS = {
    # rewards of ints and floats join as float64 (the docs); observations of two kinds never
    "int_and_float_rewards": (
        [episode("a", [0, 1, 2], rewards=[0, 1]), episode("b", [0, 1, 2], rewards=[0.5, 1.5])],
        "rewards",
        (np.float64, [0.0, 1.0, 0.5, 1.5]),
    ),
    "int_and_float_observations": (
        [episode("a", np.int64([0, 1, 2])), episode("b", np.float64([0, 1, 2]))],
        "observations",
        r"pieces 0 \(episode 'a'\) and 1 \(episode 'b'\) hold observations",
    ),
    "complex_observations_are_numbers": (
        [episode("a", np.complex64([1, 2j, 3]))],
        "next_observations",
        (np.complex64, [2j, 3]),
    ),
    "big_endian_items_stored_one_by_one_give_native_arrays": (
        [
            episode("a", list(np.array([[1], [2], [3]], ">f4")), numpy=False),
            episode("b", list(np.array([[4], [5], [6]], ">f4")), numpy=False),
        ],
        "observations",
        (np.dtype("=f4"), [[1], [2], [4], [5]]),
    ),
    "big_endian_dict_leaves_give_native_arrays": (
        [
            episode("a", [{"x": np.array([t], ">f8")} for t in range(3)], numpy=False),
            episode("b", [{"x": np.array([t], ">f8")} for t in range(3)], numpy=False),
        ],
        "observations",
        (np.dtype("=f8"), {"x": [[0], [1], [0], [1]]}),
    ),
}


@pytest.mark.parametrize("case", JOINS)
def test_columns_join_or_are_refused_as_the_docs_say(tmp_path, case):
    episodes, key, want = JOINS[case]
    path = written(tmp_path / "d", *episodes)
    if isinstance(want, str):
        with pytest.raises(DatasetError, match=want):
            flat_transitions(path)
        return
    dtype, values = want
    got = flat_transitions(path)[key]
    leaves = got if isinstance(values, list) else got["x"]
    assert leaves.dtype == dtype and leaves.dtype.isnative
    assert (got.tolist() if isinstance(values, list) else {"x": got["x"].tolist()}) == values


def test_a_refusal_after_a_widening_names_the_piece_that_widened(tmp_path):
    path = written(
        tmp_path / "d",
        episode("a", np.float32([0, 1, 2])),
        episode("b", np.float64([0, 1, 2])),
        episode("c", np.int64([0, 1, 2])),
    )
    with pytest.raises(DatasetError, match=r"pieces 1 \(episode 'b'\) and 2 \(episode 'c'\)"):
        flat_transitions(path)


NOT_NUMBERS = {
    # items of no array leaf, and arrays of mixed rank stored one by one (0-d first)
    "empty_dicts": [{}, {}, {}],
    "mixed_rank_arrays": [np.array(0.0), np.array([1.0, 2.0]), np.array(3.0)],
}


@pytest.mark.parametrize("case", NOT_NUMBERS)
def test_items_that_are_no_flat_arrays_are_refused(tmp_path, case):
    path = written(tmp_path / "d", episode("x", NOT_NUMBERS[case], numpy=False))
    with pytest.raises(DatasetError, match=r"piece 0 \(episode 'x'\) holds observations"):
        flat_transitions(path)


def test_extra_keys_of_the_same_count_but_other_names_are_refused(tmp_path):
    path = written(
        tmp_path / "d",
        episode("a", [0, 1, 2], extra_model_outputs={"logp": [-1.0, -2.0]}),
        episode("b", [0, 1, 2], extra_model_outputs={"vf": [0.5, 0.25]}),
    )
    with pytest.raises(DatasetError, match=r"\['logp'\] and \['vf'\]"):
        flat_transitions(path, extra_model_outputs=True)


def test_extras_are_not_read_unless_asked_for(tmp_path):
    # extras no one array holds (other shapes) do not matter when they are left out
    path = written(
        tmp_path / "d",
        episode("a", [0, 1, 2], extra_model_outputs={"h": np.zeros((2, 2))}),
        episode("b", [0, 1, 2], extra_model_outputs={"h": np.zeros((2, 3))}),
    )
    flat = flat_transitions(path)
    assert set(flat) == set(FLAT_KEYS) and flat["actions"].tolist() == [0, 1, 0, 1]
    with pytest.raises(DatasetError, match="hold extra_model_outputs/h"):
        flat_transitions(path, extra_model_outputs=True)


def test_an_empty_dataset_gives_empty_float64_arrays(tmp_path):
    DatasetWriter(tmp_path / "d").close()
    flat = flat_transitions(tmp_path / "d")
    for key in FLAT_KEYS[:4]:
        assert flat[key].dtype == np.float64 and flat[key].shape == (0,)


def test_pieces_are_read_in_manifest_order(tmp_path, monkeypatch):
    path = tmp_path / "d"
    obs = np.float32([0, 1, 2, 3])
    with DatasetWriter(path, shard_bytes=1) as w:  # "a" continues after "b" began
        w.write(SingleAgentEpisode("a", observations=obs[:2], actions=[0], rewards=[1.0],
                                   len_lookback_buffer=0).to_numpy())  # fmt: skip
        w.write(episode("b", [5.0, 6.0, 7.0]))
        w.write(SingleAgentEpisode("a", observations=obs[1:], actions=[1, 0], rewards=[2.0, 3.0],
                                   t_started=1, len_lookback_buffer=0).to_numpy())  # fmt: skip
    read: list[int] = []
    steps = Dataset.steps

    def spy(self: Dataset, i: int, *args: Any, **kw: Any) -> Any:
        read.append(i)
        return steps(self, i, *args, **kw)

    monkeypatch.setattr(Dataset, "steps", spy)
    flat = flat_transitions(path)
    assert flat["rewards"].tolist() == [1.0, 2.0, 3.0, 1.0, 2.0]  # rows episode by episode
    assert read == [0, 1, 2]  # each shard once


# ------------------------------------------------------------------------------ EpisodeTally
def chunk(t0: int, t1: int, *, lookback: int = 0, **kw: Any) -> SingleAgentEpisode:
    """Steps ``[t0, t1)`` of episode "a" (reward ``t`` and info ``{"t": t}`` at step ``t``)."""
    a = t0 - lookback
    return SingleAgentEpisode(
        "a", observations=list(range(a, t1 + 1)), actions=[0] * (t1 - a),
        rewards=[float(t) for t in range(a + 1, t1 + 1)],
        infos=[{"t": t} for t in range(a, t1 + 1)],
        t_started=t0, len_lookback_buffer=lookback, **kw,
    )  # fmt: skip


TALLIES = {
    # (chunks per call, what the last call hands out: (ret, length, t_started, first, last))
    "two_chunks": ([[chunk(0, 2)], [chunk(2, 5, terminated=True)]], (15.0, 5, 0, 0, 5)),
    "two_chunks_with_lookback": (
        [[chunk(0, 2)], [chunk(2, 5, lookback=1, truncated=True)]],
        (15.0, 5, 0, 0, 5),
    ),
    "three_chunks_one_call": (
        [[chunk(1, 2), chunk(2, 3), chunk(3, 4, terminated=True)]],
        (9.0, 3, 1, 1, 4),
    ),
}


@pytest.mark.parametrize("case", TALLIES)
def test_the_tally_keeps_an_episodes_first_info_and_adds_up_its_chunks(case):
    from episodes.runner import EpisodeTally

    calls, (ret, length, t_started, first, last) = TALLIES[case]
    tally = EpisodeTally()
    for chunks in calls[:-1]:
        assert tally.add(chunks) == []
    (done,) = tally.add(calls[-1])
    assert (done.ret, done.length, done.t_started) == (ret, length, t_started)
    assert (done.first_info, done.last_info) == ({"t": first}, {"t": last})
    assert len(tally) == 0


@pytest.mark.parametrize(("start", "t_end"), [(3, 4), (1, 4)], ids=["skipped", "overlapping"])
def test_the_tally_refuses_a_chunk_that_does_not_start_where_the_last_ended(start, t_end):
    from episodes.runner import EpisodeTally

    tally = EpisodeTally()
    tally.add([chunk(0, 2)])
    with pytest.raises(ValueError, match=rf"starts at t={start}, but the tally has it up to t=2"):
        tally.add([chunk(start, t_end, terminated=True)])
    (done,) = tally.add([chunk(2, 4, terminated=True)])  # what it had is kept
    assert (done.ret, done.length) == (10.0, 4)


# ---------------------------------------------------------------- episodes export --to npz
def npz_source(path: Any) -> str:
    return str(written(path, episode("a", [0.0, 1.0, 2.0], terminated=True)))


OTHER_TARGET = {
    # options of one target, refused with the other even where their value is falsy
    "npz_with_an_empty_dataset_id": (["--to", "npz", "--out", "f.npz", "--dataset-id", ""], 2),
    "minari_with_done_only": (["--to", "minari", "--dataset-id", "a/b-v0", "--done-only"], 2),
    "minari_with_extras": (
        ["--to", "minari", "--dataset-id", "a/b-v0", "--extra-model-outputs"],
        2,
    ),
}


@pytest.mark.parametrize("case", OTHER_TARGET)
def test_options_of_the_other_target_are_refused(tmp_path, capsys, monkeypatch, case):
    from episodes.cli import main

    monkeypatch.chdir(tmp_path)
    src = npz_source(tmp_path / "src")
    flags, code = OTHER_TARGET[case]
    assert main(["export", src, *flags]) == code
    assert "only with --to" in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "f.npz").exists()


def test_npz_keys_of_list_leaves_are_numbered_as_tuples():
    from episodes.cli.npz_export import npz_arrays

    got = npz_arrays({"observations": [np.zeros(1), {"x": np.ones(1)}]})
    assert list(got) == ["observations/0", "observations/1/x"]


def _savez_after(make: Any) -> Any:
    """np.savez that first runs ``make`` (a file put at --out while the export writes)."""
    savez = np.savez

    def wrapped(*args: Any, **kw: Any) -> None:
        make()
        savez(*args, **kw)

    return wrapped


@pytest.mark.parametrize("hard_links", [True, False], ids=["links", "no_hard_links"])
def test_a_file_put_at_out_during_the_write_is_never_replaced(
    tmp_path, capsys, monkeypatch, hard_links
):
    from episodes.cli import main

    src, out = npz_source(tmp_path / "src"), tmp_path / "f.npz"
    if not hard_links:
        monkeypatch.setattr("os.link", _raise(OSError(1, "Operation not permitted")))
    monkeypatch.setattr(np, "savez", _savez_after(lambda: out.write_bytes(b"theirs")))
    assert main(["export", src, "--to", "npz", "--out", str(out)]) == 1
    assert capsys.readouterr().err.endswith("exists: pass --force to replace it\n")
    assert out.read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.npz", "src"]


def _raise(error: BaseException) -> Any:
    def raising(*args: Any, **kw: Any) -> None:
        raise error

    return raising


def test_out_refusals_come_before_the_dataset_is_read(tmp_path, capsys):
    from episodes.cli import main

    (tmp_path / "dangling.npz").symlink_to(tmp_path / "nowhere")
    (tmp_path / "a_file").write_bytes(b"")
    cases = {
        "dangling.npz": "dangling.npz exists: pass --force",
        "a_file/f.npz": "a_file/f.npz: its directory",
    }
    for out, message in cases.items():
        assert main(["export", str(tmp_path / "no_src"), "--to", "npz", "--out",
                     str(tmp_path / out)]) == 1  # fmt: skip
        assert message in capsys.readouterr().err


def test_a_full_disk_names_the_file_and_a_long_name_is_written(tmp_path, capsys, monkeypatch):
    from episodes.cli import main

    src = npz_source(tmp_path / "src")
    out = tmp_path / ("x" * 240 + ".npz")  # a temporary name of it must still fit NAME_MAX
    assert main(["export", src, "--to", "npz", "--out", str(out)]) == 0
    assert np.load(out, allow_pickle=False)["rewards"].tolist() == [1.0, 2.0]
    capsys.readouterr()
    monkeypatch.setattr(np, "savez", _raise(OSError(28, "No space left on device")))
    assert main(["export", src, "--to", "npz", "--out", str(tmp_path / "g.npz")]) == 1
    err = capsys.readouterr().err
    assert f"writing {tmp_path / 'g.npz'} failed" in err and "nothing was written" in err
    assert not (tmp_path / "g.npz").exists()


def test_an_empty_out_is_refused_as_an_empty_path(tmp_path, capsys, monkeypatch):
    from episodes.cli import main

    monkeypatch.chdir(tmp_path)
    src = npz_source(tmp_path / "src")
    assert main(["export", src, "--to", "npz", "--out", ""]) == 1
    assert (
        capsys.readouterr().err
        == "episodes: error: --out is empty (give . for the current directory)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


# ------------------------------------------------------------------------------ column_items
class Table:
    """An array-like of ``shape`` whose ``__array__`` gives ``array`` (or raises where it is
    None: a device table refusing host copies) and whose iteration gives ``rows``."""

    def __init__(self, shape: tuple[int, ...], array: Any, rows: list[Any]):
        self.shape, self.array, self.rows = shape, array, rows

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.array is None:
            raise RuntimeError("no host copies of this table")
        return np.asarray(self.array, dtype)

    def __iter__(self) -> Any:
        return iter(self.rows)


class SubTable(Table):
    """A row of a :class:`Table` that is a table itself (as a tensor's rows are tensors)."""


class NoArray:
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("no array")


def _tables() -> dict[str, tuple[Any, Any]]:
    sub = [SubTable((2,), None, []), SubTable((2,), None, [])]
    return {
        # (data, the items: a list of row values, or the TypeError's words)
        "more_items_than_rows": (
            Table((2, 2), np.eye(2), [SubTable((2,), None, [])] * 3),
            [[1.0, 0.0], [0.0, 1.0]],
        ),
        "rows_of_a_subtype_are_its_rows": (Table((2, 2), np.eye(2), sub), sub),
        "labels_of_a_table_refusing_copies": (Table((2, 2), None, ["x", "y"]), "iterates no rows"),
        "rows_of_another_shape": (Table((2, 3), None, [np.zeros(2), np.zeros(2)]), "no rows"),
        "too_many_rows_of_the_shape": (Table((2, 2), None, [np.zeros(2)] * 3), "no rows"),
        "rows_numpy_reads_no_shape_from": (Table((2, 2), None, [NoArray(), NoArray()]), "no rows"),
        "rows_of_a_table_refusing_copies": (
            Table((2, 2), None, [np.zeros(2), np.ones(2)]),
            [[0.0, 0.0], [1.0, 1.0]],
        ),
    }


@pytest.mark.parametrize("case", list(_tables()))
def test_column_items_of_array_likes_are_their_rows(case):
    from episodes.episode.given_columns import column_items

    data, want = _tables()[case]
    if isinstance(want, str):
        with pytest.raises(TypeError, match=f"observations given as a Table .*{want}"):
            column_items(data, "observations")
        return
    got = column_items(data, "observations")
    if want and isinstance(want[0], SubTable):
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
    else:
        assert [np.asarray(row).tolist() for row in got] == want


def test_column_items_of_mappings_and_of_iterations_that_fail():
    import types

    from episodes.episode.given_columns import column_items

    assert column_items({}) is None and column_items(types.MappingProxyType({})) is None
    proxy = types.MappingProxyType({"x": np.arange(2)})
    assert [{k: int(v) for k, v in item.items()} for item in column_items(proxy)] == [
        {"x": 0},
        {"x": 1},
    ]

    class Rows:  # indexable, not registered as a Sequence, no __array__: items as they are
        def __init__(self, rows: list[Any]):
            self.rows = rows

        def __len__(self) -> int:
            return len(self.rows)

        def __getitem__(self, i: int) -> Any:
            return self.rows[i]

    rows = [[1, 2, 3], [4, 5, 6]]
    got = column_items(Rows(rows))
    assert len(got) == 2 and all(a is b for a, b in zip(got, rows))

    class Broken:
        def __iter__(self) -> Any:
            raise ValueError("the file behind it is gone")

    with pytest.raises(ValueError, match="the file behind it is gone"):  # its own error, as is
        column_items(Broken(), "observations")
