"""What an offline-RL user's journey found in ``episodes.io`` and the command line.

Minari's rounding to a space's dtype (pinned) and its HDF5 datasets without h5py; which episode
of a ``write_many`` call a writer refused; ``episodes info``'s small Box bounds; the command
line's warnings; a ``metadata=`` dict.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.cli.space_text import space_text
from episodes.io import (
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    UnstorableValueError,
    dataset_info,
    load_episode,
    read_episodes,
)

ROOT = Path(__file__).resolve().parents[2]  # this checkout's episodes, in subprocesses too
F32_EDGES = [0.0, -0.0, 1e-45, -3.4028235e38, 0.1, 1 / 3]  # subnormal, extremes, inexact

# name: (space dtype, values written, values expected back (in the space's dtype), bit-exact)
MINARI_CASES = {
    "float32 values in a float32 Box come back bit for bit": (
        np.float32,
        np.float32(F32_EDGES),
        np.float32(F32_EDGES),
        True,
    ),
    "float64 values in a float64 Box come back bit for bit": (
        np.float64,
        np.float64([0.1, -0.0, 5e-324, 1 / 3, -1.7976931348623157e308, 0.2]),
        np.float64([0.1, -0.0, 5e-324, 1 / 3, -1.7976931348623157e308, 0.2]),
        True,
    ),
    "float64 values in a float32 Box are rounded to float32": (
        np.float32,
        np.float64([0.1, 0.2, 1 / 3, -0.7, 1e-46, 3.0]),
        np.float64([0.1, 0.2, 1 / 3, -0.7, 1e-46, 3.0]).astype(np.float32),
        False,
    ),
    "int values in a float32 Box are cast exactly": (
        np.float32,
        np.int64([0, -1, 2, 1 << 24, 7, -5]),
        np.float32([0, -1, 2, 1 << 24, 7, -5]),
        True,
    ),
}


def _box_episode(dtype: Any, values: np.ndarray) -> SingleAgentEpisode:
    """Observations and actions one value each of ``values`` (in Boxes of ``dtype``)."""
    box = gym.spaces.Box(-np.inf, np.inf, (1,), dtype)
    rows = values.reshape(-1, 1)
    return SingleAgentEpisode(
        "a",
        observations=list(rows),
        actions=list(rows[:-1]),
        rewards=[float(i) for i in range(len(rows) - 1)],
        terminated=True,
        len_lookback_buffer=0,
        observation_space=box,
        action_space=box,
    ).to_numpy()


@pytest.mark.parametrize(
    ("dtype", "given", "expected", "exact"), MINARI_CASES.values(), ids=MINARI_CASES
)
def test_minari_round_trip_is_exact_in_the_space_dtype_and_rounds_to_it_otherwise(
    tmp_path: Path, dtype: Any, given: np.ndarray, expected: np.ndarray, exact: bool
) -> None:
    pytest.importorskip("minari")
    from episodes.io import export_minari, import_minari

    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(_box_episode(dtype, given))
    stored = load_episode(tmp_path / "d", "a", numpy=True)
    assert stored.get_observations().dtype == given.dtype  # the dataset keeps what was given
    export_minari(tmp_path / "d", "ns/x-v0", root=tmp_path / "m")
    import_minari("ns/x-v0", tmp_path / "i", root=tmp_path / "m")
    back = load_episode(tmp_path / "i", "ns/x-v0/0", numpy=True)
    want = np.asarray(expected, dtype).reshape(-1, 1)
    for name, got, want_rows in (
        ("observations", back.get_observations(), want),
        ("actions", back.get_actions(), want[:-1]),
    ):
        assert got.dtype == np.dtype(dtype), name  # the space's dtype, as Minari stores it
        assert got.tobytes() == want_rows.tobytes(), name  # bit for bit: -0.0, subnormals
    # Exact only where the values were in the space's dtype (or cast without change).
    same = np.array_equal(back.get_observations().astype(np.float64), given.reshape(-1, 1))
    assert same == exact
    assert back.get_rewards().tolist() == stored.get_rewards().tolist()


def _hdf5_labelled_minari(tmp_path: Path) -> Path:
    """An Arrow export whose metadata says HDF5: what reading a real HDF5 dataset meets first."""
    pytest.importorskip("minari")
    import json

    from episodes.io import export_minari

    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(_box_episode(np.float32, np.float32([0.0, 1.0, 2.0])))
    export_minari(tmp_path / "d", "ns/h-v0", root=tmp_path / "m")
    data = tmp_path / "m" / "ns" / "h-v0" / "data"
    meta = json.loads((data / "metadata.json").read_text())
    meta["data_format"] = "hdf5"
    (data / "metadata.json").write_text(json.dumps(meta))
    (data / "main_data.hdf5").touch()
    return tmp_path / "m"


HDF5_WORDS = ("stored as HDF5", 'pip install "minari[hdf5]"', "pip install h5py")


def test_importing_an_hdf5_minari_dataset_without_h5py_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from episodes.io import DatasetError, import_minari

    root = _hdf5_labelled_minari(tmp_path)
    monkeypatch.setitem(sys.modules, "h5py", None)  # importing it raises ImportError
    with pytest.raises(DatasetError) as caught:
        import_minari("ns/h-v0", tmp_path / "out", root=root)
    assert all(words in str(caught.value) for words in HDF5_WORDS), str(caught.value)
    assert not (tmp_path / "out").exists()


def test_the_cli_import_of_an_hdf5_minari_dataset_without_h5py_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _hdf5_labelled_minari(tmp_path)
    monkeypatch.setitem(sys.modules, "h5py", None)
    argv = ["import", "minari", "ns/h-v0", "--root", str(root), "--out", str(tmp_path / "o")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("episodes: error: ") and err.count("\n") == 1
    assert all(words in err for words in HDF5_WORDS), err


# ------------------------------------------------------------------------------ write_many
def _ep(i: int, info: dict[str, Any]) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"ep{i}",
        observations=[np.zeros(2, np.float32)] * 2,
        actions=[0],
        rewards=[1.0],
        terminated=True,
        len_lookback_buffer=0,
        infos=[{}, info],
    )


WRITERS = {
    "DatasetWriter arrow": (lambda p: DatasetWriter(p), "taken (buffered: the next flush"),
    "DatasetWriter parquet": (
        lambda p: DatasetWriter(p, data_format="parquet"),
        "taken (buffered: the next flush",
    ),
    "EpisodeWriter (v1)": (lambda p: EpisodeWriter(p), "stored"),
}

# name: (position of the refused item, the item's id words, the count words before it)
REFUSED_AT = {
    "the first": (0, "id 'ep0'", "no episode of the call was {done}"),
    "the second": (1, "id 'ep1'", "the 1 episode of the call before it was {done}"),
    "the third": (2, "id 'ep2'", "the 2 episodes of the call before it were {done}"),
}


@pytest.mark.parametrize(("position", "named", "before"), REFUSED_AT.values(), ids=REFUSED_AT)
@pytest.mark.parametrize(("make", "done"), WRITERS.values(), ids=WRITERS)
def test_a_write_many_refusal_names_the_episode_and_says_what_was_written(
    tmp_path: Path, make: Any, done: str, position: int, named: str, before: str
) -> None:
    episodes = [_ep(i, {"seen": {1, 2}} if i == position else {}) for i in range(4)]
    with make(tmp_path / "d") as writer:
        with pytest.raises(UnstorableValueError) as caught:
            writer.write_many(episodes)
    err = caught.value
    assert type(err) is UnstorableValueError and isinstance(err, TypeError)
    text = str(err)
    assert text.startswith(
        f"write_many: episode {position} of the call ({named}, counted from 0) was refused: "
        "infos[1]['seen']: a value of type builtins.set cannot be stored safely"
    ), text
    assert before.format(done=done) in text and text.endswith("those after it were not")
    assert isinstance(err.__cause__, UnstorableValueError)  # the writer's own error
    assert [e.id_ for e in read_episodes(tmp_path / "d")] == [f"ep{i}" for i in range(position)]


LEFT_BY_THE_ERROR = {
    # name: (writer, what the dataset holds once the error left the with block)
    "DatasetWriter: the buffered episodes dropped": (DatasetWriter, []),
    "EpisodeWriter (v1): each stored at once": (EpisodeWriter, ["ep0", "ep1"]),
}


@pytest.mark.parametrize(("make", "kept"), LEFT_BY_THE_ERROR.values(), ids=LEFT_BY_THE_ERROR)
def test_what_a_with_block_left_by_a_write_many_refusal_keeps(
    tmp_path: Path, make: Any, kept: list[str]
) -> None:
    episodes = [_ep(i, {"seen": {1, 2}} if i == 2 else {}) for i in range(4)]
    with pytest.raises(UnstorableValueError, match="the 2 episodes of the call before it were"):
        with make(tmp_path / "d") as writer:
            writer.write_many(episodes)
    assert [e.id_ for e in read_episodes(tmp_path / "d")] == kept
    if make is DatasetWriter:  # the message says what a with block does with them
        with pytest.raises(UnstorableValueError, match="a `with` block this error leaves drops"):
            with DatasetWriter(tmp_path / "e") as writer:
                writer.write_many(episodes)


@pytest.mark.parametrize(("make", "done"), WRITERS.values(), ids=WRITERS)
def test_a_write_many_item_that_is_no_episode_is_named_by_its_place(
    tmp_path: Path, make: Any, done: str
) -> None:
    with make(tmp_path / "d") as writer:
        with pytest.raises(
            UnstorableValueError,
            match=r"^write_many: episode 1 of the call "
            r"\(no id, counted from 0\) was refused: can only store a ",
        ):
            writer.write_many([_ep(0, {}), 5])


# ------------------------------------------------------------------------- episodes info
BOXES = {
    "small bounds print as their arrays, in order": (
        gym.spaces.Box(np.float32([-1, -0.5]), np.float32([2, 0.5])),
        "Box([-1.0, -0.5], [2.0, 0.5], (2,), float32)",
    ),
    "a small 2-d bound prints nested": (
        gym.spaces.Box(np.float32([[0, 1], [2, 3]]), 4.0),
        "Box([[0.0, 1.0], [2.0, 3.0]], 4.0, (2, 2), float32)",
    ),
    "eight values still print whole": (
        gym.spaces.Box(-np.arange(8, dtype=np.float32), 8.0),
        "Box([-0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0], 8.0, (8,), float32)",
    ),
    "a larger bound is a range that names the bound": (
        gym.spaces.Box(-np.arange(9, dtype=np.float32), np.arange(1, 10, dtype=np.float32)),
        "Box(low in [-8.0, -0.0], high in [1.0, 9.0], (9,), float32)",
    ),
    "an int Box": (
        gym.spaces.Box(np.int64([0, -3]), np.int64([5, 9]), dtype=np.int64),
        "Box([0, -3], [5, 9], (2,), int64)",
    ),
    "bounds the same everywhere stay one value": (
        gym.spaces.Box(-1, 1, (20,)),
        "Box(-1.0, 1.0, (20,), float32)",
    ),
}


@pytest.mark.parametrize(("space", "expected"), BOXES.values(), ids=BOXES)
def test_info_prints_box_bounds_as_arrays_or_a_range_that_names_its_bound(
    space: gym.spaces.Box, expected: str
) -> None:
    assert space_text(space) == expected


def test_info_prints_the_journeys_action_box_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    box = gym.spaces.Box(np.float32([-1, -0.5]), np.float32([2, 0.5]))
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(
            SingleAgentEpisode(
                observations=[0, 1],
                actions=[np.float32([0, 0])],
                rewards=[1.0],
                action_space=box,
                len_lookback_buffer=0,
            )
        )
    assert main(["info", str(tmp_path / "d")]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("action space:")]
    assert line.split(":", 1)[1].strip() == "Box([-1.0, -0.5], [2.0, 0.5], (2,), float32)"


# ------------------------------------------------------------------------------ warnings
# name: (the warning a command gives, the line expected on stderr)
WARNINGS = {
    "a user warning": ('warnings.warn("infos left out")', "episodes: warning: infos left out"),
    "control characters are escaped": (
        'warnings.warn("a\\nb\\x1b[31m")',
        "episodes: warning: a\\nb\\x1b[31m",
    ),
    "another category": (
        'warnings.warn("overflow", RuntimeWarning)',
        "episodes: warning: overflow",
    ),
}


@pytest.mark.parametrize(("warn", "expected"), WARNINGS.values(), ids=WARNINGS)
def test_a_command_prints_its_warnings_as_one_episodes_line(
    tmp_path: Path, warn: str, expected: str
) -> None:
    script = textwrap.dedent(
        f"""
        import sys, warnings
        import episodes.cli as cli
        def command(args):
            {warn}
            print("done")
            return 0
        cli._info = command
        sys.exit(cli.main(["info", "x"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr
    assert done.stderr == expected + "\n"  # no file:line, no source line, no category


def test_the_minari_infos_warning_prints_as_one_episodes_line(tmp_path: Path) -> None:
    pytest.importorskip("minari")
    ep = _box_episode(np.float32, np.float32([0.0, 1.0, 2.0]))
    ep = SingleAgentEpisode(
        "a",
        observations=list(ep.get_observations()),
        actions=list(ep.get_actions()),
        rewards=[1.0, 1.0],
        infos=[{}, {"a": 1}, {"b": 2.0}],
        terminated=True,
        len_lookback_buffer=0,
        observation_space=ep.observation_space,
        action_space=ep.action_space,
    )
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(ep)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "episodes",
            "export",
            str(tmp_path / "d"),
            "--to",
            "minari",
            "--dataset-id",
            "ns/w-v0",
            "--root",
            str(tmp_path / "m"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("episodes: warning: ") and "infos left out" in line, line


# ------------------------------------------------------------------------------ metadata
# name: (the metadata given, what the error says to do)
METADATA = {
    "free-form keys": ({"run": 3}, "make one with episodes.io.DatasetMetadata(user={...})"),
    "keys that are its fields": (
        {"env_id": "Toy-v0", "seeds": [1]},
        "make one with episodes.io.DatasetMetadata(**metadata)",
    ),
    "no dict": (["x"], "make one with episodes.io.DatasetMetadata(...) (its fields: env_id,"),
}


@pytest.mark.parametrize(("given", "says"), METADATA.values(), ids=METADATA)
def test_metadata_that_is_no_dataset_metadata_says_how_to_make_one(
    tmp_path: Path, given: Any, says: str
) -> None:
    with pytest.raises(TypeError, match="metadata must be a DatasetMetadata") as caught:
        DatasetWriter(tmp_path / "d", metadata=given)
    assert says in str(caught.value)
    assert not (tmp_path / "d").exists()  # refused before anything is made


def test_the_way_the_metadata_error_names_works(tmp_path: Path) -> None:
    given = {"env_id": "Toy-v0", "seeds": [1]}
    DatasetWriter(tmp_path / "d", metadata=DatasetMetadata(**given)).close()
    assert dataset_info(tmp_path / "d").metadata["seeds"] == [1]
