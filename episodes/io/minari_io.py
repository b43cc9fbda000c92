"""Minari interop: export a dataset to a Minari dataset on local disk, import one back.

Needs the ``minari`` extra (``pip install 'episodes[minari]'``), imported when a function here
is called. Minari stores whole episodes as observations (``n + 1``), actions, rewards,
terminations and truncations (``n`` each), with the env spec and spaces; a round trip keeps
every step of those columns exactly. What Minari has no place for is not exported: our episode
ids (Minari numbers episodes 0, 1, ...), infos, extra-model-outputs, lookback and
``custom_data``; zero-step episodes are skipped.

Example:
    >>> import pytest; _ = pytest.importorskip("minari")  # the optional extra
    >>> import tempfile
    >>> import gymnasium as gym
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter, dataset_info
    >>> root = tempfile.mkdtemp()
    >>> with DatasetWriter(root + "/ours") as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 0], actions=[1, 0],
    ...                                rewards=[1.0, 1.0], terminated=True,
    ...                                observation_space=gym.spaces.Discrete(2),
    ...                                action_space=gym.spaces.Discrete(2),
    ...                                len_lookback_buffer=0))
    >>> export_minari(root + "/ours", "toy/ours-v0", root=root + "/minari")
    1
    >>> import_minari("toy/ours-v0", root + "/back", root=root + "/minari")
    1
    >>> dataset_info(root + "/back").num_steps
    2
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.io.errors import CorruptDatasetError, DatasetError, UnsafeDataError
from episodes.io.format import read_regular_file
from episodes.io.metadata import DatasetMetadata
from episodes.io.reader import dataset_info, read_episodes
from episodes.io.shard_writer import DEFAULT_SHARD_BYTES, DatasetWriter
from episodes.io.values import concat_piece, id_key
from episodes.spaces import unbatch

__all__ = ["export_minari", "import_minari"]

PathLike = str | os.PathLike[str]


@contextlib.contextmanager
def _datasets_root(root: PathLike | None) -> Iterator[None]:
    """Points minari at ``root`` for the duration (minari reads the variable on each call)."""
    if root is None:
        yield
        return
    old = os.environ.get("MINARI_DATASETS_PATH")
    # Absolute: minari resolves a relative root differently in its writer and its reader.
    os.environ["MINARI_DATASETS_PATH"] = os.path.abspath(os.fspath(root))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


# Minari's own form: a namespace of two or more characters (slashes inside), a name without
# dots, a version; checked here so an id it would refuse is refused before anything is read.
_DATASET_ID = re.compile(r"(?:[-\w][-\w/]*[-\w]/)?[-\w]+-v\d+")


def _whole_episodes(src: PathLike) -> Iterator[SingleAgentEpisode]:
    """Streams the dataset's episodes with their pieces joined (pieces held until complete)."""
    pieces_of = {id_key(e.id_): e.num_chunks for e in dataset_info(src).episodes}
    pending: dict[str, list[SingleAgentEpisode]] = {}
    for piece in read_episodes(src, verify=True):  # no damaged data into another format
        key = id_key(piece.id_)
        pending.setdefault(key, []).append(piece)
        if len(pending[key]) == pieces_of.get(key, 1):
            # (t_started, t), as load_episode: a piece without steps goes first where it is.
            parts = sorted(pending.pop(key), key=lambda p: (p.t_started, p.t))
            episode = parts[0]
            for part in parts[1:]:
                try:  # one id_key, not always an equal id (NaN): concat_piece
                    concat_piece(episode, part)
                except (AssertionError, ValueError) as err:
                    raise CorruptDatasetError(
                        f"pieces of episode {piece.id_!r} do not join at t={part.t_started}: {err}"
                    ) from err
            yield episode


def _buffer(index: int, episode: SingleAgentEpisode) -> Any:
    from minari.data_collector import EpisodeBuffer

    episode.to_numpy()
    n = len(episode)
    ends = [False] * (n - 1)
    rewards = np.asarray(episode.get_rewards())
    if rewards.shape != (n,) or rewards.dtype.kind not in "biuf":
        raise DatasetError(
            f"Minari stores one float reward per step; episode {episode.id_!r} has rewards of "
            f"shape {rewards.shape[1:]} and dtype {rewards.dtype}"
        )
    return EpisodeBuffer(
        id=index,
        observations=episode.get_observations(),
        actions=episode.get_actions(),
        rewards=rewards.astype(np.float64).tolist(),
        terminations=[*ends, bool(episode.is_terminated)],
        truncations=[*ends, bool(episode.is_truncated)],
    )


def export_minari(
    src: PathLike,
    dataset_id: str,
    *,
    root: PathLike | None = None,
    description: str | None = None,
) -> int:
    """Writes the episodes of ``src`` (v1 or v2) as Minari dataset ``dataset_id``.

    Args:
        src: Our dataset.
        dataset_id: Minari id, ``namespace/name-vN`` or ``name-vN``.
        root: Minari's datasets directory (default: minari's, ``MINARI_DATASETS_PATH`` or
            ``~/.minari/datasets``).
        description: Stored in the Minari metadata.

    Returns:
        The number of episodes exported.

    Raises:
        DatasetError: ``src`` is unreadable, holds no episode with steps, or has no spaces.

    Example:
        >>> import pytest; _ = pytest.importorskip("minari")  # the optional extra
        >>> import tempfile
        >>> import gymnasium as gym
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> root = tempfile.mkdtemp()
        >>> with DatasetWriter(root + "/ours") as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 0], actions=[1, 0],
        ...                                rewards=[1.0, 1.0], terminated=True,
        ...                                observation_space=gym.spaces.Discrete(2),
        ...                                action_space=gym.spaces.Discrete(2),
        ...                                len_lookback_buffer=0))
        >>> export_minari(root + "/ours", "toy/ours-v0", root=root + "/minari")
        1
        >>> from minari import MinariDataset
        >>> stored = MinariDataset(root + "/minari/toy/ours-v0/data")  # read by Minari itself
        >>> stored.total_episodes, stored.total_steps, stored[0].actions.tolist()
        (1, 2, [1, 0])
    """
    import minari

    if not _DATASET_ID.fullmatch(dataset_id) or ".." in dataset_id.split("/"):
        raise ValueError(
            f"dataset_id must look like 'name-v0' or 'namespace/name-v0', got {dataset_id!r}"
        )
    info = dataset_info(src)
    meta = DatasetMetadata.from_json(info.metadata or {}, f"{src} metadata")
    buffers = [_buffer(i, ep) for i, ep in enumerate(e for e in _whole_episodes(src) if len(e) > 0)]
    if not buffers:
        raise DatasetError(f"{src} holds no episode with steps to export")
    if info.observation_space is None or info.action_space is None:
        raise DatasetError(f"{src} has no observation/action spaces; Minari needs them")
    env: Any = None
    if meta.env_id is not None:
        with contextlib.suppress(gym.error.Error):
            env = gym.spec(meta.env_id)  # looks up registered ids only (imports nothing)
    with _datasets_root(root), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # minari nags about optional fields
        from minari.storage import get_dataset_path

        target = get_dataset_path(dataset_id)  # (makes the datasets directory)
        # The dataset's directory and the namespace's, where the export makes them.
        made = list(itertools.takewhile(lambda p: not p.exists(), [target, *target.parents]))
        try:
            minari.create_dataset_from_buffers(
                dataset_id,
                buffers,
                env=env,
                observation_space=info.observation_space,
                action_space=info.action_space,
                algorithm_name=meta.algorithm or meta.policy,
                description=description or f"exported by episodes from {os.fspath(src)}",
                data_format="arrow",
            )
        except BaseException as err:
            if made:  # no half-written Minari dataset left to refuse the retry
                shutil.rmtree(made[-1], ignore_errors=True)
            if not isinstance(err, Exception) or isinstance(err, MemoryError):
                raise
            if isinstance(err, ValueError) and "already exists" in str(err):
                raise
            # Minari fails in many ways on data it cannot store (an IndexError for
            # observations of another shape than the space): all are refusals of this data.
            raise DatasetError(f"Minari refused the export of {src}: {err!r}") from err
    return len(buffers)


def _minari_data_dir(dataset: PathLike, root: PathLike | None) -> Path:
    path = Path(dataset)
    if path.is_dir():
        return path / "data" if (path / "data").is_dir() else path
    with _datasets_root(root):
        from minari.storage import get_dataset_path

        found = get_dataset_path(os.fspath(dataset)) / "data"
    if not found.is_dir():
        raise DatasetError(f"no local Minari dataset {os.fspath(dataset)!r} (looked in {found})")
    return found


def import_minari(
    dataset: PathLike,
    dst: PathLike,
    *,
    root: PathLike | None = None,
    shard_bytes: int | None = None,
) -> int:
    """Copies a local Minari dataset (an id, or the path of its directory) into a new v2 dataset.

    Episodes get ids ``"<minari id>/<episode number>"``; the env spec and algorithm name
    become the dataset metadata. Returns the number of episodes imported.

    The Minari metadata must store both spaces: Minari makes a missing one by making the env
    its ``env_spec`` names, which runs code the dataset chose, so such a dataset is refused.

    Raises:
        DatasetError: The Minari dataset is missing or unreadable, does not store its spaces
            (``UnsafeDataError``), or ``dst`` is not empty.

    Example:
        >>> import pytest; _ = pytest.importorskip("minari")  # the optional extra
        >>> import tempfile
        >>> import gymnasium as gym
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter, read_episodes
        >>> root = tempfile.mkdtemp()
        >>> with DatasetWriter(root + "/ours") as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 0], actions=[1, 0],
        ...                                rewards=[1.0, 1.0], terminated=True,
        ...                                observation_space=gym.spaces.Discrete(2),
        ...                                action_space=gym.spaces.Discrete(2),
        ...                                len_lookback_buffer=0))
        >>> export_minari(root + "/ours", "toy/ours-v0", root=root + "/minari")
        1
        >>> import_minari(root + "/minari/toy/ours-v0", root + "/back")  # or an id with root=
        1
        >>> [(ep.id_, ep.get_actions().tolist()) for ep in read_episodes(root + "/back")]
        [('toy/ours-v0/0', [1, 0])]
    """
    import minari  # noqa: F401 - without the extra, an ImportError as before anything is read

    data_dir = _minari_data_dir(dataset, root)
    checked = _checked_metadata(data_dir)
    try:
        source = _open_checked(data_dir, checked)
    except Exception as err:  # noqa: BLE001 - minari raises many types for a bad directory
        raise DatasetError(f"cannot open Minari dataset {data_dir}: {err}") from err
    if Path(dst).exists() and any(Path(dst).iterdir()):
        raise DatasetError(f"{dst} exists and is not empty; choose a new directory")
    spec = source.env_spec
    metadata = DatasetMetadata(
        env_id=getattr(spec, "id", None),
        env_spec=_spec_json(spec),
        algorithm=_algorithm(source),
        user={"minari_dataset_id": source.id, "minari_version": str(source.minari_version)},
    )
    count = 0
    target = DEFAULT_SHARD_BYTES if shard_bytes is None else shard_bytes
    created = not Path(dst).exists()
    try:
        with DatasetWriter(dst, metadata=metadata, shard_bytes=target) as writer:
            for data in source.iterate_episodes():
                writer.write(_episode(source, data))
                count += 1
    except BaseException:
        # A refused import leaves DST as it found it, so that a retry is not refused.
        shutil.rmtree(dst, ignore_errors=True)
        if not created:
            Path(dst).mkdir(exist_ok=True)
        raise
    return count


MAX_MINARI_METADATA_BYTES = 64 << 20


def _checked_metadata(data_dir: Path) -> dict[str, Any]:
    """The Minari dataset's ``metadata.json``, refused unless it stores both spaces.

    Read as a regular file (no symlink) of bounded size. Minari makes a space the metadata
    lacks from the env its ``env_spec`` names (``gym.make`` imports and runs the entry point),
    so that no dataset decides what code runs here, both must be stored.

    Example:
        >>> import tempfile
        >>> data_dir = Path(tempfile.mkdtemp())
        >>> _ = (data_dir / "metadata.json").write_text('{"env_spec": "{}"}')
        >>> try:
        ...     _checked_metadata(data_dir)
        ... except UnsafeDataError as err:
        ...     print(str(err).split(" (")[0].endswith("does not store both spaces"))
        True
    """
    path = data_dir / "metadata.json"
    raw = read_regular_file(path, "Minari metadata", MAX_MINARI_METADATA_BYTES)
    try:
        meta = json.loads(raw)
    except ValueError as err:
        raise CorruptDatasetError(f"Minari metadata {path} is not JSON: {err}") from err
    spaces = ("observation_space", "action_space")
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k), str) for k in spaces):
        raise UnsafeDataError(
            f"Minari metadata {path} does not store both spaces (Minari would make the env "
            "its env_spec names to get them, running code the dataset chose); refused"
        )
    return meta


def _open_checked(data_dir: Path, meta: dict[str, Any]) -> Any:
    """The Minari dataset at ``data_dir``, its storage opened on the spaces of checked ``meta``.

    ``MinariDataset(path)`` would read the metadata again: one changed since the check could
    still name an env to make.
    """
    import minari

    try:
        from minari.dataset._storages import get_minari_storage
        from minari.serialization import deserialize_space
    except ImportError:  # pragma: no cover - another minari layout: its reader, after the check
        return minari.MinariDataset(data_dir)
    storage = get_minari_storage(meta["data_format"])(
        data_dir,
        deserialize_space(meta["observation_space"]),
        deserialize_space(meta["action_space"]),
        jpeg_encoding=bool(meta.get("jpeg_encoding", True)),
    )
    return minari.MinariDataset(storage)


def _algorithm(source: Any) -> str | None:
    stored = getattr(source.storage, "metadata", {})
    name = stored.get("algorithm_name") if isinstance(stored, dict) else None
    return name if isinstance(name, str) else None


def _spec_json(spec: Any) -> dict[str, Any] | None:
    try:
        return dict(json.loads(spec.to_json())) if spec is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def _episode(source: Any, data: Any) -> SingleAgentEpisode:
    terminations = np.asarray(data.terminations, dtype=bool)
    truncations = np.asarray(data.truncations, dtype=bool)
    episode = SingleAgentEpisode(
        f"{source.id}/{data.id}",
        observations=_steps(data.observations, source.observation_space),
        observation_space=source.observation_space,
        actions=_steps(data.actions, source.action_space),
        action_space=source.action_space,
        rewards=[float(r) for r in np.asarray(data.rewards).reshape(-1)],
        terminated=bool(terminations[-1]) if len(terminations) else False,
        truncated=bool(truncations[-1]) if len(truncations) else False,
        len_lookback_buffer=0,
    )
    return episode.to_numpy()


def _steps(batched: Any, space: Any) -> list[Any]:
    """Minari's per-step values as a list of items (its Text steps are a list of strings)."""
    if isinstance(space, gym.spaces.Text) and isinstance(batched, (list, tuple)):
        return list(batched)
    return unbatch(batched)
