"""What ``import_minari`` keeps of a Minari dataset's ``metadata.json``, in our ``user``.

The env spec and algorithm name become our metadata's ``env_spec`` and ``algorithm``; the
dataset id and Minari version ``user["minari_dataset_id"]`` and ``user["minari_version"]``;
every other entry (``ref_min_score``, ``ref_max_score``, ``description``, ``author``,
``author_email``, ``code_permalink``, ``eval_env_spec``, ``requirements``,
``num_episodes_average_score``, ``total_episodes``, ``total_steps``, ...) goes into
``user["minari_metadata"]`` as stored, except those describing how Minari stores the data,
which the copy stores its own way (:data:`NOT_KEPT`: the spaces, stored with every piece, the
data format, JPEG encoding and size on disk). A value that is not a string, a finite number,
a bool, null or a list of those (a NaN, which ``json.loads`` takes, a nested object) is left
out with a warning naming its key.

Example:
    >>> import warnings
    >>> meta = {"dataset_id": "toy/a-v0", "ref_min_score": -10.0, "author": "me",
    ...         "data_format": "arrow", "ref_max_score": float("nan")}
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     kept = minari_user(meta, "toy/a-v0", "0.5.4", "data/")
    >>> kept["minari_metadata"], len(caught)
    ({'ref_min_score': -10.0, 'author': 'me'}, 1)
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

__all__ = ["NOT_KEPT", "minari_user"]

#: Entries of Minari's ``metadata.json`` imported elsewhere (the first four) or not at all:
#: what says how Minari stores the data, which the copy stores its own way.
NOT_KEPT = frozenset(
    {
        "env_spec",  # our metadata's env_spec (parsed)
        "algorithm_name",  # our metadata's algorithm
        "dataset_id",  # user["minari_dataset_id"]
        "minari_version",  # user["minari_version"]
        "observation_space",  # serialized spaces: every imported piece stores its spaces
        "action_space",
        "data_format",
        "jpeg_encoding",
        "dataset_size",  # Minari's files' size in MB
    }
)


def minari_user(
    meta: Any, dataset_id: str, minari_version: str, data_dir: str | os.PathLike[str]
) -> dict[str, Any]:
    """Our ``user`` metadata for a Minari dataset whose ``metadata.json`` holds ``meta``.

    Args:
        meta: The parsed ``metadata.json`` (a dict; anything else keeps nothing more).
        dataset_id: The Minari dataset's id.
        minari_version: The Minari version that wrote it.
        data_dir: Named in the warning about entries left out.

    Example:
        >>> minari_user({"description": "expert runs"}, "toy/a-v0", "0.5.4", "data/")
        {'minari_dataset_id': 'toy/a-v0', 'minari_version': '0.5.4', \
'minari_metadata': {'description': 'expert runs'}}
    """
    kept: dict[str, Any] = {}
    left_out: list[str] = []
    for key, value in meta.items() if isinstance(meta, dict) else ():
        if key in NOT_KEPT:
            continue
        if _plain(value) or (type(value) is list and all(_plain(item) for item in value)):
            kept[key] = value
        else:
            left_out.append(key)
    if left_out:
        warnings.warn(
            f"Minari dataset {os.fspath(data_dir)}: metadata entries {left_out} are left out of "
            "the import (only strings, finite numbers, bools, nulls and lists of those are kept)",
            stacklevel=3,
        )
    return {
        "minari_dataset_id": dataset_id,
        "minari_version": minari_version,
        "minari_metadata": kept,
    }


def _plain(value: Any) -> bool:
    kind = type(value)
    return value is None or kind in (str, int, bool) or (kind is float and math.isfinite(value))
