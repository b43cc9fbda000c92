"""Where a runner group or a Ray Data write stores episodes: what is checked before writing.

A format v2 dataset's header (its metadata) is written once, by whoever creates it: a later
writer's ``metadata=`` would be dropped, and its episodes appended whatever env they come
from. So :func:`write_target_problem` refuses a Ray Data write (``write_episodes``) into an
existing dataset that holds episodes unless it asks to append, a ``metadata=`` other than the
stored one, and a target that the written Ray dataset reads; :func:`group_writer` and
:func:`refuse_other_spaces` refuse a runner group's ``write_to`` of another env, as
``episodes record`` does.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetMetadata, DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path, metadata=DatasetMetadata(env_id="CartPole-v1")) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[1.0]))
    >>> write_target_problem(path, None, append=True)
    ''
    >>> write_target_problem(path, None).endswith("or pass append=True to add to it")
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from episodes.distributed.actor import WriterSpec

__all__ = [
    "group_writer",
    "refuse_other_spaces",
    "refuse_write_target",
    "stored_dataset",
    "write_target_problem",
]

COMPACT = "`episodes merge SRC DST` compacts or joins datasets"


def stored_dataset(path: str | os.PathLike[str]) -> Any:
    """``episodes.io.dataset_info(path)`` if a dataset is stored there, else None.

    Example:
        >>> import tempfile
        >>> stored_dataset(tempfile.mkdtemp()) is None
        True
    """
    from episodes.io import dataset_info
    from episodes.io.format import MANIFEST_FILE

    root = Path(path)
    if not (root / MANIFEST_FILE).exists() and not (root / "format.json").exists():
        return None
    return dataset_info(root)


def _stored_metadata(info: Any, path: Any) -> Any:
    from episodes.io import DatasetMetadata

    return DatasetMetadata.from_json(info.metadata or {}, f"{path} metadata")


def write_target_problem(
    path: str | os.PathLike[str],
    metadata: Any,
    *,
    append: bool = False,
    sources: Iterable[str] = (),
) -> str:
    """Why a Ray Data write of episodes may not go into ``path`` ("" if it may).

    Refused: a target among ``sources`` (the written Ray dataset reads it: every piece would
    be stored twice), a dataset holding episodes unless ``append`` (appending checks no env
    or spaces), and a ``metadata`` other than the one an existing dataset stores (it is
    written only with a new dataset). A new directory, or a dataset without chunks, takes it.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetMetadata, DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> DatasetWriter(path, metadata=DatasetMetadata(env_id="CartPole-v1")).close()
        >>> write_target_problem(path, None), write_target_problem(path, DatasetMetadata(
        ...     env_id="CartPole-v1"))  # empty, the same header: taken
        ('', '')
        >>> print(write_target_problem(path, DatasetMetadata(env_id="Pendulum-v1")))
        ... # doctest: +ELLIPSIS
        write_episodes: ... stores other metadata than metadata= (its ['env_id']: ...)...
    """
    from episodes.io import DatasetMetadata

    where = os.fspath(Path(path).resolve())
    if any(os.fspath(Path(src).resolve()) == where for src in sources):
        return (
            f"write_episodes: {path} is a dataset the written Ray dataset reads (every piece "
            f"would be stored twice); write to a new directory ({COMPACT})"
        )
    info = stored_dataset(where)
    if info is None:
        return ""
    if info.num_chunks and not append:
        # A v1 dataset takes no appended shards: migrate it first (append would be refused).
        add = "or pass append=True to add to it" if info.version != 1 else "or migrate it first"
        return (
            f"write_episodes: {path} already holds a dataset of {info.num_chunks} chunks; write "
            f"to a new directory ({COMPACT}), {add}"
        )
    if isinstance(metadata, DatasetMetadata):
        stored = _stored_metadata(info, path)
        given = DatasetMetadata.from_json(metadata.to_json(), "metadata=")
        differ = [k for k, v in given.to_json().items() if stored.to_json()[k] != v]
        if differ:
            return (
                f"write_episodes: {path} stores other metadata than metadata= (its {differ}: "
                f"{[getattr(stored, k) for k in differ]}), and a dataset's metadata is written "
                "only when it is created; pass metadata=None to add to it, or write to a new "
                f"directory ({COMPACT})"
            )
    return ""


def refuse_write_target(
    path: str | os.PathLike[str],
    metadata: Any,
    *,
    append: bool = False,
    sources: Iterable[str] = (),
) -> None:
    """Raises ``episodes.io.DatasetError`` if :func:`write_target_problem` finds one.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[1.0]))
        >>> refuse_write_target(path, None, sources=[path])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        episodes.io.errors.DatasetError: write_episodes: ... is a dataset the written Ray \
dataset reads (every piece would be stored twice); write to a new directory ...
    """
    from episodes.io import DatasetError

    problem = write_target_problem(path, metadata, append=append, sources=sources)
    if problem:
        raise DatasetError(problem)


def group_writer(write_to: Any, metadata: Any, options: dict[str, Any]) -> WriterSpec | None:
    """The group's ``WriterSpec`` for ``write_to``, its dataset created (None: no ``write_to``).

    Refuses, before anything is made, an existing dataset whose metadata names another env id
    than ``metadata`` does (a group's ``write_metadata`` is stored only when it creates the
    dataset), as ``episodes record`` refuses one.

    Raises:
        ValueError: The dataset at ``write_to`` is another env's.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetMetadata, dataset_info
        >>> path = tempfile.mkdtemp() + "/data"
        >>> spec = group_writer(path, DatasetMetadata(env_id="CartPole-v1"), {})
        >>> dataset_info(spec.path).metadata["env_id"]
        'CartPole-v1'
        >>> group_writer(path, DatasetMetadata(env_id="Pendulum-v1"), {})
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: write_to: ... is a dataset of 'CartPole-v1', not of write_metadata's \
'Pendulum-v1'; write Pendulum-v1 into a new directory ...
    """
    if write_to is None:
        return None
    # Resolved here: the actors' working directory need not be the driver's.
    path = os.fspath(Path(write_to).resolve())
    info = stored_dataset(path)
    wanted = getattr(metadata, "env_id", None)
    recorded = None if info is None else (info.metadata or {}).get("env_id")
    if wanted is not None and recorded is not None and recorded != wanted:
        raise ValueError(
            f"write_to: {path} is a dataset of {recorded!r}, not of write_metadata's "
            f"{wanted!r}; write {wanted} into a new directory ({COMPACT} of one env)"
        )
    spec = WriterSpec(path, metadata, options)
    spec.create_dataset()
    return spec


def refuse_other_spaces(
    ray: Any, handles: Sequence[Any], spec: WriterSpec | None, info: dict[str, Any]
) -> None:
    """Ends the started actors and raises if ``spec``'s episodes have other spaces than theirs.

    ``info``: the first actor's (``RunnerActor.info``). Called once the actors started, before
    any sample: nothing is written yet. A dataset without episodes takes any spaces.

    Raises:
        ValueError: The dataset holds episodes of other spaces (another env, or a wrapper).

    Example:
        >>> refuse_other_spaces(None, [], None, {})  # no write_to: nothing to compare
    """
    if spec is None:
        return
    stored = stored_dataset(spec.path)
    if stored is None or not stored.num_episodes or stored.observation_space is None:
        return
    theirs = (info["observation_space"], info["action_space"])
    if (stored.observation_space, stored.action_space) == theirs:
        return
    for handle in handles:
        ray.kill(handle, no_restart=True)
    raise ValueError(
        f"write_to: {spec.path} holds episodes of spaces {stored.observation_space} / "
        f"{stored.action_space}, the runners' env has {theirs[0]} / {theirs[1]}; write "
        "into a new directory"
    )
