"""The staged directory a whole-dataset copy writes into before it is renamed into place.

``migrate``, ``merge``, ``split`` and ``filter_dataset`` write ``DST`` as
``.DST.partial-<pid>-<16 hex digits>`` next to it and rename it once complete. Where ``DST``
is an empty directory already, the staged directory is made inside it instead (the same
filesystem, whatever ``DST``'s parent is: a mount point, or a parent it may not write) and
its entries are moved up into ``DST``, the manifest last (:func:`place`). The copying
process holds an ``flock`` on that directory while it writes; a copy stopped where it could
not clean up (``SIGKILL``, a power cut) leaves it behind, and the next copy into the same
``DST`` removes it (beside ``DST`` or inside it): a staged directory whose writer is provably
gone, its process no longer alive and its lock free. A partial of a copy still running (its
process alive, or its lock held) is never touched, nor one named without a process id
(written by an older release). Inside ``DST`` a staged directory is no data
(:func:`is_staged`): ``DST`` still counts as empty, and the readers never list a dataset's
top directory, so one left beside a placed copy is not read.

Example:
    >>> import tempfile
    >>> final = Path(tempfile.mkdtemp()) / "dst"
    >>> staged = stage(final)
    >>> staged.path.name.startswith(f".dst.partial-{os.getpid()}-")
    True
    >>> _ = place(staged.path, final); staged.drop()
    >>> sorted(p.name for p in final.parent.iterdir())
    ['dst']
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from episodes.io.errors import NO_LINKS, DatasetError, links_unsupported, try_flock
from episodes.io.fork_lock import ForkLock
from episodes.io.format import MANIFEST_FILE

__all__ = [
    "Staged",
    "is_staged",
    "place",
    "remove_empty",
    "remove_stale",
    "stage",
    "staged_stem",
]

_PID_HEX = r"\.partial-(\d{1,10})-[0-9a-f]{16}"
_STAGED_SUFFIX = re.compile(_PID_HEX)
_ANY_STAGED = re.compile(rf"\..+{_PID_HEX}")  # inside DST: whatever DST was called then
# Room for the name of DST in a staged name: 255 bytes less ``.``, ``.partial-``, a pid of up
# to 10 digits, ``-`` and 16 hex digits.
_NAME_BYTES = 255 - 37
# Held while stage() makes and locks a directory, and while remove_stale() takes a lock to
# remove one: a directory of this process is never judged between its mkdir and its flock.
_MAKING = ForkLock()


def staged_stem(final: Path) -> str:
    """``final``'s name, cut to the characters that leave room for a staged name's suffix.

    Any name a file system takes gets a staged directory (a 250-byte ``DST`` too); two long
    names that share their first 218 bytes share a stem, which only lets one copy remove the
    other's staged directory once its writer is provably gone (:func:`remove_stale`).

    Example:
        >>> staged_stem(Path("dst")), len(staged_stem(Path("d" * 250)))
        ('dst', 218)
    """
    name = final.name
    while len(os.fsencode(name)) > _NAME_BYTES:
        name = name[:-1]
    return name


class Staged:
    """A staged directory (``path``), the parents made for it (``made``) and its held lock.

    Example:
        >>> import tempfile
        >>> staged = stage(Path(tempfile.mkdtemp()) / "new" / "dst")
        >>> [p.name for p in staged.made]
        ['new']
        >>> staged.drop(); remove_empty(staged.made); staged.made[0].exists()
        False
    """

    def __init__(self, path: Path, made: list[Path], fd: int) -> None:
        self.path, self.made, self._fd = path, made, fd

    def drop(self) -> None:
        """Removes the staged directory (still locked while it goes) and releases the lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.close()

    def close(self) -> None:
        """Releases the lock (after the rename into place, or after :meth:`drop`)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


def stage(final: Path) -> Staged:
    """An empty, locked directory next to ``final`` to write into, renamed into place when done.

    Made with ``mkdir``, so it gets the mode any new directory gets (``0o777`` less the
    umask), not ``mkdtemp``'s ``0o700``: the renamed copy is as readable as a recorded one.
    Where ``final`` is a directory already (an empty one, checked by the caller), it is made
    inside ``final``: its entries are moved up from there by :func:`place`, which works where
    ``final`` is a mount point or its parent is not writable. Stale staged directories of
    ``final`` are removed first (:func:`remove_stale`).

    Example:
        >>> import tempfile
        >>> final = Path(tempfile.mkdtemp()) / "copy"
        >>> staged = stage(final); staged.path.name.startswith(".copy.partial-")
        True
        >>> staged.drop(); final.exists()
        False
    """
    inside = final.is_dir() and not final.is_symlink()
    home = final if inside else final.parent
    made: list[Path] = []
    if not inside:
        made = list(itertools.takewhile(lambda p: not os.path.lexists(p), final.parents))
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file (or a dangling link) above
            above = next(
                (p for p in reversed(final.parents) if os.path.lexists(p) and not p.is_dir()),
                final.parent,
            )
            raise NotADirectoryError(
                f"{final}: {above} is not a directory, so nothing can be made below it"
            ) from None
    staged: Path | None = None
    try:
        remove_stale(final)
        while True:
            name = f".{staged_stem(final)}.partial-{os.getpid()}-{secrets.token_hex(8)}"
            with _MAKING:  # made and locked as one step for this process's remove_stale
                try:
                    (home / name).mkdir()
                except FileExistsError:  # pragma: no cover - 64 random bits taken already
                    continue
                staged = home / name
                fd = os.open(staged, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
                try:  # no file locks on that filesystem: DatasetIOError
                    held = try_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, home)
                    if held is not None:
                        raise held
                except BaseException:
                    os.close(fd)
                    raise
                return Staged(staged, made, fd)
    except BaseException:
        if staged is not None:
            with contextlib.suppress(OSError):
                staged.rmdir()
        remove_empty(made)
        raise


def place(staged: Path, final: Path) -> Callable[[], None]:
    """Puts the complete copy ``staged`` at ``final``; returns what takes it back out.

    A ``final`` that is no directory yet is ``staged`` renamed. An existing one (checked
    empty but for staged directories, :func:`is_staged`, under an ``flock`` on it that other
    copies into it wait for) is filled in place instead, the manifest moved in last, so a
    reader sees no dataset until it is whole: a rename over it would replace it, leaving a
    shell whose current directory it is (``episodes migrate SRC .``) in a removed directory.
    ``staged`` (next to ``final`` or inside it) stays, emptied: drop it after.

    Raises:
        DatasetError: ``final`` is a directory that is not empty (any more).
        DatasetIOError: Its filesystem has no file locks or hard links.
        OSError: The system failed a rename; what was moved in went back to ``staged``.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); (root / "dst").mkdir(); (root / "s").mkdir()
        >>> _ = (root / "s" / MANIFEST_FILE).write_text("")
        >>> undo = place(root / "s", root / "dst")
        >>> os.listdir(root / "dst"), os.listdir(root / "s")
        (['manifest.jsonl'], [])
        >>> undo(); os.listdir(root / "dst"), os.listdir(root / "s")
        ([], ['manifest.jsonl'])
    """
    try:
        fd = os.open(final, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        os.replace(staged, final)
        return lambda: os.replace(final, staged)
    moved: list[str] = []

    def undo() -> None:
        for name in reversed(moved):  # the manifest first: no dataset is seen half gone
            os.rename(final / name, staged / name)
        moved.clear()

    try:
        try_flock(fd, fcntl.LOCK_EX, final)  # no file locks there: DatasetIOError
        if not all(map(is_staged, os.listdir(fd))):  # ``staged`` may be in it
            raise DatasetError(f"{final} exists and is not empty; choose a new directory")
        for name in sorted(os.listdir(staged), key=lambda name: name == MANIFEST_FILE):
            if name == MANIFEST_FILE:  # a link: never over a manifest a writer made meanwhile
                try:
                    os.link(staged / name, final / name, follow_symlinks=False)
                except OSError as err:  # FAT, exFAT: no hard links
                    if err.errno not in NO_LINKS:
                        raise
                    raise links_unsupported(err, final) from err
                moved.append(name)
                os.unlink(staged / name)
            else:
                os.rename(staged / name, final / name)
                moved.append(name)
    except BaseException:
        with contextlib.suppress(OSError):
            undo()
        raise
    finally:
        os.close(fd)
    return undo


def remove_stale(final: str | os.PathLike[str]) -> list[str]:
    """Removes the staged directories of ``final`` whose writer is gone; returns their names.

    Those next to ``final`` named for it, and any inside ``final`` (:func:`is_staged`), made
    there by a copy into it as an empty directory. Gone means both: the process id in the
    name is not alive here, and the directory's ``flock`` can be taken (held while it goes,
    so no other cleaner races this one). A name holding this process's own id (a restarted
    container's training process is often pid 1 again) is judged by the lock alone: a live
    stage of this process holds it through another descriptor.

    Example:
        >>> import tempfile
        >>> final = Path(tempfile.mkdtemp()) / "dst"
        >>> live = stage(final)  # this process is alive and holds the lock
        >>> remove_stale(final), live.path.exists()
        ([], True)
    """
    final = Path(final)
    # No pattern compiled per path: re's module cache would keep one per destination saved to.
    prefix = f".{staged_stem(final)}"

    def beside(name: str) -> re.Match[str] | None:
        return _STAGED_SUFFIX.fullmatch(name, len(prefix)) if name.startswith(prefix) else None

    def inside(name: str) -> re.Match[str] | None:
        return _ANY_STAGED.fullmatch(name)

    entries: list[tuple[Callable[[str], re.Match[str] | None], os.DirEntry[str]]] = []
    for where, matcher in ((final.parent, beside), (final, inside)):
        if where is final and final.is_symlink():
            continue  # never inside a link's target
        with contextlib.suppress(OSError):
            entries += [(matcher, entry) for entry in os.scandir(where)]
    removed: list[str] = []
    for named_ours, entry in entries:
        found = named_ours(entry.name)
        if found is None:
            continue
        pid = int(found[1])
        if pid != os.getpid() and _alive(pid):
            continue
        # _MAKING: not between another thread's mkdir and its flock of the same directory.
        with _MAKING, contextlib.suppress(OSError):  # gone meanwhile, a link, not ours
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a writer elsewhere
                shutil.rmtree(entry.path)
                removed.append(entry.name)
            finally:
                os.close(fd)
    return removed


def is_staged(name: str) -> bool:
    """Whether ``name``, an entry of a destination directory, is a copy's staged directory.

    What a copy into an existing empty ``DST`` makes inside it, gone once the copy is placed
    (or left by a copy killed outright): not the destination's data.

    Example:
        >>> is_staged(".dst.partial-123-0123456789abcdef"), is_staged("manifest.jsonl")
        (True, False)
    """
    return _ANY_STAGED.fullmatch(name) is not None


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` may exist here (true when in doubt).

    Example:
        >>> _alive(os.getpid()), _alive(0)
        (True, True)
    """
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # another user's process, or beyond a pid's range
        return True
    return True


def remove_empty(dirs: Iterable[Path]) -> None:
    """Removes those of ``dirs`` that are empty, deepest first (kept: one someone filled).

    Example:
        >>> import tempfile
        >>> top = Path(tempfile.mkdtemp()); (top / "a" / "b").mkdir(parents=True)
        >>> remove_empty([top / "a", top / "a" / "b"]); (top / "a").exists()
        False
    """
    for path in sorted(set(dirs), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            path.rmdir()
