"""Replay sampling against RLlib 2.60 where we refuse or add what RLlib ignores or leaves out.

Moved from tests/replay/test_hunt22_tiny.py, where they skipped in the project venv (no RLlib)
and so never ran: ``make differential`` collects this folder only.

- ``gamma`` with ``batch_length_T`` (or ``sample_episodes``) discounts nothing: RLlib takes and
  ignores it, we refuse it (deviation "seq-n-step");
- RLlib's sequence batches have no infos even with ``include_infos``; ours hold the info of each
  ``next_obs`` (deviation "seq-reward-alignment").

Also here: the folder's conftest.py stops the run when a reference library cannot be imported
(rather than every RLlib module skipping itself).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer as RBuffer

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer

ROOT = Path(__file__).resolve().parents[2]


def _rllib_twins() -> tuple[EpisodeReplayBuffer, Any]:
    kwargs: dict[str, Any] = dict(
        observations=[np.array([float(t)], np.float32) for t in range(5)],
        actions=[0, 1, 2, 0],
        rewards=[1.0, 2.0, 3.0, 4.0],
        infos=[{"t": t} for t in range(5)],
        terminated=True,
        len_lookback_buffer=0,
    )
    ours, theirs = EpisodeReplayBuffer(100, seed=0), RBuffer(capacity=100)
    ours.add(SingleAgentEpisode("a", **kwargs))
    theirs.add(RSAE(id_="a", **kwargs))
    return ours, theirs


def test_rllib_ignores_gamma_where_we_refuse_it():  # "seq-n-step"
    ours, theirs = _rllib_twins()
    for kwargs in (dict(batch_length_T=2), dict(batch_length_T=2, sample_episodes=True)):
        got = []
        for gamma in (0.0, 0.9):
            theirs.rng = np.random.default_rng(0)
            out = theirs.sample(batch_size_B=4, n_step=1, gamma=gamma, **kwargs)
            got.append(
                [np.asarray(ep.get_rewards()).tolist() for ep in out]
                if isinstance(out, list)
                else {k: np.asarray(v).tolist() for k, v in out.items()}
            )
        assert got[0] == got[1]  # RLlib: the same whatever gamma
        with pytest.raises(ValueError, match="gamma applies to transitions"):
            ours.sample(4, gamma=0.9, **kwargs)


def test_rllib_sequences_have_no_infos():  # "seq-reward-alignment"
    ours, theirs = _rllib_twins()
    theirs.rng = np.random.default_rng(0)
    assert "infos" not in theirs.sample(batch_size_B=4, batch_length_T=2, include_infos=True)
    seq = ours.sample(4, batch_length_T=2, include_infos=True)
    assert [[info["t"] for info in row] for row in seq["infos"].tolist()] == seq["next_obs"][
        :, :, 0
    ].astype(int).tolist()


# ------------------------------------------------------------- a reference that cannot import
@pytest.mark.parametrize("blocked", ["ray.rllib", "rsl_rl"])
def test_a_reference_that_cannot_import_stops_the_run(tmp_path, blocked):
    # A plugin loaded before any conftest makes ``import <blocked>`` fail, as a broken install
    # would; collecting an RLlib module and the rsl_rl one must then fail, not skip.
    (tmp_path / "_block_reference.py").write_text(f"import sys\nsys.modules[{blocked!r}] = None\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "_block_reference",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "-q",
            "tests/differential/test_rllib_connectors.py",
            "tests/differential/test_rsl_rl_rollout.py",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = run.stdout + run.stderr
    assert run.returncode not in (0, 5), output  # 5: nothing collected, everything skipped
    assert f"cannot import {blocked}, which the differential tests compare against" in output
