"""Sampling metrics of an env runner: finished-episode returns and lengths, throughput."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, SupportsFloat, SupportsIndex, overload

import numpy as np

from episodes.indexing import as_flag, whole_number

__all__ = ["MetricsSlot", "RunnerMetrics"]


@dataclass
class RunnerMetrics:
    """Counters an :class:`~episodes.runner.EnvRunner` fills while it samples.

    ``episode_returns``/``episode_lengths`` list the episodes that finished since the last
    :meth:`reduce` (full-episode figures, summed over all chunks), the latest ``max_listed`` of
    them: a loop that never reads its metrics keeps a bounded list, while the counts and means
    :meth:`reduce` reports cover every episode since the reset. An episode is counted by the
    call whose env step ended it: in next-step mode, where a sub-env's transitions are carried
    over, that can be a call before its last chunk is handed out
    (:class:`~episodes.runner.episode_tally.EpisodeTally` follows the chunks, with their infos,
    for per-task figures), or never, where ``runner.reset()`` drops those transitions first.
    ``env_steps`` counts recorded transitions (a next-step reset step is not one),
    ``vector_steps`` calls of ``env.step``.
    ``max_listed`` must be an int >= 0 (0: list none), else a ``ValueError``: checked whenever
    it is set, in the constructor or later (``runner.metrics.max_listed = 2.5``), the old value
    kept.

    Example:
        >>> m = RunnerMetrics()
        >>> m.add_episode(10.0, 10); m.add_time(5, 5, 0.5)
        >>> out = m.reduce()
        >>> out["mean_episode_return"], out["env_steps_per_s"], out["total_episodes"]
        (10.0, 10.0, 1)
        >>> m.max_listed = -1
        Traceback (most recent call last):
        ...
        ValueError: max_listed must be an int >= 0, got -1
        >>> m.max_listed
        100000
    """

    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    env_steps: int = 0
    vector_steps: int = 0
    sample_time_s: float = 0.0
    total_env_steps: int = 0
    total_episodes: int = 0
    max_listed: int = 100_000
    # Every episode since the reset, listed or not: what the means and counts are made of.
    num_episodes: int = 0
    return_sum: float = 0.0
    length_sum: int = 0

    def __post_init__(self) -> None:  # kept for subclasses chaining it; __setattr__ checks
        pass

    def __setattr__(self, name: str, value: Any) -> None:
        # Checked on every assignment, not only by the constructor: a runner's metrics are
        # reached as ``runner.metrics`` and tuned there (a float would fail a later sample()).
        if name == "max_listed":
            value = whole_number(value, "max_listed", 0)
        super().__setattr__(name, value)

    def __repr__(self) -> str:  # the dataclass repr listed up to max_listed returns
        return (
            f"RunnerMetrics(num_episodes={self.num_episodes}, env_steps={self.env_steps}, "
            f"total_env_steps={self.total_env_steps}, total_episodes={self.total_episodes})"
        )

    def add_episode(self, episode_return: SupportsFloat, length: SupportsIndex) -> None:
        """Records one finished episode (a ``ValueError`` as :meth:`add_episodes` for bad input).

        Example:
            >>> m = RunnerMetrics()
            >>> m.add_episode(np.float32(9.5), 10); m.add_episode(3.0, 3)
            >>> m.episode_returns, m.episode_lengths, m.total_episodes
            ([9.5, 3.0], [10, 3], 2)
        """
        self.add_episodes([episode_return], [length])

    def add_episodes(self, episode_returns: Any, lengths: Any) -> None:
        """Records several finished episodes (arrays of returns and lengths), in order.

        Raises:
            ValueError: The returns are not a 1-D array of real numbers, the lengths not one of
                whole numbers >= 0 (a fractional length is refused, not truncated), or their
                counts differ; nothing is recorded then.

        Example:
            >>> m = RunnerMetrics(); m.add_episodes(np.array([1.0, 2.0]), np.array([3, 4]))
            >>> m.episode_lengths, m.total_episodes
            ([3, 4], 2)
            >>> m.add_episodes([1.0, 2.0], [3, 4, 5])
            Traceback (most recent call last):
            ...
            ValueError: 2 episode returns but 3 lengths
        """
        returns, counts = _checked(episode_returns, lengths)
        self.num_episodes += len(returns)
        self.total_episodes += len(returns)
        with np.errstate(over="ignore", invalid="ignore"):  # inf and -inf give NaN, as told
            self.return_sum += float(returns.sum())
        self.length_sum += int(counts.sum())
        keep = self.max_listed  # [-0:] would be all of them: cut from the front instead
        self.episode_returns.extend(returns[max(len(returns) - keep, 0) :].tolist())
        self.episode_lengths.extend(counts[max(len(counts) - keep, 0) :].tolist())
        if len(self.episode_returns) > 2 * keep:  # trimmed now and then: amortized
            del self.episode_returns[: len(self.episode_returns) - keep]
            del self.episode_lengths[: len(self.episode_lengths) - keep]

    def add_time(
        self,
        env_steps: SupportsIndex,
        vector_steps: SupportsIndex,
        seconds: SupportsFloat,
    ) -> None:
        """Records the steps and wall time of one ``sample`` call.

        Raises:
            ValueError: A step count is not a whole number >= 0 or ``seconds`` is not a finite
                number >= 0; nothing is recorded then.

        Example:
            >>> m = RunnerMetrics()
            >>> m.add_time(6, 3, 0.25); m.add_time(6, 3, 0.25)
            >>> m.env_steps, m.vector_steps, m.sample_time_s, m.total_env_steps
            (12, 6, 0.5, 12)
        """
        # Python numbers: the figures go to loggers and JSON, which refuse numpy ints.
        env_steps = whole_number(env_steps, "env_steps", 0)
        vector_steps = whole_number(vector_steps, "vector_steps", 0)
        real = isinstance(seconds, (int, float, np.integer, np.floating))
        if not real or isinstance(seconds, bool) or not 0 <= float(seconds) < math.inf:
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
        self.env_steps += env_steps
        self.total_env_steps += env_steps
        self.vector_steps += vector_steps
        self.sample_time_s += float(seconds)

    def reduce(self, *, reset: bool = True) -> dict[str, Any]:
        """A plain dict of the figures since the last reset; clears them unless ``reset=False``.

        Keys: ``episode_returns``, ``episode_lengths`` (the latest ``max_listed``),
        ``num_episodes``, ``mean_episode_return`` and ``mean_episode_length`` (over every
        episode since the reset; NaN without finished episodes),
        ``num_env_steps``, ``num_vector_steps``, ``sample_time_s``, ``env_steps_per_s``,
        ``total_env_steps``, ``total_episodes``.

        Raises:
            TypeError: ``reset`` not a bool (numpy's bools are taken; ``"no"`` would clear
                the figures); nothing is read or cleared then.

        Example:
            >>> m = RunnerMetrics()
            >>> m.add_episode(4.0, 4); m.add_time(8, 4, 2.0)
            >>> m.reduce(reset=False)["mean_episode_length"], m.reduce()["num_env_steps"]
            (4.0, 8)
            >>> out = m.reduce()  # cleared, but the totals are kept
            >>> math.isnan(out["mean_episode_return"]), out["num_env_steps"], out["total_episodes"]
            (True, 0, 1)
        """
        reset = as_flag(reset, "reset")  # a group's reduce refuses it alike
        n = self.num_episodes
        first = max(len(self.episode_returns) - self.max_listed, 0)
        returns = self.episode_returns[first:]
        # While every episode is listed the mean is the list's: the same float however the
        # episodes were added (one by one or in batches sum in another order).
        return_sum = sum(returns) if len(returns) == n else self.return_sum
        out = {
            "episode_returns": returns,
            "episode_lengths": self.episode_lengths[first:],
            "num_episodes": n,
            "mean_episode_return": return_sum / n if n else math.nan,
            "mean_episode_length": self.length_sum / n if n else math.nan,
            "num_env_steps": self.env_steps,
            "num_vector_steps": self.vector_steps,
            "sample_time_s": self.sample_time_s,
            "env_steps_per_s": self.env_steps / self.sample_time_s if self.sample_time_s else 0.0,
            "total_env_steps": self.total_env_steps,
            "total_episodes": self.total_episodes,
        }
        if reset:
            self.episode_returns, self.episode_lengths = [], []
            self.num_episodes, self.return_sum, self.length_sum = 0, 0.0, 0
            self.env_steps = self.vector_steps = 0
            self.sample_time_s = 0.0
        return out


def _checked(episode_returns: Any, lengths: Any) -> tuple[np.ndarray, np.ndarray]:
    """Returns as float64 and lengths as int64 1-D arrays of one count, else a ``ValueError``.

    Vectorized (the runner adds a call's episodes at once); a NaN return is taken as the env
    gave it, a length must be a whole number >= 0.
    """
    returns, counts = np.asarray(episode_returns), np.asarray(lengths)
    if returns.ndim != 1 or returns.dtype.kind not in "iuf":
        raise ValueError(
            f"episode returns must be a 1-D array of real numbers, got {returns.dtype} "
            f"of shape {returns.shape}"
        )
    if counts.ndim != 1 or counts.dtype.kind not in "iuf":
        raise ValueError(
            f"episode lengths must be a 1-D array of whole numbers, got {counts.dtype} "
            f"of shape {counts.shape}"
        )
    if len(returns) != len(counts):
        raise ValueError(f"{len(returns)} episode returns but {len(counts)} lengths")
    if counts.dtype.kind == "f":
        whole = np.isfinite(counts) & (counts == np.floor(counts))
        if not whole.all():
            bad = counts[~whole][0]
            raise ValueError(f"episode lengths must be whole numbers, got {float(bad)}")
    if len(counts) and counts.min() < 0:
        raise ValueError(f"episode lengths must be >= 0, got {int(counts.min())}")
    # int64 would wrap them round (int() of the largest: exact for uint64 and floats alike).
    if len(counts) and int(counts.max()) > _MAX_LENGTH:
        raise ValueError(f"episode lengths must fit int64, got {int(counts.max())}")
    return returns.astype(np.float64, copy=False), counts.astype(np.int64, copy=False)


# The longest episode a count holds.
_MAX_LENGTH = int(np.iinfo(np.int64).max)


class MetricsSlot:
    """A runner's ``metrics`` attribute: a :class:`RunnerMetrics`, checked whenever it is set.

    A new one takes effect at once: it is also handed to the attributes named in ``shared``
    (the runner's recorder, which counts finished episodes into it), so the counts go where
    ``runner.metrics`` says, not to the object it replaced.

    Raises:
        TypeError: A value that is not a :class:`RunnerMetrics`; the old one is kept.

    Example:
        >>> class Holder:
        ...     metrics = MetricsSlot("counter")
        ...     def __init__(self):
        ...         self.metrics = RunnerMetrics()
        ...         self.counter = type("Counter", (), {"metrics": self.metrics})()
        >>> h = Holder(); h.metrics = RunnerMetrics(max_listed=5)
        >>> h.counter.metrics is h.metrics, h.metrics.max_listed
        (True, 5)
        >>> h.metrics = {}
        Traceback (most recent call last):
        ...
        TypeError: metrics must be a RunnerMetrics, got dict
    """

    def __init__(self, *shared: str):  # noqa: D107 - see the class
        self.shared = shared
        self.slot = "_metrics"

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> MetricsSlot: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> RunnerMetrics: ...
    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        try:
            return obj.__dict__[self.slot]
        except KeyError:  # not set yet (a subclass before __init__): as a missing attribute
            raise AttributeError(self.slot[1:]) from None

    def __set__(self, obj: object, value: RunnerMetrics) -> None:
        if not isinstance(value, RunnerMetrics):
            raise TypeError(f"{self.slot[1:]} must be a RunnerMetrics, got {type(value).__name__}")
        obj.__dict__[self.slot] = value
        for name in self.shared:
            holder = obj.__dict__.get(name)
            if holder is not None:
                holder.metrics = value
