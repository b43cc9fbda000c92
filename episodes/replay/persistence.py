"""Saving a replay buffer to disk and building one from a dataset, through ``episodes.io``.

A saved buffer is a directory: ``episodes/``, an ``episodes.io`` dataset holding every stored
episode (oldest first, so reloading keeps the eviction order), and ``replay.json`` with the
buffer's settings, counters, evicted ids and generator state, plus ``priorities.npy`` for a
prioritized buffer. The directory is written under a temporary name and renamed into place,
so a crash never leaves a half-written buffer under the final name. ``replay.json`` records the
CRC-32 of its own content and of ``priorities.npy`` (version 2, see
:mod:`episodes.replay.saved_files`); a version 1 save, written before, loads without them. Its
``episodes`` field binds ``episodes/`` to it (episodes, steps and the dataset manifest's
CRC-32); a save written before that field loads without the check. The episodes are written
and read with their columns batched where they hold no infos or ``custom_data``
(:mod:`episodes.replay.saved_shards`, :mod:`episodes.replay.loaded_shards`), the others one by
one in their place.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from episodes.io import (
    DatasetError,
    DatasetWriter,
    NotADatasetError,
    UnstorableValueError,
    dataset_info,
    read_episodes,
)
from episodes.io.format import fsync_dir
from episodes.io.staging import remove_empty, stage
from episodes.io.tool_args import holds_nan
from episodes.io.values import decode_value, encode_value
from episodes.replay import saved_files
from episodes.replay.dataset_fill import fill_from_dataset
from episodes.replay.dataset_pieces import joined_columns
from episodes.replay.kinds import prioritized_class
from episodes.replay.rng import checked_generator, generator_from_state, sampling_generator
from episodes.replay.saved_agents import FIRST_AGENTS, load_first_agents, saved_first_agents
from episodes.replay.saved_files import (
    EPISODES,
    ITEM_IDS,
    META_CRC,
    PRIORITIES_CRC,
    check_episodes_record,
    checked_record,
    episodes_record,
    loaded_uids,
    meta_crc32,
    priorities_file,
    read_priorities,
    seal,
    uid_fields,
)

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

__all__ = ["buffer_from_dataset", "load_buffer", "save_buffer"]

_META = "replay.json"
_VERSION = 2  # 2: replay.json records checksums; 1 (read too): saves written before them


def save_buffer(buffer: EpisodeReplayBuffer, path: str | os.PathLike[str]) -> None:
    """Writes ``buffer`` to a new directory ``path`` (which must not exist).

    Raises:
        FileExistsError: ``path`` exists (a dangling symlink too).
        NotADirectoryError: ``path`` lies under a file (the message names it).
        episodes.io.UnstorableValueError: An info, output or episode id (stored or evicted)
            the disk format cannot hold: ids are JSON values, so a numpy scalar or bytes id
            that ``add`` took is refused here, and so is an id holding a NaN (the buffer
            tells two NaN ids apart by object; a dataset makes every NaN one id), the message
            naming the id and its place (nothing is written); so is an episode's first agent.
        TypeError: A generator (``buffer.rng`` assigned after construction) over a bit
            generator that is not one of numpy's own, which ``load`` could not restore.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10, seed=0)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0],
        ...                            rewards=[1.0], len_lookback_buffer=0))
        >>> path = tempfile.mkdtemp() + "/buf"
        >>> save_buffer(buf, path)
        >>> load_buffer(path).get_episode_ids()
        ['a']
    """
    final = Path(path)
    if os.path.lexists(final):  # a dangling link too: the rename would fail on it
        raise FileExistsError(f"{final} exists; save a buffer to a new directory")
    checked_generator(buffer.rng, "rng")  # a save load() could not restore: nothing written
    # Typed as the datasets store ids: a tuple id is no JSON list on the way back.
    evicted = _encoded_ids(buffer.get_evicted_ids(), "evicted id {i} of {n}, in eviction order")
    ids = _encoded_ids(  # checked before anything is written
        buffer.get_episode_ids(), "stored episode {i} of {n}, oldest first"
    )
    first_agents = saved_first_agents(buffer._table)  # {} where each is an agent_id
    # As the dataset copies stage theirs: any name that fits, the mode of any new directory
    # (mkdtemp's 0o700 would keep other users from loading it), parents made taken back.
    staged = stage(final)
    tmp = staged.path
    try:
        # One v2 dataset: its shards are fsynced as a whole, where the chunk format fsyncs
        # one directory per episode (5-11 s for 500 episodes on a disk, now a fraction).
        _save_episodes(buffer, tmp / "episodes", ids)
        meta: dict[str, Any] = {
            "version": _VERSION,
            "kind": "prioritized" if prioritized_class(type(buffer)) else "uniform",
            "capacity": buffer.capacity,
            "batch_size_B": buffer.batch_size_B,
            "counters": buffer.get_counters(),
            "evicted": evicted,
            # JSON-safe: MT19937 and Philox states hold arrays (lists load back the same).
            "rng": _plain(buffer.rng.bit_generator.state),
            **uid_fields(buffer),  # how load numbers its items
            # What load checks episodes/ against: nothing appended, no other save's.
            EPISODES: episodes_record(tmp / "episodes", ids, buffer.get_num_timesteps()),
            **first_agents,  # the agents add compares chunks with, where not the agent_id
        }
        if meta["kind"] == "prioritized":
            held: Any = buffer  # a PrioritizedEpisodeReplayBuffer, maybe of another import
            meta["alpha"] = held.alpha
            meta["max_priority"] = held.max_priority
            order = np.concatenate(
                [held.get_episode_indices(i) for i in held.get_episode_ids()]
                or [np.zeros(0, np.int64)]
            )
            data = priorities_file(held.get_priorities(order))
            _write_synced(tmp / "priorities.npy", data)
            meta[PRIORITIES_CRC] = zlib.crc32(data)
        _write_synced(tmp / _META, json.dumps(seal(meta)).encode())
        fsync_dir(tmp)
        # Renamed only once every byte is on disk: a crash leaves no save, or a whole one.
        try:
            os.replace(tmp, final)
        except OSError as error:  # another save (or anything) took the path since the check
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            raise FileExistsError(
                error.errno, f"{final} exists; save a buffer to a new directory"
            ) from error
        fsync_dir(final.parent)
    except BaseException:
        staged.drop()
        remove_empty(staged.made)
        raise
    staged.close()


def _save_episodes(buffer: EpisodeReplayBuffer, path: Path, ids: list[Any]) -> None:
    """The stored episodes as a dataset: columns batched, else episode by episode."""
    from episodes.replay.saved_shards import BatchMismatch, write_stored

    try:
        return write_stored(buffer, path, ids)
    except BatchMismatch:  # the writer's encoding is not what the batched path writes
        if os.path.lexists(path):
            shutil.rmtree(path)
    with DatasetWriter(path) as writer:
        _write_episodes(writer, buffer.get_episodes())


def _load_episodes(buffer: EpisodeReplayBuffer, root: Path, first: int) -> tuple[list[Any], int]:
    """Adds the saved episodes to ``buffer`` (new), item ids from ``first``; their ids, steps.

    Read as one state (:mod:`episodes.replay.loaded_shards`: plain pieces gathered, the others
    read one by one), else, where that state could differ from adding them, episode by
    episode: ``add`` then judges them, its refusal the one raised.
    """
    from episodes.replay.buffer import EpisodeReplayBuffer
    from episodes.replay.loaded_shards import read_stored
    from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer

    prioritized = prioritized_class(type(buffer))
    base = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    hooks = ("add", "set_state", "_check_fit", "_prepare", "_write", "_on_append", "_on_reserve")
    if all(getattr(type(buffer), h) is getattr(base, h) for h in hooks):  # yours: its add
        loaded = read_stored(root / "episodes")
        if loaded is not None and (loaded.steps <= buffer.capacity or len(loaded.ids) < 2):
            try:
                loaded.restore(buffer, first)
                return loaded.ids, loaded.steps
            except (TypeError, ValueError):
                pass  # a state set_state refuses: add gives its own refusal
    episodes = list(read_episodes(root / "episodes", numpy=True, verify=True))
    buffer._store.next_uid = first  # a new buffer's, empty
    try:
        buffer.add(episodes)
    except (TypeError, ValueError) as err:  # e.g. text observations, not numeric arrays
        raise ValueError(
            f"{root}: damaged replay buffer (its episodes cannot be stored: {err})"
        ) from err
    return [ep.id_ for ep in episodes], sum(len(ep) for ep in episodes)


def _write_episodes(writer: DatasetWriter, episodes: list[Any]) -> None:
    """Writes the stored episodes; a value the dataset refuses is named with its episode."""
    for i, episode in enumerate(episodes):
        try:
            writer.write(episode)
        except UnstorableValueError as err:  # found by its place, as an unstorable id is
            raise UnstorableValueError(
                f"stored episode {i} of {len(episodes)}, oldest first (id {episode.id_!r}), "
                f"cannot be saved: {err}"
            ) from err


def _encoded_ids(ids: list[Any], place: str) -> list[Any]:
    """The ids as the datasets store them; an unstorable one is named with its place."""
    encoded = []
    for i, id_ in enumerate(ids):
        if holds_nan(id_):  # the buffer tells NaN ids apart by object, a dataset cannot
            raise UnstorableValueError(
                f"episode id {id_!r} ({place.format(i=i, n=len(ids))}) cannot be saved: it "
                "holds a NaN, which the dataset reads back as one id for every NaN, so the "
                "loaded buffer would join, part or refuse its chunks otherwise"
            )
        try:
            encoded.append(encode_value(id_, blob=None, where="id"))
        except UnstorableValueError as err:
            raise UnstorableValueError(
                f"episode id {id_!r} ({place.format(i=i, n=len(ids))}) cannot be saved: the "
                f"dataset stores ids that are None, str, int, float, bool or tuples of them ({err})"
            ) from None
    return encoded


def _as_tuples(value: Any) -> Any:
    """A version-1 save's evicted id: its JSON lists (tuples when saved) as tuples."""
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def load_buffer(
    path: str | os.PathLike[str], *, seed: Any = None, make: type[EpisodeReplayBuffer] | None = None
) -> EpisodeReplayBuffer:
    """Reads a buffer written by :func:`save_buffer` (its class, contents and counters).

    The stable item indices are kept where they run on by one in the saved order, else
    renumbered after every id the saved buffer issued
    (:func:`~episodes.replay.saved_files.loaded_uids`): a batch's indices sampled before the
    save name their own step or none. ``make``, a
    subclass of the buffers (not either of them), is the class to build instead of the saved
    kind's (``EpisodeReplayBuffer.load`` passes the class it is called on); it must be of the
    saved kind (uniform or prioritized), or a ``ValueError`` is raised before its episodes are read.

    Raises:
        ValueError: ``path`` holds no saved buffer of a known version, or a damaged one:
            a file that is a symlink or no regular file, fields that are missing, unknown
            or of the wrong type, counters that are not ints >= 0 or count fewer added steps
            than are stored, evicted ids that repeat or name a stored episode, a generator
            state numpy refuses or cannot use, episodes the buffer cannot store, an
            ``episodes/`` other than the one saved with ``replay.json`` (episodes appended,
            another save's), priorities that are not one finite float64 > 0 per stored step
            (no floor is applied: a 0 is refused), a file that disagrees with its checksum.
        episodes.io.DatasetError: The episodes' dataset is damaged; its ``DatasetIOError``
            (an ``OSError``): the system failed a read (no damage known).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import PrioritizedEpisodeReplayBuffer
        >>> buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     save_buffer(buf, tmp + "/buf")
        ...     back = load_buffer(tmp + "/buf")
        >>> type(back).__name__, back.get_episode_ids(), back.get_num_timesteps()
        ('PrioritizedEpisodeReplayBuffer', ['a'], 2)
    """
    from episodes.replay.buffer import EpisodeReplayBuffer
    from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer

    root = Path(path)
    try:
        meta = saved_files.read_meta(root / _META)
    except ValueError as err:
        raise ValueError(f"{root} holds no saved replay buffer ({err})") from None
    version = meta.get("version") if isinstance(meta, dict) else None
    # type(): True == 1 and 1.0 == 1, but neither is a version save writes.
    if not isinstance(meta, dict) or type(version) is not int or version not in (1, _VERSION):
        raise ValueError(f"{root}: unsupported replay buffer version {version!r}")
    _check_meta(meta, root)
    prioritized = meta["kind"] == "prioritized"
    subclass = make not in (None, EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer)
    if make is None or not subclass:  # the saved kind
        make = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    elif prioritized_class(make) != prioritized:
        name, is_ = make.__name__, "is not" if prioritized else "is"
        raise ValueError(
            f"{root} holds a {meta['kind']} replay buffer: {name} {is_} a "
            f"PrioritizedEpisodeReplayBuffer, so {name}.load cannot build it; load it with "
            f"{'Prioritized' if prioritized else ''}EpisodeReplayBuffer.load"
        )
    _check_episodes_dir(root / "episodes")
    first, issued = loaded_uids(meta)  # checked by _check_meta
    if seed is not None:  # the caller's: refused as it is, not as damage of the save
        sampling_generator(seed)
    settings: dict[str, Any] = {"batch_size_B": meta["batch_size_B"], "seed": seed}
    if prioritized:
        settings["alpha"] = meta["alpha"]
    try:  # the saved settings: a capacity, batch size or alpha the buffer refuses is damage
        buffer = make(meta["capacity"], **settings)
    except (TypeError, ValueError) as err:
        if isinstance(err, TypeError) and subclass:
            given = ", ".join(f"{key}=..." for key in settings)  # not damage: its signature
            name = make.__name__
            raise TypeError(f"{name}.load calls {name}(capacity, {given}): {err}") from err
        raise ValueError(f"{root}: damaged replay buffer (settings: {err})") from None
    # verify: the episodes were written with checksums; a damaged file is refused, not read.
    read, steps = _load_episodes(buffer, root, first)
    buffer._store.next_uid = max(buffer._store.next_uid, issued)
    if buffer.get_num_timesteps() != steps:
        raise ValueError(f"{root}: damaged replay buffer (its episodes exceed its capacity)")
    if EPISODES in meta:  # absent from saves written before it
        try:
            ids = _encoded_ids(read, "episode {i} of {n} read")
            check_episodes_record(meta[EPISODES], root / "episodes", ids, steps)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{root}: damaged replay buffer ({err})") from None
    try:  # absent from saves written before it: each episode's agent_id is its first agent
        load_first_agents(buffer._table, meta.get(FIRST_AGENTS, []))
    except ValueError as err:
        raise ValueError(f"{root}: damaged replay buffer ({err})") from None
    try:
        evicted = [decode_value(i, blob=None, where="evicted id") for i in meta["evicted"]]
        if version == 1:  # raw JSON then: a tuple id was written as a list, which no id is
            evicted = [_as_tuples(i) for i in evicted]
    except (DatasetError, TypeError, ValueError, KeyError) as err:
        raise ValueError(f"{root}: damaged replay buffer (evicted ids: {err})") from None
    unknown = set(meta["counters"]) - set(buffer.get_counters())
    if unknown:  # set_counters refuses missing counters, and would ignore these
        raise ValueError(f"{root}: damaged replay buffer (unknown counters {sorted(unknown)})")
    try:  # the messages name the counter or the evicted id at fault
        buffer.set_counters(meta["counters"], evicted)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{root}: damaged replay buffer ({err})") from None
    if seed is None:
        try:
            buffer.rng = generator_from_state(meta["rng"])
        except ValueError as err:
            raise ValueError(f"{root}: damaged replay buffer (generator: {err})") from None
    if prioritized:  # the kind built: make is of the saved kind (checked above)
        _load_priorities(buffer, root, meta["max_priority"], meta.get(PRIORITIES_CRC), first)
    # Checked last, so that a hand-edited field is refused by the check that names it; the
    # buffer built so far is dropped.
    if META_CRC in meta and meta[META_CRC] != meta_crc32(meta):
        raise ValueError(f"{root}: damaged replay buffer ({_META} disagrees with its checksum)")
    return buffer


def _load_priorities(
    buffer: Any, root: Path, max_priority: float, crc: int | None, first: int
) -> None:
    try:
        priorities = read_priorities(root / "priorities.npy", buffer.get_num_timesteps(), crc)
    except ValueError as err:
        raise ValueError(f"{root}: damaged replay buffer ({err})") from None
    try:  # as saved: the 1e-12 floor of update_priorities would hide a 0 and move a 1e-300
        buffer._set_saved_priorities(priorities, first)
        buffer.max_priority = max_priority
    except ValueError as err:
        raise ValueError(f"{root}: damaged replay buffer (priorities: {err})") from None


def _check_meta(meta: dict[str, Any], root: Path) -> None:
    """Refuses a replay.json whose fields are missing or of the wrong type (nothing built)."""
    fields: dict[str, Any] = {
        "kind": str,
        "capacity": int,
        "batch_size_B": int,
        "counters": dict,
        "evicted": list,
        "rng": dict,
    }
    if meta.get("kind") == "prioritized":
        fields.update(alpha=(int, float), max_priority=(int, float))
    if FIRST_AGENTS in meta:  # optional: written where an episode's first agent is a later one's
        fields[FIRST_AGENTS] = list
    checksums = [META_CRC, PRIORITIES_CRC] if meta.get("kind") == "prioritized" else [META_CRC]
    if meta["version"] > 1:
        fields.update(dict.fromkeys(checksums, int))
    for key, kind in fields.items():
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"{root}: damaged replay buffer ({key}: {value!r})")
        if key in checksums and not 0 <= value < 1 << 32:
            raise ValueError(f"{root}: damaged replay buffer ({key}: {value!r} is no CRC-32)")
    if EPISODES in meta:  # optional: saves written before it lack it
        fields[EPISODES] = dict
        try:
            checked_record(meta[EPISODES])
        except ValueError as err:
            raise ValueError(f"{root}: damaged replay buffer ({err})") from None
    if meta["kind"] not in ("uniform", "prioritized"):
        raise ValueError(f"{root}: damaged replay buffer (unknown kind {meta['kind']!r})")
    try:
        loaded_uids(meta)
    except ValueError as err:
        raise ValueError(f"{root}: damaged replay buffer ({err})") from None
    unknown = set(meta) - set(fields) - {"version", *ITEM_IDS}  # ITEM_IDS: loaded_uids
    if unknown:  # a version 1 save holds no checksums, a uniform one no alpha
        raise ValueError(f"{root}: damaged replay buffer (unknown fields {sorted(unknown)})")


def _plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars as lists and Python numbers (for JSON)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _check_episodes_dir(path: Path) -> None:
    """Refuses an ``episodes/`` that is missing, a symlink (out of the save) or no directory."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise ValueError(f"{path.parent}: damaged replay buffer ({path} is missing)") from None
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        what = "a symlink" if stat.S_ISLNK(mode) else "no directory"
        raise ValueError(f"{path.parent}: damaged replay buffer ({path} is {what}, refused)")


def buffer_from_dataset(
    path: str | os.PathLike[str],
    *,
    capacity: int | None = None,
    prioritized: bool = False,
    seed: Any = None,
    make: type[EpisodeReplayBuffer] | None = None,
    **kwargs: Any,
) -> EpisodeReplayBuffer:
    """A buffer filled with every chunk of an ``episodes.io`` dataset (offline RL).

    Episodes come in ``dataset_info``'s order (where each one's first piece was written), each
    one's pieces in time order (a piece waits for the one before it, an episode's first piece
    for every episode written before it to begin), so continuing chunks join their episode;
    the pieces go to ``add`` in batches (:mod:`episodes.replay.dataset_fill`). With a
    capacity below the dataset's size the oldest whole episodes give way, as in training. A
    later piece of an episode evicted while loading goes with its episode, as a chunk of one
    ``add`` that continues an episode the same add evicted: it is checked as joining where the
    episode's pieces stopped, and its steps count as added. So the counters do not depend on
    how the dataset split its episodes into pieces: ``get_added_timesteps()`` counts every step
    of the dataset, and the buffer holds the episodes adding them joined would leave. Columns
    take the dtypes the pieces join in, as the torch datasets give them (int8 beside uint8:
    int16), whichever piece comes first (:func:`~episodes.replay.dataset_pieces.joined_columns`).

    A buffer finds episodes by Python equality, a dataset by value and type: ids that are
    different episodes in a dataset but equal in Python (``1``, ``1.0`` and ``True``) are
    refused, and so are unhashable ids (lists, dicts), which a buffer cannot key by.

    Args:
        path: The dataset directory.
        capacity: Steps to keep (default: all steps read, pieces committed while loading too).
        prioritized: Build a :class:`PrioritizedEpisodeReplayBuffer`.
        seed: Seed of the sampling generator.
        make: The buffer class to build (a subclass of either), instead of the one
            ``prioritized`` names.
        **kwargs: More constructor arguments (``alpha``, ``batch_size_B``).

    Raises:
        ValueError: Two ids that the dataset keeps apart are equal in Python; a piece that
            does not continue its episode (as ``add`` refuses it, naming the dataset and the
            episode), evicted or not.
        TypeError: An unhashable id.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as writer:
        ...     _ = writer.write(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0],
        ...                      actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0))
        >>> buffer_from_dataset(path).get_num_timesteps()
        2
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as writer:
        ...     for id_ in (1, 1.0):
        ...         _ = writer.write(SingleAgentEpisode(id_, observations=[0.0, 1.0],
        ...                          actions=[0], rewards=[1.0], len_lookback_buffer=0))
        >>> buffer_from_dataset(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: episode ids 1 and 1.0 are different episodes in the dataset but equal ...
    """
    from episodes.replay.buffer import EpisodeReplayBuffer
    from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer

    _refuse_save(Path(path))
    # The default is the steps read (the manifest's count, a first guess, is raised as pieces
    # committed since come): a concurrent writer's piece evicts nothing.
    default = capacity is None
    if make is None:
        make = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    guess = max(1, dataset_info(path).num_steps) if capacity is None else capacity
    buffer = make(guess, seed=seed, **kwargs)
    # Columns in the dtypes the pieces join in (as the torch datasets give them), whichever
    # piece comes first: not the first piece's, which a later one may not fit.
    buffer._joined = joined_columns(path)
    # In dataset_info's order (where each episode's first piece was written), each episode's
    # pieces in time order, whatever order they were written in (dataset_fill).
    read = fill_from_dataset(buffer, path, default)
    if default:
        buffer.capacity = max(1, read)
    buffer._joined = None  # later adds: the first chunk's dtypes, as documented
    return buffer


def _refuse_save(root: Path) -> None:
    """A buffer's save is no dataset (its episodes are one, under ``episodes/``): say so."""
    if (root / _META).is_file() and not any(
        (root / marker).exists() for marker in ("manifest.jsonl", "format.json")
    ):
        raise NotADatasetError(
            f"{root} is a saved replay buffer, not an episodes dataset: "
            f"EpisodeReplayBuffer.load({os.fspath(root)!r}) restores it, and "
            f"from_dataset({os.fspath(root / 'episodes')!r}) reads the episodes it holds"
        )
