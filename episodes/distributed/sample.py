"""What a runner group hands back: each runner's sample, the losses, and one gathered view.

A :class:`RunnerSample` is what one runner actor returns for one ``sample`` request: the chunks
its :class:`~episodes.runner.EnvRunner` recorded (whatever sequence ``sample()`` returned,
moved through the object store as is: its numpy blocks travel as out-of-band buffers, not
pickled element by element) and its metrics. A :class:`GroupSample` puts the samples of one
round side by side as one flat sequence of chunks, renumbering the sub-envs so the converter
sees one wide vector env: runner ``r``'s env ``i`` becomes column ``offset(r) + i``, where the
offsets count the envs of the runners before it in this round. One rule numbers chunks wherever
they are numbered (:func:`env_offsets`, :func:`stamp_chunk`): on the driver, and on a writing
runner before it writes them, which numbers them among all the group's runners.

Gathered chunks may be read-only views of a shared-memory segment or of the object store
(arrays of large results are mapped, not copied): read them, convert them, write them; to edit
one in place, copy it first with ``copy.deepcopy(chunk)``, which copies every array, those in
its infos too, and so leaves the segment free. ``SingleAgentEpisode.from_state(
chunk.get_state())`` is no such copy: it keeps the infos' arrays as read-only views.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> a = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
    ...                        len_lookback_buffer=0)
    >>> b = SingleAgentEpisode("b", observations=[0, 1], actions=[1], rewards=[2.0],
    ...                        len_lookback_buffer=0)
    >>> a.custom_data["env_index"] = b.custom_data["env_index"] = 0
    >>> group = GroupSample([RunnerSample(0, 0, 0, 0, 1, [a]), RunnerSample(1, 0, 0, 0, 1, [b])])
    >>> [c.custom_data["env_index"] for c in group], group.env_steps
    ([0, 1], 2)
    >>> [len(part) for part in group.side_by_side()]  # each runner's own chunks
    [1, 1]
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from episodes.episode import SingleAgentEpisode
from episodes.indexing import sequence_position
from episodes.runner import SampledChunks

__all__ = [
    "GroupSample",
    "LostSample",
    "RunnerSample",
    "env_offsets",
    "merge_runner_metrics",
    "stamp_chunk",
]

#: Keys a gathered chunk carries in ``custom_data`` (besides the global ``env_index``).
RUNNER_INDEX = "runner_index"
RUNNER_ENV_INDEX = "runner_env_index"
#: A runner's lifetime totals (``EnvRunner.get_metrics()``): summed over different runners.
TOTALS = ("total_env_steps", "total_episodes")


@dataclass
class RunnerSample:
    """One runner's answer to one ``sample`` request.

    Attributes:
        runner_index: The runner's slot in the group.
        generation: The slot's restart generation that recorded it.
        request: The group's sequence number of the request.
        weights_version: The weights version the policy held when the request started
            (-1: never set). In next-step mode with the default window, the rows a sub-env
            recorded in an earlier call and hands out first here acted with that call's
            version (``window="vector_steps"`` carries no rows over).
        num_envs: Sub-envs of the runner's vector env.
        episodes: The chunks ``EnvRunner.sample()`` returned, env by env, in time order.
        metrics: The runner's metrics of this sample (``EnvRunner.get_metrics()``).

    Example:
        >>> ep = SingleAgentEpisode("a", observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0],
        ...                         len_lookback_buffer=0)
        >>> sample = RunnerSample(runner_index=3, generation=0, request=7, weights_version=-1,
        ...                       num_envs=1, episodes=[ep])
        >>> sample.env_steps, sample.metrics
        (2, {})
    """

    runner_index: int
    generation: int
    request: int
    weights_version: int
    num_envs: int
    episodes: Sequence[SingleAgentEpisode]
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def env_steps(self) -> int:
        """Recorded transitions over all chunks (a runner's lazy chunks are not built).

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
            >>> RunnerSample(0, 0, 0, 0, 2, runner.sample(5)).env_steps  # 5 steps of 2 sub-envs
            10
        """
        if isinstance(self.episodes, SampledChunks):
            return int(self.episodes.lengths().sum())
        return int(sum(len(ep) for ep in self.episodes))

    def without_totals(self) -> RunnerSample:
        """The same sample (its chunks not copied) with metrics less the runner's lifetime totals.

        What a group's running metrics count: merged over many samples of one runner, its
        ``total_env_steps`` and ``total_episodes`` would count its earlier steps again and
        again (a :class:`GroupSample` of one round, one sample per runner, keeps them).

        Example:
            >>> sample = RunnerSample(0, 0, 0, -1, 1, [], {"num_env_steps": 4,
            ...                                            "total_env_steps": 12})
            >>> sample.without_totals().metrics, sample.metrics["total_env_steps"]
            ({'num_env_steps': 4}, 12)
        """
        metrics = {k: v for k, v in self.metrics.items() if k not in TOTALS}
        return dataclasses.replace(self, metrics=metrics)


@dataclass
class LostSample:
    """A request whose runner died before answering: none of its chunks reached the caller.

    Attributes:
        runner_index: The runner's slot.
        generation: The generation that died.
        request: The request's sequence number.
        num_env_steps: Transitions the request asked for (``num_steps * num_envs``).
        error: What the caller saw (the exception, as plain text: no terminal colour codes).

    Example:
        >>> lost = LostSample(runner_index=1, generation=0, request=4, num_env_steps=64,
        ...                   error="ActorDiedError")
        >>> GroupSample([], [lost]), lost.num_env_steps
        (GroupSample(0 runners, 0 envs, 0 chunks, 1 lost), 64)
    """

    runner_index: int
    generation: int
    request: int
    num_env_steps: int
    error: str


class GroupSample(Sequence[SingleAgentEpisode]):
    """The samples of one round as one flat sequence of chunks (runner by runner).

    Chunks name their column in ``custom_data["env_index"]`` (dense over this round's
    runners), their runner in ``custom_data["runner_index"]`` and their runner-local sub-env in
    ``custom_data["runner_env_index"]``; so ``episodes_to_rollout(group_sample, ...)`` lays the
    runners' envs side by side as it lays out one runner's.

    Args:
        samples: The runners' samples (kept in runner order).
        lost: Requests of this round that were lost.

    Example:
        >>> a = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                        len_lookback_buffer=0)
        >>> a.custom_data["env_index"] = 1  # sub-env 1 of runner 1, after runner 0's 3 envs
        >>> group = GroupSample([RunnerSample(1, 0, 0, 0, 2, [a]), RunnerSample(0, 0, 0, 0, 3, [])])
        >>> keys = ("env_index", "runner_index", "runner_env_index")
        >>> group, [group[0].custom_data[k] for k in keys]
        (GroupSample(2 runners, 5 envs, 1 chunks, 0 lost), [4, 1, 1])
    """

    def __init__(self, samples: Sequence[RunnerSample], lost: Sequence[LostSample] = ()):
        self.samples = sorted(samples, key=lambda s: (s.runner_index, s.request))
        self.lost = list(lost)
        self._starts: list[int] = []
        start = 0
        for s in self.samples:
            self._starts.append(start)
            start += len(s.episodes)
        self._len = start
        self._offsets = env_offsets([s.num_envs for s in self.samples])
        self.num_envs = sum(s.num_envs for s in self.samples)
        self._stamped: set[int] = set()

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> SingleAgentEpisode: ...

    @overload
    def __getitem__(self, index: slice) -> list[SingleAgentEpisode]: ...

    def __getitem__(self, index: int | slice) -> SingleAgentEpisode | list[SingleAgentEpisode]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        k = sequence_position(index, len(self))
        r = _last_le(self._starts, k)
        sample, j = self.samples[r], k - self._starts[r]
        if k in self._stamped:
            return sample.episodes[j]
        chunk = stamp_chunk(sample.episodes, j, sample.runner_index, self._offsets[r])
        self._stamped.add(k)
        return chunk

    def __iter__(self) -> Iterator[SingleAgentEpisode]:
        for k in range(len(self)):
            yield self[k]

    def __eq__(self, other: object) -> bool:
        # As SampledChunks: equal to any sequence of equal chunks (a copy of it, a list).
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"GroupSample({len(self.samples)} runners, {self.num_envs} envs, {len(self)} chunks, "
            f"{len(self.lost)} lost)"
        )

    def side_by_side(self) -> list[Sequence[SingleAgentEpisode]]:
        """The runners' own chunk sequences, in the order their envs are numbered here.

        ``episodes_to_rollout`` reads each runner's columns from its blocks through this,
        without building chunks, and joins them along the env axis.

        Example:
            >>> a, b = (SingleAgentEpisode(n, observations=[0, 1], actions=[0], rewards=[1.0],
            ...                            len_lookback_buffer=0) for n in "ab")
            >>> group = GroupSample([RunnerSample(1, 0, 0, 0, 1, [b]),
            ...                      RunnerSample(0, 0, 0, 0, 1, [a])])
            >>> [[chunk.id_ for chunk in part] for part in group.side_by_side()]  # runner 0 first
            [['a'], ['b']]
        """
        return [s.episodes for s in self.samples]

    @property
    def env_steps(self) -> int:
        """Recorded transitions over all runners.

        Example:
            >>> a, b = (SingleAgentEpisode(n, observations=[0] * (k + 1), actions=[0] * k,
            ...                            rewards=[1.0] * k, len_lookback_buffer=0)
            ...         for n, k in (("a", 2), ("b", 3)))
            >>> group = GroupSample([RunnerSample(0, 0, 0, 0, 1, [a]),
            ...                      RunnerSample(1, 0, 0, 0, 1, [b])])
            >>> group.env_steps
            5
        """
        return sum(s.env_steps for s in self.samples)

    @property
    def metrics(self) -> dict[str, Any]:
        """The runners' metrics of this round merged (see :func:`merge_runner_metrics`).

        Example:
            >>> parts = [RunnerSample(r, 0, 0, 0, 1, [], {"episode_returns": [float(r)],
            ...                                           "num_env_steps": 4}) for r in (0, 1)]
            >>> m = GroupSample(parts).metrics
            >>> m["episode_returns"], m["num_env_steps"], m["mean_episode_return"]
            ([0.0, 1.0], 8, 0.5)
        """
        return merge_runner_metrics([s.metrics for s in self.samples])


def env_offsets(num_envs: Sequence[int]) -> list[int]:
    """Each runner's first column when runners of ``num_envs`` sub-envs sit side by side.

    The group's numbering: runner ``r``'s sub-env ``i`` is column ``offsets[r] + i``. A
    :class:`GroupSample` numbers the runners of its round; a ``RunnerGroup`` hands each writing
    runner its offset among all the group's runners (the same, in a round of every runner).

    Example:
        >>> env_offsets([2, 3, 1]), env_offsets([])
        ([0, 2, 5], [])
    """
    offsets, offset = [], 0
    for n in num_envs:
        offsets.append(offset)
        offset += int(n)
    return offsets


def stamp_chunk(
    episodes: Sequence[SingleAgentEpisode], j: int, runner_index: int, env_offset: int
) -> SingleAgentEpisode:
    """Chunk ``j`` of a runner's sample, its ``custom_data`` stamped as the group numbers it.

    ``runner_env_index`` is the runner's own sub-env (an earlier stamp's, else the chunk's
    ``env_index``), ``runner_index`` the runner and ``env_index`` ``env_offset`` plus the
    runner's sub-env. On a runner's ``SampledChunks`` the renumbering is no edit
    (``SampledChunks.renumber``): the converter's fast path still reads the runner's blocks.

    Example:
        >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> ep.custom_data["env_index"] = 1  # the runner's sub-env 1
        >>> stamp_chunk([ep], 0, runner_index=2, env_offset=4).custom_data
        {'env_index': 5, 'runner_env_index': 1, 'runner_index': 2}
        >>> stamp_chunk([ep], 0, runner_index=2, env_offset=0).custom_data["env_index"]  # again
        1
    """
    chunk = episodes[j]
    data = chunk.custom_data
    local = int(data.get(RUNNER_ENV_INDEX, data.get("env_index", 0)))
    data[RUNNER_ENV_INDEX] = local
    data[RUNNER_INDEX] = runner_index
    if isinstance(episodes, SampledChunks):
        # Not an edit: the converter's fast path still reads the runner's blocks.
        episodes.renumber(j, env_offset + local)
    else:
        data["env_index"] = env_offset + local
    return chunk


def _last_le(starts: list[int], k: int) -> int:
    # Runners that returned no chunk share a start with the next one: the last match is right.
    return bisect.bisect_right(starts, k) - 1


def merge_runner_metrics(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sums runner metrics (``EnvRunner.get_metrics()`` dicts) as if one runner had sampled.

    Returns and lengths are concatenated (runner by runner), counts and times summed, means
    weighted by each runner's episode count (a runner lists only its latest episodes, but its
    means cover all); ``env_steps_per_s`` sums the runners' own rates (they sample in parallel).
    ``total_env_steps`` and ``total_episodes``, each runner's lifetime totals, are summed when
    a part has them: the totals of a group of runners, so the parts should be different
    runners' (one sample each, as in a :class:`GroupSample`); two samples of one runner would
    count its earlier steps twice.

    Example:
        >>> a = {"episode_returns": [1.0], "episode_lengths": [1], "num_env_steps": 4,
        ...      "env_steps_per_s": 10.0, "total_env_steps": 12, "total_episodes": 3}
        >>> m = merge_runner_metrics([a, a])
        >>> m["mean_episode_return"], m["num_env_steps"], m["env_steps_per_s"]
        (1.0, 8, 20.0)
        >>> m["total_env_steps"], m["total_episodes"]
        (24, 6)
    """
    returns = [float(r) for p in parts for r in p.get("episode_returns", [])]
    lengths = [int(n) for p in parts for n in p.get("episode_lengths", [])]
    counts = [p.get("num_episodes", len(p.get("episode_returns", []))) for p in parts]
    total = sum(counts)

    def mean(key: str, listed: str) -> float:
        if not total:
            return math.nan
        # A runner that lists all its episodes (or gives no mean) adds their sum, as one list
        # of them all would.
        sums = [
            p[key] * n if key in p and len(p.get(listed, [])) != n else sum(p.get(listed, []))
            for p, n in zip(parts, counts)
        ]
        return float(sum(sums) / total)

    out: dict[str, Any] = {
        "episode_returns": returns,
        "episode_lengths": lengths,
        "num_episodes": total,
        "mean_episode_return": mean("mean_episode_return", "episode_returns"),
        "mean_episode_length": mean("mean_episode_length", "episode_lengths"),
    }
    for key in ("num_env_steps", "num_vector_steps", "sample_time_s", "env_steps_per_s"):
        out[key] = sum(p.get(key, 0) for p in parts)
    for key in TOTALS:
        if any(key in p for p in parts):  # no made-up 0 for metrics that never had them
            out[key] = sum(int(p.get(key, 0)) for p in parts)
    return out
