"""Minari interop: export a dataset to a Minari dataset on local disk, import one back.

Needs the ``minari`` extra (``pip install 'episodes[minari]'``), imported when a function here
is called. Minari stores whole episodes as observations and infos (``n + 1``), actions,
rewards, terminations and truncations (``n`` each), with the env spec and spaces; a round trip
keeps every step of those columns exactly (images too: they are stored raw, not as JPEG), and
infos when every step's info dict has one layout of str keys and scalar or numpy values. What
Minari has no place for is not exported: our episode ids (Minari numbers episodes 0, 1, ...),
``t_started`` (re-imported episodes start at 0), extra-model-outputs, lookback and
``custom_data``; zero-step episodes are skipped. Minari records every Discrete space as int64.

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
import dataclasses
import inspect
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
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    UnsafeDataError,
    UnstorableValueError,
)
from episodes.io.format import read_regular_file
from episodes.io.metadata import DatasetMetadata
from episodes.io.minari_arrow import minari_episode_data, one_batch_per_episode, reading
from episodes.io.minari_metadata import minari_user
from episodes.io.minari_pieces import whole_episodes
from episodes.io.minari_spaces import check_minari_space
from episodes.io.minari_values import (
    EpisodeBuffers,
    check_infos_flag,
    split_infos,
    split_steps,
    text_ends_in_nul,
)
from episodes.io.reader import dataset_info
from episodes.io.shard_writer import DEFAULT_SHARD_BYTES, DatasetWriter
from episodes.io.writer import take_back

__all__ = ["export_minari", "import_minari"]

PathLike = str | os.PathLike[str]


def _minari() -> Any:
    try:
        import minari
    except ImportError as err:
        raise ImportError(
            f"Minari interop needs minari: pip install 'episodes[minari]' ({err})"
        ) from err
    return minari


@contextlib.contextmanager
def _datasets_root(root: PathLike | None) -> Iterator[None]:
    """Points minari at ``root`` (else its variable's directory) for the duration, absolute.

    Minari reads the variable on each call and resolves a relative path differently in its
    writer and its reader.
    """
    old = os.environ.get("MINARI_DATASETS_PATH")
    if root is None and old is None:
        yield
        return
    os.environ["MINARI_DATASETS_PATH"] = str(_datasets_dir(root))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def _datasets_dir(root: PathLike | None) -> Path:
    """Minari's datasets directory, as its ``get_dataset_path`` finds it, without making it."""
    if root is not None:
        return Path(os.path.abspath(os.fspath(root)))
    found = os.environ.get("MINARI_DATASETS_PATH")
    if found is None:
        return Path.home() / ".minari" / "datasets"
    return Path(os.path.abspath(found))  # as minari would find a relative one from here


def _missing(path: Path) -> list[Path]:
    """``path`` and its parents that do not exist yet, deepest first (what a call will make)."""
    return list(itertools.takewhile(lambda p: not p.exists(), [path, *path.parents]))


def _remove_made(made: list[Path]) -> None:
    """Removes what this call made: its own directory, then each parent it made while empty.

    Minari puts a ``namespace_metadata.json`` into a namespace directory it makes.
    """
    if not made:
        return
    shutil.rmtree(made[0], ignore_errors=True)
    for parent in made[1:]:
        with contextlib.suppress(OSError):
            names = os.listdir(parent)
            if names == ["namespace_metadata.json"]:
                os.unlink(parent / names[0])
            parent.rmdir()


@contextlib.contextmanager
def _refusals(src: PathLike) -> Iterator[None]:
    """Our refusals of data Minari cannot store, worded as the export's (one CLI line)."""
    try:
        yield
    except DatasetError as err:
        raise DatasetError(f"Minari refused the export of {os.fspath(src)}: {err}") from err


# Minari's own form: a namespace of two or more characters (slashes inside), a name without
# dots, a version; checked here so an id it would refuse is refused before anything is read.
_DATASET_ID = re.compile(r"(?:[-\w][-\w/]*[-\w]/)?[-\w]+-v\d+")


def _env_spec_json(meta: DatasetMetadata) -> str | None:
    """The env spec Minari records: ours as stored, else the registry's for the env id.

    Nothing is made or imported (``gym.spec`` reads the registry); a spec that cannot be
    serialized (a callable entry point) is left out.
    """
    from gymnasium.envs.registration import EnvSpec

    failures = (KeyError, TypeError, ValueError, AttributeError, gym.error.Error)
    if meta.env_spec is not None:
        with contextlib.suppress(*failures):
            return EnvSpec.from_json(json.dumps(meta.env_spec)).to_json()
    if meta.env_id is not None:
        with contextlib.suppress(*failures):
            return gym.spec(meta.env_id).to_json()
    return None


def export_minari(
    src: PathLike,
    dataset_id: str,
    *,
    root: PathLike | None = None,
    description: str | None = None,
    infos: bool | None = None,
) -> int:
    """Writes the episodes of ``src`` (v1 or v2) as Minari dataset ``dataset_id``.

    Every space is checked, and every value cast to its space's dtype, before anything is
    written; no env is made (the env spec recorded is the one our metadata stores). Episodes
    are numbered in the order ``dataset_info`` lists them (:mod:`episodes.io.minari_pieces`).

    Args:
        src: Our dataset.
        dataset_id: Minari id, ``namespace/name-vN`` or ``name-vN``.
        root: Minari's datasets directory (default: minari's, ``MINARI_DATASETS_PATH`` or
            ``~/.minari/datasets``).
        description: Stored in the Minari metadata.
        infos: Export infos (Minari stores them as per-step arrays: every step of every
            episode must have one info layout). ``None`` (best effort): exported when they
            all fit, else left out with a warning; ``True``: a ``DatasetError`` when they do
            not fit; ``False``: left out.

    Returns:
        The number of episodes exported.

    Raises:
        DatasetError: ``src`` is unreadable, holds no episode with steps, has no spaces, or
            holds something Minari cannot store (a space, episodes of other spaces, values
            or rewards of another dtype the cast would change, an episode of more than
            ``MAX_MINARI_STEPS`` (131,071) steps, which Minari's reader cuts in two, with
            ``infos=True`` infos of different layouts).
        TypeError: ``infos`` is not ``True``, ``False`` or ``None``.
        ValueError: ``dataset_id`` is malformed or already exists.
        OSError: The system failed a write (``root`` not writable, a full disk), naming the
            path; nothing of the dataset is left behind.

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
    minari = _minari()
    check_infos_flag(infos)
    if not isinstance(dataset_id, str):
        raise TypeError(f"dataset_id must be a str, got {type(dataset_id).__name__}")
    if not _DATASET_ID.fullmatch(dataset_id) or ".." in dataset_id.split("/"):
        raise ValueError(
            f"dataset_id must look like 'name-v0' or 'namespace/name-v0', got {dataset_id!r}"
        )
    info = dataset_info(src)
    meta = DatasetMetadata.from_json(info.metadata or {}, f"{src} metadata")
    if info.num_steps == 0:
        raise DatasetError(f"{src} holds no episode with steps to export")
    if info.observation_space is None or info.action_space is None:
        raise DatasetError(f"{src} has no observation/action spaces; Minari needs them")
    spaces = (info.observation_space, info.action_space)
    base = _datasets_dir(root)
    if base.exists() and not base.is_dir():
        raise DatasetError(f"the Minari datasets directory {base} is not a directory")
    target = base / dataset_id
    if target.exists():
        raise ValueError(f"a Minari dataset {dataset_id!r} already exists at {target}")
    with _refusals(src):
        check_minari_space(spaces[0], "the observation space")
        check_minari_space(spaces[1], "the action space")
    buffers = EpisodeBuffers(spaces, infos=infos)
    ranks = []
    for r, episode in whole_episodes(src):
        if len(episode) > 0:
            with _refusals(src):
                buffers.add(episode)
            ranks.append(r)
    # Numbered in the order the dataset lists its episodes (first pieces), not completion's.
    held, order = buffers.buffers, np.argsort(ranks, kind="stable")
    buffers.buffers = [dataclasses.replace(held[k], id=n) for n, k in enumerate(order)]
    if not buffers.buffers:
        raise DatasetError(f"{src} holds no episode with steps to export")
    env_spec = _env_spec_json(meta)
    # Raw arrays: Minari's default JPEG-encodes image Boxes, lossy (and refuses some shapes).
    create = minari.create_dataset_from_buffers
    raw = (
        {"jpeg_encoding": False} if "jpeg_encoding" in inspect.signature(create).parameters else {}
    )
    made = _missing(target)  # the dataset's directory, its namespace's, the root, as needed
    with _datasets_root(root), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # minari nags about optional fields
        try:
            created = create(
                dataset_id,
                buffers.buffers,
                env=None,  # a name or spec here would be gym.make'd: the env's code would run
                observation_space=spaces[0],
                action_space=spaces[1],
                algorithm_name=meta.algorithm or meta.policy,
                description=description or f"exported by episodes from {os.fspath(src)}",
                data_format="arrow",
                **raw,
            )
            # Minari's writer cuts an episode into batches its reader takes for episodes.
            one_batch_per_episode(Path(created.storage.data_path), len(buffers.buffers))
            update: dict[str, Any] = {"dataset_size": created.storage.get_size()}
            if env_spec is not None:
                update["env_spec"] = env_spec
            created.storage.update_metadata(update)
        except BaseException as err:
            if isinstance(err, ValueError) and "already exists" in str(err):
                raise  # made by another process since the check: not ours to remove
            _remove_made(made)  # no half-written Minari dataset left to refuse the retry
            if not isinstance(err, Exception) or isinstance(err, MemoryError):
                raise
            if isinstance(err, OSError) and err.errno is not None:  # the system's, not the data's
                where = err.filename if err.filename is not None else os.fspath(target)
                raise OSError(err.errno, err.strerror or os.strerror(err.errno), where) from err
            # Minari fails in many ways on data it cannot store: all are refusals of this data.
            raise DatasetError(f"Minari refused the export of {src}: {err!r}") from err
    return len(buffers.buffers)


def _minari_data_dir(dataset: PathLike, root: PathLike | None) -> Path:
    path = Path(dataset)
    if path.is_dir():
        return path / "data" if (path / "data").is_dir() else path
    found = _datasets_dir(root) / os.fspath(dataset) / "data"
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

    Episodes get ids ``"<minari id>/<episode number>"`` and Minari's per-step infos; the env
    spec and algorithm name become the dataset metadata, and Minari's other metadata
    (reference scores, description, author, ...) its ``user`` entry
    (:mod:`episodes.io.minari_metadata`). Returns the number of episodes imported.

    The Minari metadata must store both spaces: Minari makes a missing one by making the env
    its ``env_spec`` names, which runs code the dataset chose, so such a dataset is refused.

    Raises:
        DatasetError: The Minari dataset is missing or unreadable, does not store its spaces
            (``UnsafeDataError``), or ``dst`` is not an empty directory (a symlink is not).

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
    _minari()  # without the extra, an ImportError before anything is read
    data_dir = _minari_data_dir(dataset, root)
    out = Path(dst)
    if out.is_symlink():  # as the copies: what a refused import made would stay in its target
        raise DatasetError(f"{dst} is a symbolic link; choose a new directory")
    if out.exists() and not out.is_dir():
        raise DatasetError(f"{dst} is not a directory; choose a new directory")
    checked = _checked_metadata(data_dir)
    with reading(data_dir):
        source = _open_checked(data_dir, checked)
        spec = source.env_spec
        metadata = DatasetMetadata(
            env_id=getattr(spec, "id", None),
            env_spec=_spec_json(spec, data_dir),
            algorithm=_algorithm(source),
            user=minari_user(checked, source.id, str(source.minari_version), data_dir),
        )
    if out.exists() and any(out.iterdir()):
        raise DatasetError(f"{dst} exists and is not empty; choose a new directory")
    count = 0
    target = DEFAULT_SHARD_BYTES if shard_bytes is None else shard_bytes
    made = _missing(out)
    try:
        with DatasetWriter(dst, metadata=metadata, shard_bytes=target) as writer:
            for episode in _episodes(source, data_dir, checked):
                writer.write(episode)
                count += 1
    except BaseException:
        # A refused import leaves DST as it found it (its mode too), so that a retry is not
        # refused: what the writer made goes, then the directories made for it, if empty.
        take_back(out, made)
        raise
    return count


def _episodes(source: Any, data_dir: Path, meta: dict[str, Any]) -> Iterator[SingleAgentEpisode]:
    """The Minari dataset's episodes as ours; a failure to read one is a ``DatasetError``.

    Each is read whole and checked against its metadata (:func:`minari_episode_data`).
    A generator: what the caller raises between two episodes is not caught here.
    """
    jpeg_encoding = bool(meta.get("jpeg_encoding", True))  # as _open_checked opens it
    with reading(data_dir):
        episodes = minari_episode_data(source, data_dir, jpeg_encoding)
    while True:
        with reading(data_dir):
            data = next(episodes, None)
            if data is None:
                return
            episode = _episode(source, data)
        yield episode


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
    except (ValueError, RecursionError) as err:  # nested too deep to parse: no metadata
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
    still name an env to make. Its episodes are those of the checked ``total_episodes``, an
    int from 0 to the episodes stored (Minari makes an array of that many numbers first).
    """
    import minari

    total, stored = meta.get("total_episodes"), _stored_episodes(data_dir, meta["data_format"])
    if type(total) is not int or not 0 <= total <= stored:
        raise DatasetError(
            f"cannot read Minari dataset {data_dir}: its metadata's total_episodes {total!r} is "
            f"not an int from 0 to the {stored} episodes stored"
        )

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
    return minari.MinariDataset(storage, episode_indices=np.arange(total))


def _stored_episodes(data_dir: Path, data_format: Any) -> int:
    """The episodes stored, as Minari lays them out: directories ``<n>/`` or HDF5 groups."""
    if data_format in ("arrow", "parquet"):
        with os.scandir(data_dir) as entries:
            names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        return sum(1 for name in names if re.fullmatch("[0-9]+", name))
    try:
        import h5py  # Minari's HDF5 storage reads it: the dataset is unreadable without
    except ImportError as err:  # the `minari` extra brings no h5py: say what does
        raise DatasetError(
            f"cannot read Minari dataset {data_dir}: it is stored as HDF5 (data_format "
            f"'hdf5'), which needs h5py: pip install \"minari[hdf5]\" (or pip install h5py); "
            f"the 'minari' extra of episodes reads Minari's Arrow datasets ({err})"
        ) from err
    with h5py.File(data_dir / "main_data.hdf5", "r") as file:
        return len(file.keys())


def _algorithm(source: Any) -> str | None:
    stored = getattr(source.storage, "metadata", {})
    name = stored.get("algorithm_name") if isinstance(stored, dict) else None
    return name if isinstance(name, str) else None


def _spec_json(spec: Any, data_dir: Path) -> dict[str, Any] | None:
    """The env spec as our metadata's JSON; one we cannot store is left out with a warning.

    Minari reads a spec holding ``inf`` or ``NaN`` (``reward_threshold=inf``), which plain
    JSON has no place for: the spec is dropped (its ``env_id`` is kept), not altered.
    """
    try:
        found = dict(json.loads(spec.to_json())) if spec is not None else None
        DatasetMetadata(env_spec=found).to_json()  # what the writer would refuse
    except UnstorableValueError as err:
        warnings.warn(
            f"the env spec of Minari dataset {data_dir} is left out of the import ({err}); "
            "its env_id is kept",
            stacklevel=3,
        )
        return None
    except (TypeError, ValueError, AttributeError):
        return None
    return found


def _episode(source: Any, data: Any) -> SingleAgentEpisode:
    terminations = np.asarray(data.terminations, dtype=bool)
    truncations = np.asarray(data.truncations, dtype=bool)
    rewards = [float(r) for r in np.asarray(data.rewards).reshape(-1)]
    n = len(rewards)
    where = f"episode {data.id}"
    if np.any(terminations[:-1]) or np.any(truncations[:-1]):  # only the last step ends it
        raise DatasetError(
            f"Minari dataset {source.id}: {where} is terminated or truncated before its last "
            "step (an episode ends there); refused rather than read wrong"
        )
    observations = split_steps(
        data.observations, source.observation_space, n + 1, f"{where} observations"
    )
    actions = split_steps(data.actions, source.action_space, n, f"{where} actions")
    episode = SingleAgentEpisode(
        f"{source.id}/{data.id}",
        observations=observations,
        observation_space=source.observation_space,
        actions=actions,
        action_space=source.action_space,
        rewards=rewards,
        infos=split_infos(data.infos, n + 1, f"{where} infos"),
        terminated=bool(terminations[-1]) if len(terminations) else False,
        truncated=bool(truncations[-1]) if len(truncations) else False,
        len_lookback_buffer=0,
    )
    if text_ends_in_nul(observations, source.observation_space) or text_ends_in_nul(
        actions, source.action_space
    ):
        return episode  # a numpy string column would cut the NULs: list mode keeps them
    return episode.to_numpy()
