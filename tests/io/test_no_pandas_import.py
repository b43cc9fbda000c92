"""Writing and reading a v2 dataset does not import pandas.

``pa.array`` and ``Array.to_numpy`` import pandas on their first call when it is installed
(0.5-0.7 s once per process); the shard codec builds and reads plain columns from their
buffers instead.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys, tempfile
    import numpy as np
    from episodes import SingleAgentEpisode
    from episodes.io import Dataset, DatasetWriter, read_episodes
    path = tempfile.mkdtemp() + "/d"
    with DatasetWriter(path) as w:
        w.write(SingleAgentEpisode("a", observations=[np.zeros(3, np.float32)] * 3,
                                   actions=[1, 0], rewards=[1.0, 2.0],
                                   infos=[{"x": 1}, {}, {}], len_lookback_buffer=0).to_numpy())
        w.write(SingleAgentEpisode(7, observations=[np.ones((2, 2), np.uint8)] * 2,
                                   actions=[0.5], rewards=[3.0], len_lookback_buffer=0))
    episodes = list(read_episodes(path))
    steps = Dataset(path).steps(0, 0, 2)
    assert episodes[0].get_infos() == [{"x": 1}, {}, {}], episodes[0].get_infos()
    assert episodes[1].id_ == 7 and episodes[1].get_observations()[0].tolist() == [[1, 1], [1, 1]]
    assert steps["rewards"].tolist() == [1.0, 2.0]
    print("pandas" in sys.modules)
    """
)


def test_a_write_and_a_read_leave_pandas_unimported():
    pytest.importorskip("pandas")  # without pandas there is nothing to import
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False", out.stdout + out.stderr
