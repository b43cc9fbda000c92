"""Whole-episode figures of the episodes that chunks finish, with their first and last infos.

``runner.get_metrics()`` lists returns and lengths with nothing to tell whose they are: a
multi-task or curriculum loop wants them per task, level or seed, which the env reports in its
infos. :class:`EpisodeTally` follows episodes across ``sample`` calls by id and hands out each
finished one with its sub-env, whole return and length, flags and first and last info, as the
chunks hand them out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from episodes.episode import SingleAgentEpisode

__all__ = ["EpisodeTally", "FinishedEpisode"]


def _running_sum(ret: float, chunk: SingleAgentEpisode) -> float:
    """``ret`` plus the chunk's rewards, added one at a time in float64 in step order.

    That is how the runner's metrics and a plain ``ret += reward`` loop add them, so an
    episode's return comes out the same to the last bit however ``sample`` cut it into
    chunks (summing each chunk with numpy's pairwise sum would make it depend on the cuts).
    Anything but one float per step is left to ``get_return`` (exact int sums, its checks).
    """
    rewards = np.asarray(chunk.get_rewards())
    if rewards.dtype.kind != "f" or rewards.size != len(rewards):
        return ret + chunk.get_return()
    steps = np.concatenate(([ret], rewards.reshape(-1).astype(np.float64)))
    return float(np.cumsum(steps)[-1])


class FinishedEpisode(NamedTuple):
    """One episode a chunk finished, as :meth:`EpisodeTally.add` hands it out.

    ``ret`` and ``length`` cover the steps from ``t_started`` (0 unless the tally began
    after the episode did) to its end; ``first_info`` is the info at ``t_started`` (the reset's
    info where ``t_started`` is 0), ``last_info`` the ended step's; ``env_index`` is
    ``custom_data["env_index"]`` of the last chunk (None where it has none). Float rewards
    are added one at a time in float64, as ``runner.get_metrics()`` adds them, so ``ret``
    is the same to the last bit however the episode was cut into chunks.

    Example:
        >>> e = FinishedEpisode("a", 0, 3.0, 3, True, 0, {"task": 1}, {"task": 1})
        >>> e.ret, e.first_info["task"]
        (3.0, 1)
    """

    id_: Any
    env_index: Any
    ret: float
    length: int
    terminated: bool
    t_started: int
    first_info: Any
    last_info: Any


class EpisodeTally:
    """Follows episodes across chunks and hands out each one as it finishes.

    Give it every chunk of every call, in the order the runner returns them (an episode's
    chunks in time order). The unfinished episodes it follows are at most one per sub-env of
    each runner; after ``runner.reset()`` abandons them, :meth:`clear` forgets them.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
        >>> tally = EpisodeTally()
        >>> done = tally.add(runner.sample(30)) + tally.add(runner.sample(30))
        >>> sorted(e.length for e in done) == sorted(runner.get_metrics()["episode_lengths"])
        True
        >>> all(e.t_started == 0 and e.ret == e.length for e in done)  # CartPole pays 1 a step
        True
    """

    def __init__(self) -> None:  # noqa: D107 - see the class
        # id -> (return so far, t where its next chunk starts, t_started, first info)
        self._open: dict[Any, tuple[float, int, int, Any]] = {}

    def __len__(self) -> int:
        """The unfinished episodes followed.

        Example:
            >>> len(EpisodeTally())
            0
        """
        return len(self._open)

    def add(self, chunks: Iterable[SingleAgentEpisode]) -> list[FinishedEpisode]:
        """Takes a call's chunks; returns the episodes they finish, in the chunks' order.

        Raises:
            ValueError: A chunk of an unfinished episode that does not start where its last
                chunk ended (given twice, skipped, or out of time order); nothing of this call
                is taken then. Finished episodes are forgotten: a chunk of one given again
                is taken as the start of an episode.

        Example:
            >>> ep = SingleAgentEpisode("a", observations=[0, 1, 2], actions=[0, 0],
            ...                         rewards=[1.0, 2.0], len_lookback_buffer=0)
            >>> tally = EpisodeTally()
            >>> tally.add([ep]), len(tally)
            ([], 1)
            >>> tally.add([ep])
            Traceback (most recent call last):
            ...
            ValueError: chunk 0 of episode 'a' starts at t=0, but the tally has it up to t=2
        """
        chunks = list(chunks)
        opened = dict(self._open)  # checked whole before anything changes
        finished = []
        for k, chunk in enumerate(chunks):
            start = chunk.t_started
            ret, t, t0, first = opened.pop(chunk.id_, (0.0, start, start, None))
            if start != t:
                raise ValueError(
                    f"chunk {k} of episode {chunk.id_!r} starts at t={start}, but the tally "
                    f"has it up to t={t}"
                )
            if first is None:
                first = chunk.get_infos(0)
            ret, t = _running_sum(ret, chunk), chunk.t
            if not chunk.is_done:
                opened[chunk.id_] = (ret, t, t0, first)
                continue
            env_index = chunk.custom_data.get("env_index")
            last = chunk.get_infos(-1)
            finished.append(
                FinishedEpisode(
                    chunk.id_, env_index, ret, t - t0, chunk.is_terminated, t0, first, last
                )
            )
        self._open = opened
        return finished

    def clear(self) -> None:
        """Forgets the unfinished episodes (those a ``runner.reset()`` abandoned).

        Example:
            >>> tally = EpisodeTally()
            >>> _ = tally.add([SingleAgentEpisode("a", observations=[0, 1], actions=[0],
            ...                                   rewards=[1.0], len_lookback_buffer=0)])
            >>> tally.clear(); len(tally)
            0
        """
        self._open.clear()
