"""numpy 2's StringDType is refused by every writer with words that say what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, UnstorableValueError, read_episodes
from episodes.io.values import check_array_dtype
from episodes.replay import EpisodeReplayBuffer

STRING_DTYPE = getattr(getattr(np, "dtypes", None), "StringDType", None)
pytestmark = pytest.mark.skipif(STRING_DTYPE is None, reason="numpy < 2 has no StringDType")
ADVICE = (
    r"numpy's variable-width StringDType is not stored: convert it to a fixed-width '<U' "
    r"array, which is, with np\.array\(values\.tolist\(\), dtype=str\)$"
)


def _strings(values: Any) -> np.ndarray:
    assert STRING_DTYPE is not None
    return np.array(values, dtype=STRING_DTYPE())


def _episode(where: str, convert: bool = False) -> SingleAgentEpisode:
    def text(values: Any) -> np.ndarray:
        array = _strings(values)
        return np.array(array.tolist(), dtype=str) if convert else array  # as the error says

    obs: list[Any] = [0.0, 1.0]
    infos: list[Any] = [{}, {}]
    extras: dict[str, Any] = {}
    if where == "infos":
        infos = [{}, {"tag": text(["a", "bc"])}]
    elif where.startswith("observations"):
        obs = [text(["a"]), text(["bc"])]
    else:
        extras = {"s": [text("x")]}
    ep = SingleAgentEpisode(
        "e1",
        observations=obs,
        infos=infos,
        actions=[0],
        rewards=[1.0],
        extra_model_outputs=extras,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if where == "observations numpy'd" else ep


PLACES = [
    ("infos", r"infos\[1\]\['tag'\]"),
    ("observations", r"observations\[0\]"),
    ("observations numpy'd", r"observations leaf 0"),
    ("extra_model_outputs", r"extra_model_outputs\['s'\]\[0\]"),
]


@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter], ids=lambda w: w.__name__)
@pytest.mark.parametrize("where,named", PLACES, ids=[p[0] for p in PLACES])
def test_writers_say_what_to_do(tmp_path: Path, writer: Any, where: str, named: str) -> None:
    with pytest.raises(UnstorableValueError, match=rf"^{named}: {ADVICE}"):
        with writer(tmp_path / "bad") as out:
            out.write(_episode(where))
    with writer(tmp_path / "good") as out:  # what the message says to do is stored
        out.write(_episode(where, convert=True))
    (back,) = read_episodes(tmp_path / "good")
    assert back.id_ == "e1"


def test_replay_save_names_the_episode(tmp_path: Path) -> None:
    buf = EpisodeReplayBuffer(10)
    buf.add(_episode("infos"))
    with pytest.raises(UnstorableValueError, match=rf"\(id 'e1'\).*infos\[1\]\['tag'\]: {ADVICE}"):
        buf.save(tmp_path / "buf")


def test_other_dtypes_keep_their_words() -> None:
    check_array_dtype(np.dtype("<U3"), "x")
    with pytest.raises(UnstorableValueError, match=r"^x: numpy dtype object cannot be stored"):
        check_array_dtype(np.dtype(object), "x")
    with pytest.raises(UnstorableValueError, match=rf"^x: {ADVICE}"):
        check_array_dtype(_strings(["a"]).dtype, "x")
