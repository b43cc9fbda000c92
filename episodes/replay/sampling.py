"""Drawing slots, checking sampling arguments, and mapping between slots and stable indices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from episodes.indexing import discount_factor, whole_number
from episodes.io.torch_needed import needed_torch
from episodes.replay.errors import DeviceError
from episodes.replay.integers import int_array  # here too: its callers import it from here
from episodes.replay.item_slots import find_slots
from episodes.replay.sizes import as_count
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable
from episodes.structs import short_repr

__all__ = [
    "DEFAULT_GAMMA",
    "batch_size",
    "check_device",
    "check_gamma",
    "check_n_step",
    "check_non_negative",
    "check_positive",
    "draw_flagged",
    "draw_live",
    "episode_slots",
    "episode_steps",
    "int_array",
    "locate",
    "n_steps",
    "slots_of",
    "to_device",
]

_ROUNDS = 4  # rounds drawn before listing the acceptable positions may be cheaper
_MAX_ROUNDS = 32  # a rate of 0.25 ** 32 of the first: far below one slot in any store
_LIST_AT = 1 << 16  # draws in one round beyond which a shorter range is listed instead


def check_positive(value: Any, name: str) -> int:
    """``value`` as an int, or ``ValueError`` unless it is an int >= 1.

    Numpy ints and 0-d int arrays or tensors are taken, as ``whole_number`` takes them.

    Example:
        >>> check_positive(3, "n_step"), check_positive(np.array(2), "num_items")
        (3, 2)
    """
    return whole_number(value, name, 1)


def check_flag(value: Any, name: str) -> bool:
    """``value`` as a bool, or ``ValueError`` unless it is a ``bool`` or a numpy bool.

    A string such as ``"no"`` would otherwise turn the setting on.

    Example:
        >>> check_flag(np.False_, "pad")
        False
    """
    if value.__class__ is bool or isinstance(value, np.bool_):
        return bool(value)
    raise ValueError(f"{name} must be a bool, got {type(value).__name__} ({value!r:.40})")


def check_non_negative(value: Any, name: str) -> int:
    """``value`` as an int, or ``ValueError`` unless it is an int >= 0.

    Numpy ints and 0-d int arrays or tensors are taken, as ``whole_number`` takes them.

    Example:
        >>> check_non_negative(0, "lookback")
        0
    """
    return whole_number(value, name, 0)


# The discount of ``sample``'s transitions when no ``gamma`` is given (RLlib's default).
DEFAULT_GAMMA = 0.99


def check_gamma(gamma: Any, transitions: bool = True) -> float:
    """``gamma`` as a float, or ``ValueError`` unless it is a number in ``[0, 1]``.

    None is :data:`DEFAULT_GAMMA`. Sequences and episode chunks (``transitions=False``)
    have no returns to discount: any ``gamma`` given there (not None) is a ``ValueError``,
    as ``n_step`` is, so that it is not silently ignored.

    Example:
        >>> check_gamma(0.5), check_gamma(None)
        (0.5, 0.99)
        >>> check_gamma(0.99, transitions=False)
        Traceback (most recent call last):
        ...
        ValueError: gamma applies to transitions (the discount of their n-step returns), ...
    """
    if not transitions and gamma is not None:
        raise ValueError(
            "gamma applies to transitions (the discount of their n-step returns), not to "
            f"sequences or episodes (leave it out), got {gamma!r}"
        )
    return discount_factor(DEFAULT_GAMMA if gamma is None else gamma)


def add_extras(
    batch: dict[str, Any], extras: dict[str, Any], reserved: tuple[str, ...] = ()
) -> None:
    """Adds extra-model-output columns to ``batch``; a name the batch uses is refused.

    ``reserved`` names columns added after this call (a prioritized batch's ``weights``).

    Example:
        >>> batch = {"obs": np.zeros(2)}
        >>> add_extras(batch, {"vf": np.ones(2)}); sorted(batch)
        ['obs', 'vf']
        >>> add_extras(batch, {"obs": np.ones(2)})
        Traceback (most recent call last):
        ...
        ValueError: extra-model-output 'obs' has the name of a batch column: rename it ...
    """
    for key, values in extras.items():
        if key in batch or key in reserved:
            raise ValueError(
                f"extra-model-output {key!r} has the name of a batch column: rename it to "
                "sample it with include_extra_model_outputs"
            )
        batch[key] = values


def batch_size(num_items: Any, batch_size_B: Any, default: int) -> int:
    """The batch size from RLlib's two spellings; a bad one is refused by the name given.

    Example:
        >>> batch_size(None, 8, 16), batch_size(None, None, 16)
        (8, 16)
        >>> batch_size(None, 0, 16)
        Traceback (most recent call last):
        ...
        ValueError: batch_size_B must be an int >= 1, got 0
    """
    if num_items is not None and batch_size_B is not None:
        raise ValueError("give num_items or batch_size_B, not both")
    if num_items is not None:
        return check_positive(num_items, "num_items")
    if batch_size_B is not None:
        return check_positive(batch_size_B, "batch_size_B")
    return check_positive(default, "batch_size_B")  # the buffer's own, checked when set


# Horizons beyond any episode (Monte-Carlo returns) are capped here, within int64.
_LONGEST = 2**62


def check_n_step(n_step: Any, transitions: bool = True) -> int | tuple[int, int]:
    """``n_step`` checked without drawing: an int, or a ``(lo, hi)`` pair (hi exclusive).

    Transitions take an int >= 1 or ``(lo, hi)`` / ``range(lo, hi)`` with ``1 <= lo < hi``.
    Sequences and episode chunks (``transitions=False``) have no horizon: they take only the
    default, the int 1 (None is mapped to it by the caller); any other value, a range that
    can only draw 1 included, is a ``ValueError``, so that an n-step setting passed there is
    not silently ignored.

    Example:
        >>> check_n_step(3), check_n_step(range(1, 4))
        (3, (1, 4))
        >>> check_n_step((1, 2), transitions=False)
        Traceback (most recent call last):
        ...
        ValueError: n_step applies to transitions, not to sequences or episodes ...
    """
    if not transitions:
        if as_count(n_step) != 1:
            raise ValueError(
                "n_step applies to transitions, not to sequences or episodes (leave it at 1), "
                f"got {n_step!r}"
            )
        return 1
    if isinstance(n_step, range):
        if n_step.step != 1:
            raise ValueError(f"n_step range must have step 1, got {n_step!r}")
        n_step = (n_step.start, n_step.stop)
    if isinstance(n_step, tuple):
        lo, hi = (as_count(v) for v in n_step) if len(n_step) == 2 else (None, None)
        if lo is None or hi is None or not 1 <= lo < hi:
            raise ValueError(f"n_step range must be (lo, hi) with 1 <= lo < hi, got {n_step!r}")
        return lo, hi
    return check_positive(n_step, "n_step")


def n_steps(n_step: Any, size: int, rng: np.random.Generator) -> np.ndarray:
    """Per-item horizons: an int for all, or drawn from ``(lo, hi)`` / ``range`` (hi exclusive).

    Example:
        >>> n_steps(3, 2, np.random.default_rng(0)).tolist()
        [3, 3]
    """
    checked = check_n_step(n_step)
    if isinstance(checked, tuple):
        lo, hi = (min(v, _LONGEST) for v in checked)
        return rng.integers(lo, max(hi, lo + 1), size)
    return np.full(size, min(checked, _LONGEST), np.int64)


def draw_live(
    store: StepStore,
    rng: np.random.Generator,
    size: int,
    accept: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """``size`` live slots drawn uniformly with replacement (among those ``accept`` keeps).

    Draws over the whole slot range and drops dead (and refused) slots (see
    :func:`draw_flagged`), which keeps the cost independent of the buffer's size because
    compaction after an add holds dead slots at most half (or 64).

    Returns:
        The slots, or an empty array when no slot is acceptable.

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((4, 1)), "actions": np.zeros(4), "rewards": np.ones(4)}
        >>> store.reserve(4)
        >>> _ = store.append(rows, {}, [{}] * 4, ep_row=0, t0=0, prev_slot=-1)
        >>> store.kill(np.array([0, 1]))
        >>> sorted(set(draw_live(store, np.random.default_rng(0), 20).tolist()))
        [2, 3]
        >>> draw_live(store, np.random.default_rng(0), 5, accept=lambda s: s < 2).tolist()
        []
    """
    return draw_flagged(store.live[: store.end], store.num_live, rng, size, accept)


def draw_flagged(
    flags: np.ndarray,
    count: int,
    rng: np.random.Generator,
    size: int,
    accept: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """``size`` positions of the ``count`` True ``flags``, drawn uniformly with replacement.

    Candidates are drawn over the whole range and the False ones dropped, each round sized by
    the share accepted so far (four times the last while none was); once the next round would
    cost more than listing the acceptable positions in one pass (or blind rounds have drawn a
    sixteenth of the range, or a round would draw more positions than the range holds and
    more than 65,536), they are listed exactly instead. So a sample whose positions are
    rare (sequences only a few long episodes hold) costs what finding them by chance costs,
    never much more than one pass over the range.

    Example:
        >>> draw_flagged(np.array([False, True, False]), 1, np.random.default_rng(0), 3).tolist()
        [1, 1, 1]
    """
    picked: list[np.ndarray] = []
    have = 0
    end = len(flags)
    rate = max(count / max(end, 1), 1e-3)
    drawn = 0
    for round_ in range(_MAX_ROUNDS):
        want = int((size - have) / rate * 1.2) + 16
        # A drawn position costs about four listed ones (a random read, then the tests): list
        # them all once the next round, sized by the share accepted so far, would cost more,
        # or, none accepted yet, once blind rounds have drawn a sixteenth of the range.
        # A round of more draws than the range holds costs more than listing it; below
        # _LIST_AT draws either is cheap, and small buffers keep their seeded streams.
        if want > max(end, _LIST_AT) or (
            round_ >= _ROUNDS and (want > end // 4 if have else drawn + want > end // 16)
        ):
            break
        drawn += want
        draw = rng.integers(0, end, want)
        draw = draw[flags[draw]]
        if accept is not None and len(draw):
            draw = draw[accept(draw)]
        picked.append(draw)
        have += len(draw)
        if have >= size:
            return np.concatenate(picked)[:size]
        # The acceptance seen so far sizes the next round; none seen yet: four times more.
        rate = have / drawn if have else rate * 0.25
    candidates = np.flatnonzero(flags)
    if accept is not None and len(candidates):
        candidates = candidates[accept(candidates)]
    if not len(candidates):
        return candidates
    return np.concatenate([*picked, candidates[rng.integers(0, len(candidates), size - have)]])


def episode_slots(store: StepStore, table: EpisodeTable, row: int) -> np.ndarray:
    """Every slot of one stored episode, in time order.

    An episode's slots are in time order and lie between its first and last slot, so
    unless other episodes' steps far outnumber its own there, one vectorized scan of that
    span finds them; a sparser one is followed one run of adjacent slots at a time.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> def chunk(id_, t0, n):
        ...     return SingleAgentEpisode(id_, observations=[0.0] * (n + 1), actions=[0] * n,
        ...                               rewards=[1.0] * n, t_started=t0, len_lookback_buffer=0)
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add([chunk("a", 0, 2), chunk("b", 0, 1), chunk("a", 2, 2)])  # interleaved
        >>> episode_slots(buf._store, buf._table, buf._table.order["a"]).tolist()
        [0, 1, 3, 4]
    """
    first = int(table.first_slot[row])
    length = int(table.t_end[row] - table.t_begin[row])
    last = first + length - 1
    if (
        last < store.end
        and store.live[last]
        and store.ep[last] == row
        and store.t[last] == store.t[first] + length - 1
    ):
        return np.arange(first, first + length)
    end = int(table.last_slot[row]) + 1
    if 0 <= first < end <= store.end and end - first <= _SPAN_PER_STEP * length:
        # A row is reused only after its episode was evicted, and the new episode's slots all
        # come after the old one's: in the span, the live slots of the row are this episode's.
        span = slice(first, end)
        slots = np.flatnonzero((store.ep[span] == row) & store.live[span])
        if len(slots) == length:  # anything else is a broken link structure: walk it as before
            return slots + first
    runs = _follow_runs(store, row, first, length)
    return _follow_links(store, first, length) if runs is None else runs


# An interleaved episode's span is scanned (about 2 ns a slot) while it holds at most this
# many slots per episode step; a sparser one is followed a run of adjacent slots at a time.
_SPAN_PER_STEP = 32


def _follow_runs(store: StepStore, row: int, first: int, length: int) -> np.ndarray | None:
    """The episode's slots, found one run of adjacent slots (an added chunk) at a time.

    The Python work is O(runs), not O(steps): a run's end is found by probing single slots
    (the last run's length first, then doubling and bisection), with the links read only
    there; runs of a few slots walk their links, which costs no more than probing. The result
    is checked against the links in one gather, so it is what walking them step by step
    gives; None when it is not (a broken link structure, walked as before).
    """
    nxt, end = store.nxt, store.end
    if length < 1:
        return None
    starts: list[int] = []
    cur, left, guess = first, length, 1
    while left > 0:
        if not 0 <= cur < end:
            return None
        starts.append(cur)
        if guess <= _SHORT_RUN:
            n, nxt_slot = 1, nxt.item(cur)
            while nxt_slot == cur + n and n < left:
                if n == _SHORT_RUN:  # a long run after all
                    n = _longest_run(store, row, cur, n, left + 1)
                    nxt_slot = nxt.item(cur + n - 1)
                    break
                n += 1
                nxt_slot = nxt.item(cur + n - 1)
        else:
            n = min(guess, left)
            if not _holds(store, row, cur, n):
                n = _longest_run(store, row, cur, 1, n)
            elif n < left and nxt.item(cur + n - 1) == cur + n:  # longer than the last run
                n = _longest_run(store, row, cur, n, left + 1)
            nxt_slot = nxt.item(cur + n - 1)
        left -= n
        guess = n
        cur = nxt_slot
    # A run holds consecutive steps, so its size is the time to the next run's start.
    run_starts = np.array(starts, np.int64)
    times = store.t[run_starts]
    sizes = np.diff(times, append=times[0] + length)
    if (sizes < 1).any() or (run_starts + sizes > end).any():
        return None
    slots = np.repeat(run_starts - (np.cumsum(sizes) - sizes), sizes) + np.arange(length)
    if (nxt[slots[:-1]] != slots[1:]).any():
        return None
    return slots


# Runs up to this long are walked link by link (~150 ns a step), longer ones probed (~1.5 us).
_SHORT_RUN = 8


def _holds(store: StepStore, row: int, cur: int, n: int) -> bool:
    # An episode's slots increase with its time: when slot cur + n - 1 holds the step n - 1
    # after slot cur's, the n slots from cur hold n consecutive steps of the episode. (A slot
    # wrongly taken here fails the check against the links.)
    last = cur + n - 1
    return (
        last < store.end
        and store.ep.item(last) == row
        and store.t.item(last) == store.t.item(cur) + n - 1
    )


def _longest_run(store: StepStore, row: int, cur: int, lo: int, hi: int) -> int:
    """The largest ``n < hi`` that :func:`_holds`, given that it holds ``lo``.

    It doubles ``lo`` while that holds, then bisects: O(log n) probes.
    """
    while True:
        grown = min(2 * lo, hi)
        if grown == hi or not _holds(store, row, cur, grown):
            break
        lo = grown
    hi = grown
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _holds(store, row, cur, mid):
            lo = mid
        else:
            hi = mid
    return lo


def _follow_links(store: StepStore, first: int, length: int) -> np.ndarray:
    slots = np.empty(length, np.int64)
    nxt = store.nxt
    cur = first
    for i in range(length):
        slots[i] = cur
        cur = int(nxt[cur])
    return slots


def slots_of(store: StepStore, indices: np.ndarray) -> np.ndarray:
    """Slots of stable item indices (a batch's ``indices``); ``KeyError`` for evicted ones.

    Ids rise with every added step and compaction keeps slot order (:func:`find_slots`).

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((4, 1)), "actions": np.zeros(4), "rewards": np.ones(4)}
        >>> store.reserve(4)
        >>> _ = store.append(rows, {}, [{}] * 4, ep_row=0, t0=0, prev_slot=-1)
        >>> store.kill(np.array([0, 1]))
        >>> _ = store.compact()  # the rows of indices 2 and 3 move to slots 0 and 1
        >>> slots_of(store, np.array([3, 2])).tolist()
        [1, 0]
    """
    slots, ok = find_slots(store.uid[: store.end], store.live[: store.end], indices)
    if not ok.all():
        shown = indices[~ok][:5].tolist()  # the first few, as a list
        pad = "; -1: a sequence batch's padding, where its mask is False" * (-1 in indices)
        raise KeyError(f"indices not stored (evicted or never added{pad}): {shown}")
    return slots


def locate(store: StepStore, table: EpisodeTable, episode_id: str, t: Any) -> np.ndarray:
    """Stable indices of one episode's steps at env times ``t`` (one time or a sequence).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 1.0], t_started=5, len_lookback_buffer=0))
        >>> locate(buf._store, buf._table, "a", np.array([6, 5])).tolist()
        [1, 0]
        >>> locate(buf._store, buf._table, "a", np.array([7]))
        Traceback (most recent call last):
        ...
        KeyError: "times [7] outside episode 'a''s stored steps [5, 7)"
    """
    row = table.order.get(episode_id)
    if row is None:
        raise KeyError(f"episode {short_repr(episode_id)} is not stored")
    t = np.atleast_1d(int_array(t, "times", KeyError))  # beyond int64: a time none holds
    outside = (t < table.t_begin[row]) | (t >= table.t_end[row])
    if outside.any():
        raise KeyError(
            f"times {short_repr(t[outside].tolist())} outside episode {short_repr(episode_id)}'s "
            f"stored steps [{table.t_begin[row]}, {table.t_end[row]})"
        )
    slots = episode_slots(store, table, row)
    return store.uid[slots[t - table.t_begin[row]]]


def episode_steps(
    store: StepStore, table: EpisodeTable, indices: Any
) -> tuple[np.ndarray, np.ndarray]:
    """The episode ids and env times of stable item indices: :func:`locate` inverted.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 1.0], t_started=5, len_lookback_buffer=0))
        >>> ids, t = episode_steps(buf._store, buf._table, [1, 0])
        >>> ids.tolist(), t.tolist()
        (['a', 'a'], [6, 5])
    """
    items = np.atleast_1d(int_array(indices, "indices", KeyError))
    if items.ndim != 1:
        raise ValueError(f"indices must be one index or a 1-d sequence, got shape {items.shape}")
    slots = slots_of(store, items)
    return table.ids[store.ep[slots]], store.t[slots].copy()


def check_device(device: Any) -> Any:
    """``device`` as a ``torch.device`` this process can put tensors on (lazy torch import).

    Checked before a sample reads the buffer, so that a device that cannot work is refused
    whatever the buffer holds (an empty one too), not after a whole batch was gathered.

    Raises:
        ImportError: torch is not installed (numpy batches need no ``device``).
        TypeError: ``device`` is no device or device name (``3.5``).
        DeviceError: torch does not know it (``"abc"``), or it is not available here
            (``"cuda"`` on a build or machine without one), where torch raised a bare
            ``AssertionError`` or ``RuntimeError``, or it is the ``meta`` device, whose
            tensors hold no data.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
        >>> check_device("abc")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        episodes.errors.DeviceError: device must be a torch device (or its name), got 'abc'
    """
    torch = needed_torch(f"device={device!r}", "leave device out for numpy batches")

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as error:  # torch's words name no argument
        kind = TypeError if isinstance(error, TypeError) else DeviceError
        raise kind(f"device must be a torch device (or its name), got {device!r}") from error
    if parsed in _WORKING_DEVICES:  # tried once: a sample does not allocate to ask again
        return parsed
    if parsed.type == "meta":  # tensors there hold shapes only: the batch would be lost
        raise DeviceError(f"device {device!r} holds no data (a meta device): a batch needs one")
    try:
        torch.empty(0, device=parsed)  # nothing to copy: only whether the device works here
    except (AssertionError, RuntimeError) as error:
        raise DeviceError(f"device {device!r} is not available here: {error}") from error
    _WORKING_DEVICES.add(parsed)
    return parsed


_WORKING_DEVICES: set[Any] = set()  # torch devices a tensor was put on in this process


def to_device(batch: Any, device: Any) -> Any:
    """Numeric numpy arrays of a batch dict as torch tensors on ``device`` (lazy torch import).

    On the CPU the tensors share the arrays' memory (``torch.from_numpy``, no copy): a sample
    passes arrays it gathered itself, owned by nobody else. Other devices get copies.

    Raises:
        ImportError, TypeError, DeviceError: As :func:`check_device`.

    Example:
        >>> batch = {"obs": np.zeros((2, 3), np.float32), "infos": np.array([{}, {}])}
        >>> out = to_device(batch, "cpu")
        >>> type(out["obs"]).__name__, tuple(out["obs"].shape), type(out["infos"]).__name__
        ('Tensor', (2, 3), 'ndarray')
    """
    torch = needed_torch(f"device={device!r}", "leave device out for numpy batches")
    device = check_device(device)  # a torch.device too: "cuda" where there is none
    tensor, contiguous = torch.from_numpy, np.ascontiguousarray
    move = device.type != "cpu"  # on the CPU .to() is a no-op, or a copy nobody needs

    out = {}
    for key, value in batch.items():
        if isinstance(value, np.ndarray) and value.dtype.kind != "O":  # not object arrays
            value = tensor(contiguous(value))
            if move:
                value = value.to(device)
        elif isinstance(value, (dict, tuple)):  # nested observations: each leaf a tensor
            value = _nested_tensors(value, device)
        out[key] = value
    return out


def _nested_tensors(value: Any, device: Any) -> Any:
    """:func:`to_device` of a nested observation column (dicts and tuples of arrays)."""
    if isinstance(value, dict):
        return {key: _nested_tensors(part, device) for key, part in value.items()}
    if isinstance(value, tuple):
        return tuple(_nested_tensors(part, device) for part in value)
    return to_device({"leaf": value}, device)["leaf"]
