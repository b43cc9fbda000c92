"""``migrate`` refuses a dataset whose pieces do not join, as filter, split and merge do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetError, DatasetWriter, EpisodeWriter, migrate

EP = SingleAgentEpisode(
    "x", observations=[0, 1, 2, 3], actions=[0, 1, 0], rewards=[1.0] * 3, len_lookback_buffer=0
)
# name: (the pieces written, in order, and the problem named)
DAMAGE = {
    "a piece stored twice": ([EP[0:1], EP[1:2], EP[1:2], EP[2:3]], "steps [1, 2) are stored twice"),
    "steps left out": ([EP[0:1], EP[2:3]], "steps [1, 2) are missing"),
}


@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter], ids=["v2", "v1"])
@pytest.mark.parametrize(("pieces", "problem"), DAMAGE.values(), ids=DAMAGE)
def test_migrate_refuses_pieces_that_do_not_join(tmp_path: Path, writer, pieces, problem) -> None:
    with writer(tmp_path / "src") as w:
        w.write_many(pieces)
    with pytest.raises(DatasetError, match=re.escape(f"episode 'x': {problem}")):
        migrate(tmp_path / "src", tmp_path / "dst")
    assert not (tmp_path / "dst").exists()
    for argv in (
        ["filter", str(tmp_path / "src"), "--out", str(tmp_path / "f")],
        ["migrate", str(tmp_path / "src"), str(tmp_path / "m")],
    ):
        assert main(argv) == 1  # both refuse it, one error line each
