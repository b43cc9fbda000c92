"""Counters of a runner group: what arrived, what was lost, how often a runner was replaced.

Example:
    >>> m = GroupMetrics()
    >>> m.add_lost(num_env_steps=64, error="ActorDiedError"); m.num_restarts += 1
    >>> out = m.reduce()
    >>> out["num_lost_samples"], out["num_lost_env_steps"], out["num_restarts"]
    (1, 64, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, SupportsIndex

from episodes.distributed.sample import RunnerSample, merge_runner_metrics
from episodes.indexing import as_flag, whole_number

__all__ = ["GroupMetrics"]

MAX_ERRORS = 10
#: Runner metrics kept apart before the older ones are merged into one.
MAX_PARTS = 64


@dataclass
class GroupMetrics:
    """What a :class:`~episodes.distributed.RunnerGroup` counted since the last reduce.

    Attributes:
        num_samples: Runner samples that arrived.
        num_env_steps: Transitions in their chunks (the runners' own ``num_env_steps`` may
            differ by the transitions they carry over to their next sample).
        num_lost_samples: Requests whose runner died before answering (dropped whole).
        num_lost_env_steps: Transitions those requests asked for.
        num_restarts: Runner actors replaced by fresh ones.
        num_shared_memory_samples: Arrived samples whose arrays came through shared memory
            (the rest came through Ray's object store).
        errors: The latest failures, as text (at most 10).
        runner_metrics: The arrived samples' runner metrics, in arrival order; past 64 of
            them the older ones are merged into one entry (:func:`merge_runner_metrics`,
            listing the latest ``max_listed``), so a loop that never reduces stays bounded.
        max_listed: :meth:`reduce` lists the returns and lengths of the latest this many
            episodes (an int >= 0, checked whenever it is set; 100,000 as ``RunnerMetrics``);
            ``num_episodes`` and the means cover every one. Kept by a reset.

    Raises:
        ValueError: ``max_listed`` set to anything but an int >= 0 (numpy ints taken), in the
            constructor or later (``group.metrics.max_listed = 2.5``); the value is kept.

    Example:
        >>> m = GroupMetrics()
        >>> m.add_lost(num_env_steps=8, error="ActorDiedError")
        >>> m.num_samples, m.num_lost_samples, m.num_lost_env_steps, m.errors
        (0, 1, 8, ['ActorDiedError'])
        >>> m.max_listed = 2.5
        Traceback (most recent call last):
        ...
        episodes.errors.IntegerTypeError: max_listed must be an int >= 0, got 2.5
        >>> m.max_listed
        100000
    """

    num_samples: int = 0
    num_env_steps: int = 0
    num_lost_samples: int = 0
    num_lost_env_steps: int = 0
    num_restarts: int = 0
    num_shared_memory_samples: int = 0
    errors: list[str] = field(default_factory=list)
    runner_metrics: list[dict[str, Any]] = field(default_factory=list)
    max_listed: int = 100_000

    def __setattr__(self, name: str, value: Any) -> None:
        # Checked on every assignment, not only by the constructor: a group's metrics are
        # reached as ``group.metrics`` and tuned there.
        if name == "max_listed":
            value = whole_number(value, "max_listed", 0)
        super().__setattr__(name, value)

    def add_sample(self, sample: RunnerSample, *, shared_memory: bool = False) -> None:
        """Counts one arrived sample (``shared_memory``: its arrays came that way).

        Raises:
            TypeError: ``sample`` is no :class:`RunnerSample`, or its metrics are no dict;
                nothing is counted then.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode("a", observations=[0, 1, 2], actions=[0, 1],
            ...                         rewards=[1.0, 1.0], len_lookback_buffer=0)
            >>> m, sample = GroupMetrics(), RunnerSample(0, 0, 0, 0, 1, [ep], {"num_env_steps": 2})
            >>> m.add_sample(sample, shared_memory=True)
            >>> m.num_samples, m.num_env_steps, m.num_shared_memory_samples, m.runner_metrics
            (1, 2, 1, [{'num_env_steps': 2}])
        """
        # Read first: a refused sample counts nothing, and metrics no reduce() could merge
        # are refused here rather than by every later reduce().
        if not isinstance(sample, RunnerSample):
            raise TypeError(f"add_sample takes a RunnerSample, got {type(sample).__name__}")
        if not isinstance(sample.metrics, Mapping):
            raise TypeError(
                "the sample's metrics must be a dict (EnvRunner.get_metrics()), got "
                f"{type(sample.metrics).__name__}"
            )
        env_steps = sample.env_steps
        self.num_samples += 1
        self.num_shared_memory_samples += bool(shared_memory)
        self.num_env_steps += env_steps
        self.runner_metrics.append(sample.metrics)
        if len(self.runner_metrics) > MAX_PARTS:
            # Merged now and then (amortized): one dict per sample would grow without end.
            self.runner_metrics = [self._merged()]

    def add_lost(self, *, num_env_steps: SupportsIndex, error: str) -> None:
        """Counts one lost request.

        Raises:
            ValueError: ``num_env_steps`` is not a whole number >= 0 (numpy ints taken; a float
                or bool is refused, as ``RunnerMetrics.add_time`` refuses them); nothing is
                counted then.

        Example:
            >>> m = GroupMetrics()
            >>> for k in range(12):
            ...     m.add_lost(num_env_steps=4, error=f"lost {k}")
            >>> m.num_lost_samples, m.num_lost_env_steps, len(m.errors), m.errors[0]  # latest 10
            (12, 48, 10, 'lost 2')
        """
        num_env_steps = whole_number(num_env_steps, "num_env_steps", 0)  # before any count
        self.num_lost_samples += 1
        self.num_lost_env_steps += num_env_steps
        self.errors = [*self.errors, error][-MAX_ERRORS:]

    def reduce(self, *, reset: bool = True) -> dict[str, Any]:
        """A plain dict: the counters plus the runners' merged metrics; clears unless asked not.

        Keys: those of :func:`~episodes.distributed.sample.merge_runner_metrics` (returns and
        lengths of the latest ``max_listed`` episodes, ``num_episodes`` and means over all,
        ``num_vector_steps``, ``sample_time_s``: runner time summed) but
        ``env_steps_per_s`` replaced by ``env_steps_per_runner_s`` (per runner, on average),
        and ``num_samples``, ``num_env_steps``, ``num_lost_samples``, ``num_lost_env_steps``,
        ``num_restarts``, ``num_shared_memory_samples``, ``errors``.

        Raises:
            TypeError: ``reset`` not a bool (``"no"`` would clear the counters).

        Example:
            >>> m = GroupMetrics()
            >>> runner_metrics = {"num_env_steps": 100, "sample_time_s": 2.0}
            >>> m.add_sample(RunnerSample(0, 0, 0, 0, 1, [], runner_metrics))
            >>> m.reduce(reset=False)["num_samples"], m.num_samples  # kept
            (1, 1)
            >>> out = m.reduce()
            >>> out["env_steps_per_runner_s"], "env_steps_per_s" in out, m.num_samples  # cleared
            (50.0, False, 0)
        """
        reset = as_flag(reset, "reset")  # before anything is read or cleared
        out = self._merged()
        del out["env_steps_per_s"]  # a sum of rates is meaningless across rounds
        seconds = out["sample_time_s"]
        out["env_steps_per_runner_s"] = out["num_env_steps"] / seconds if seconds else 0.0
        out.update(
            num_samples=self.num_samples,
            num_env_steps=self.num_env_steps,
            num_lost_samples=self.num_lost_samples,
            num_lost_env_steps=self.num_lost_env_steps,
            num_restarts=self.num_restarts,
            num_shared_memory_samples=self.num_shared_memory_samples,
            errors=list(self.errors),
        )
        if reset:
            fresh = GroupMetrics(max_listed=self.max_listed)
            self.__dict__.update(fresh.__dict__)
        return out

    def _merged(self) -> dict[str, Any]:
        """The runner metrics merged, listing the latest ``max_listed`` returns and lengths."""
        out = merge_runner_metrics(self.runner_metrics)
        for key in ("episode_returns", "episode_lengths"):
            listed = out[key]
            out[key] = listed[max(len(listed) - self.max_listed, 0) :]  # [-0:] would keep all
        return out
