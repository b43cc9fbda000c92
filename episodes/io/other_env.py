"""Whether a record may append an env's episodes to a dataset, without loading pyarrow.

``episodes record --format 1`` asks before it writes: this module reads a v1 dataset with
the v1 reader only, so a v1 record works where pyarrow is not installed (a v2 dataset's
header is read through pyarrow, loaded then).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from episodes.io.reader import dataset_info, printable
from episodes.io.shards import is_v2
from episodes.io.writer import FRESH_NAMES

__all__ = ["other_env_problem"]


def other_env_problem(
    path: str | os.PathLike[str], env_id: str, observation_space: Any, action_space: Any
) -> str:
    """Why episodes of ``env_id`` may not be appended to the dataset at ``path`` ("" if they may).

    A v2 dataset's metadata names its env (``env_id`` is compared with it: pass the id the
    env's spec holds, which a ``module:`` prefix does not reach), also where it holds no
    episodes yet; where it holds episodes, the spaces of its first episode are compared too
    (a wrapper that changes the spaces keeps the env id). A directory that holds no dataset
    yet (nothing, or only what a v1 writer killed before its ``format.json`` left, which
    ``EpisodeWriter`` restarts), or a dataset of no episodes whose metadata names no env,
    takes any env. ``episodes record`` asks again once its writer has the dataset open.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetMetadata, DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path, metadata=DatasetMetadata(env_id="CartPole-v1")) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0]))
        >>> other_env_problem(path, "Pendulum-v1", None, None).split("; ")[1]
        'record Pendulum-v1 into a new directory'
    """
    root = Path(path)
    if not is_v2(root) and not (root / "format.json").exists():
        manifest = root / "manifest.jsonl"  # none, or what a killed v1 writer left: new
        if not manifest.exists() or (
            manifest.stat().st_size == 0 and {p.name for p in root.iterdir()} <= FRESH_NAMES
        ):
            return ""
    info = dataset_info(root)
    recorded = (info.metadata or {}).get("env_id")
    if recorded is not None and recorded != env_id:  # with no episodes too: its header says
        return f"{path} is a dataset of {printable(recorded)}; record {env_id} into a new directory"
    if not info.num_episodes or info.observation_space is None:  # a wrapper keeps the env id
        return ""
    if (info.observation_space, info.action_space) != (observation_space, action_space):
        return (
            f"{path} holds episodes of other spaces than {env_id}'s; record it into a new directory"
        )
    return ""
