"""What ``merge`` refuses first, and what its refusal of overlapping sources says to do.

Checked from the sources' manifests and first pieces before anything is written.

Example:
    >>> import tempfile
    >>> import gymnasium as gym
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> root = tempfile.mkdtemp()
    >>> for name, n in (("a", 2), ("b", 3)):
    ...     with DatasetWriter(f"{root}/{name}") as w:
    ...         w.write(SingleAgentEpisode(action_space=gym.spaces.Discrete(n)))
    >>> try:
    ...     refuse_other_envs([f"{root}/a", f"{root}/b"], by_id=True)
    ... except DatasetError as err:
    ...     print(str(err).split("(")[1].split(")")[0])
    other action spaces
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from episodes.io.errors import DatasetError
from episodes.io.reader import dataset_info, printable

__all__ = ["MERGE_REMEDY", "refuse_other_envs"]

PathLike = str | os.PathLike[str]

#: What ``merge``'s refusal of sources whose pieces do not join says to do: merge keeps
#: every id, and has no way to change one.
MERGE_REMEDY = (
    "; if they hold the same episodes (a dataset and a copy of it), merge one of them; if "
    "other episodes share ids, give one source's episodes other ids first, as merge keeps "
    "every id and has no way to change one: read that source with "
    "episodes.io.read_episodes, set each piece's id_ (e.g. to a (source, id) tuple, the "
    "same for every piece of an episode) and write the pieces with episodes.io.DatasetWriter "
    "into a new dataset, then merge that one instead"
)


def refuse_other_envs(sources: Sequence[PathLike], *, by_id: bool) -> None:
    """Refuses sources of different envs: other spaces, or other env ids (when ``by_id``).

    What a source does not say (no env id in its metadata, no episodes, episodes stored
    without spaces) is not compared.

    Raises:
        DatasetError: Naming the two sources and what differs; nothing was written.

    Example:
        >>> refuse_other_envs([], by_id=True)
    """
    first: dict[str, tuple[PathLike, Any]] = {}
    for src in sources:
        info = dataset_info(src)
        facts: dict[str, Any] = {"env id": (info.metadata or {}).get("env_id") if by_id else None}
        if info.num_episodes:
            facts["observation space"] = info.observation_space
            facts["action space"] = info.action_space
        for name, value in facts.items():
            if value is None:
                continue
            seen, known = first.setdefault(name, (src, value))
            if known != value:
                ids = f"env ids {printable(known)} and {printable(value)}"
                what = ids if name == "env id" else f"other {name}s"
                raise DatasetError(
                    f"{seen} and {src} hold episodes of different envs ({what}); "
                    "nothing was written"
                )
