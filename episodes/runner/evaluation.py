"""Exactly one whole episode per seed, for evaluating a policy: :func:`evaluate`.

Evaluation compares checkpoints on the same start states, so each episode is fixed by its
seed and never by which episode happens to end first. A runner seeds its sub-envs only at a
full reset, so the seeds go in rounds of ``runner.num_envs``: reset with the round's seeds,
sample until every seeded sub-env has finished its first episode, keep exactly that episode
whatever its length, and throw the rest away (what the sub-envs started after it, and the
unseeded sub-envs of a short last round). Taking "the first ``M`` episodes to finish" instead
favours short episodes whenever the sub-envs run more episodes than are kept
(docs/evaluation.md, docs/deviations.md "evaluation episodes").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from episodes.arguments import whole_number
from episodes.episode import SingleAgentEpisode
from episodes.runner.env_runner import EnvRunner
from episodes.runner.episode_tally import EpisodeTally, FinishedEpisode
from episodes.runner.metrics import RunnerMetrics
from episodes.runner.step_count import checked_num_steps

__all__ = ["Evaluated", "evaluate"]


class Evaluated(NamedTuple):
    """One evaluation episode: the whole episode and its figures, as :func:`evaluate` gives it.

    ``episode`` is the episode's chunks joined (``t_started`` 0, from the seeded reset to its
    end), its ``custom_data`` holding ``"env_index"`` and ``"seed"`` (a plain ``int``);
    ``finished`` is the :class:`~episodes.runner.episode_tally.FinishedEpisode` an
    ``EpisodeTally`` hands out for it (``ret`` added one step at a time in float64).

    Example:
        >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         terminated=True, len_lookback_buffer=0)
        >>> e = Evaluated(ep, FinishedEpisode("a", 0, 1.0, 1, True, 0, {}, {}))
        >>> e.finished.ret, len(e.episode)
        (1.0, 1)
    """

    episode: SingleAgentEpisode
    finished: FinishedEpisode


def evaluate(
    runner: EnvRunner,
    seeds: Sequence[int],
    *,
    num_steps: int = 64,
    max_vector_steps: int | None = 100_000,
) -> list[Evaluated]:
    """Runs exactly one whole episode per seed; episode ``j`` starts from ``reset(seed=seeds[j])``.

    Rounds of ``runner.num_envs`` seeds: ``runner.reset(seed=[...])`` seeds sub-env ``i``
    with the round's ``i``-th seed (a short last round leaves the others unseeded), then
    ``runner.sample(num_steps)`` runs until every seeded sub-env has finished its first
    episode. That episode is kept whatever its length; everything else is thrown away. A round
    lasts as long as its longest episode, so give the env a time limit. The same seeds and a
    deterministic policy give the same episodes (values, not ids) whatever ``num_steps`` and
    ``runner.num_envs`` are. Each call builds only the chunks of the episodes still running.

    The runner: its metrics are left as they were (a throwaway ``RunnerMetrics`` counts the
    evaluation's steps and the thrown-away episodes, then the runner's own is put back: take
    the figures from the ``finished`` items). When ``evaluate`` returns, or raises after its
    checks, the runner is reset as by ``runner.reset()``: its next ``sample`` starts new
    episodes, unseeded (the sub-envs' generators go on), and ``runner.seed`` is None. A
    recurrent policy's state starts from ``initial_state`` at each round's reset. The env must
    take a list of per-sub-env seeds at reset, as gymnasium's vector envs do.

    Args:
        runner: The :class:`~episodes.runner.EnvRunner` to evaluate on (any autoreset mode and
            window), best one of its own: its episodes in progress are abandoned.
        seeds: A sequence of ints >= 0 (a list, tuple, range or 1-D integer array; numpy ints
            taken), one per episode; may be empty, may repeat. None is refused: an unseeded
            episode would depend on ``num_envs`` and on the rounds before it.
        num_steps: Steps per ``sample`` call (>= ``runner.least_num_steps``): smaller wastes
            fewer steps after a round's last episode ends (at most ``num_steps - 1`` per
            round), larger makes fewer calls.
        max_vector_steps: The most steps a round may run, an int >= 1, or None for no bound:
            an episode that has not ended after that many steps (vector steps of its round:
            each one is a step of every episode still running) is an error rather than a
            loop that never ends. The default is far beyond the usual time limits.

    Returns:
        One :class:`Evaluated` per seed, in the order of ``seeds``.

    Raises:
        TypeError: ``runner`` is no ``EnvRunner``, ``seeds`` no sequence (a set, a generator,
            a string, a mapping) or an array of more than one axis.
        ValueError: A seed that is not an int >= 0 (None, a bool, a float), or ``num_steps``
            or ``max_vector_steps`` out of range. These are checked first: nothing stepped,
            the runner unchanged.
        RuntimeError: An episode longer than ``max_vector_steps``; the message names its
            seed and its place in ``seeds`` (the runner is reset, as above). An error of the
            env or policy passes through, the runner reset the same way.

    Example:
        >>> import gymnasium as gym
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", max_episode_steps=50)
        >>> runner = EnvRunner(env, lambda obs: ((obs[:, 2] > 0).astype(np.int64), {}))
        >>> out = evaluate(runner, [7, 8, 9], num_steps=16)
        >>> [(e.episode.custom_data["seed"], e.finished.length) for e in out]
        [(7, 34), (8, 45), (9, 48)]
        >>> runner.get_metrics()["num_episodes"]  # the runner's own metrics: untouched
        0
        >>> again = evaluate(runner, [9], num_steps=5)
        >>> again[0].finished.ret == out[2].finished.ret, again[0].episode.t_started
        (True, 0)
    """
    if not isinstance(runner, EnvRunner):
        raise TypeError(f"runner must be an EnvRunner, got {type(runner).__name__}")
    checked = _checked_seeds(seeds)
    num_steps = checked_num_steps(num_steps, runner.least_num_steps)
    bound = None
    if max_vector_steps is not None:
        bound = whole_number(max_vector_steps, "max_vector_steps", 1)
    if not checked:
        return []
    n, kept = runner.num_envs, []
    own_metrics = runner.metrics
    runner.metrics = RunnerMetrics(max_listed=0)
    try:
        for start in range(0, len(checked), n):
            kept += _round(runner, checked[start : start + n], start, num_steps, bound)
    finally:
        runner.reset()  # drops the round's episodes: none goes on into the runner's metrics
        runner.metrics = own_metrics
    return kept


def _round(
    runner: EnvRunner, batch: list[int], offset: int, num_steps: int, bound: int | None
) -> list[Evaluated]:
    """The first episode of each of the ``len(batch)`` first sub-envs, seeded with ``batch``."""
    runner.reset(seed=[*batch, *[None] * (runner.num_envs - len(batch))])
    tally = EpisodeTally()
    joined: dict[int, SingleAgentEpisode] = {}
    done: dict[int, FinishedEpisode] = {}
    running = np.arange(len(batch))  # seeded sub-envs whose first episode goes on
    steps = 0
    while len(running) and (bound is None or steps < bound):
        size = num_steps if bound is None else min(num_steps, bound - steps)
        size = max(size, runner.least_num_steps)
        chunks = runner.sample(size)
        # Until its first episode ends, every step of a sub-env is one of that episode's: in
        # either window each running one gets exactly ``size`` steps, its first chunk.
        steps += size
        # Chunks come env by env: each running sub-env's first chunk continues its episode.
        at = np.searchsorted(chunks.env_indices, running).tolist()
        pieces = [chunks[k] for k in at]
        for e in tally.add(pieces):
            done[int(e.env_index)] = e
        for i, piece in zip(running.tolist(), pieces):
            if i in joined:
                joined[i].concat_episode(piece)
            else:
                joined[i] = piece
        running = np.array([i for i in running.tolist() if i not in done], np.int64)
    # Also an episode that ended past the bound: a next-step vector-steps window samples at
    # least 2 steps, so the last call may step one past it.
    late = [
        i
        for i in range(len(batch))
        if i not in done or (bound is not None and done[i].length > bound)
    ]
    if late:
        named = ", ".join(f"seeds[{offset + i}]={batch[i]}" for i in late)
        raise RuntimeError(
            f"evaluate: the {'episodes' if len(late) > 1 else 'episode'} of {named} did not "
            f"end within max_vector_steps={bound} steps; give the env a time limit "
            "(max_episode_steps) or raise max_vector_steps (None: no bound). The runner was "
            "reset (runner.reset()): it is usable"
        )
    out = []
    for i, seed in enumerate(batch):
        joined[i].custom_data["seed"] = seed
        out.append(Evaluated(joined[i], done[i]))
    return out


def _checked_seeds(seeds: Any) -> list[int]:
    """``seeds`` as a list of ``int`` >= 0, or the error naming the first that is not one."""
    if isinstance(seeds, np.ndarray):
        if seeds.ndim != 1:
            raise TypeError(
                f"seeds must be a 1-D array of ints, got an array of shape {seeds.shape}"
            )
        items = list(seeds)
    elif isinstance(seeds, Sequence) and not isinstance(seeds, (str, bytes)):
        items = list(seeds)
    else:
        raise TypeError(
            "seeds must be a sequence of ints >= 0 (a list, tuple, range or 1-D integer "
            f"array), got {type(seeds).__name__}"
        )
    out = []
    for j, seed in enumerate(items):
        if seed is None:
            raise ValueError(
                f"seeds[{j}] must be an int >= 0, got None: every evaluation episode needs "
                "its seed (an unseeded one would depend on num_envs and on earlier rounds)"
            )
        out.append(whole_number(seed, f"seeds[{j}]", 0))
    return out
