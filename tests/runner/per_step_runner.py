"""The per-step reference runner: today's ``EnvRunner`` before batched recording (issue #12).

It records one ``add_env_step`` per sub-env per step into list-mode episodes, and is kept as the
reference the batched runner is checked against (``test_batched_equals_per_step.py``). Only
public names of ``episodes`` are used."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import tree
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate

from episodes.episode import SingleAgentEpisode
from episodes.runner import RunnerMetrics, autoreset_mode_of, env_info
from episodes.runner.infos import FINAL_KEYS

__all__ = ["PerStepRunner"]


class PerStepRunner:
    """Samples fixed-size per-env episode chunks from a vector env in any autoreset mode.

    Every call of :meth:`sample` returns, for each sub-env, chunks holding exactly
    ``num_steps`` recorded transitions in total: the episodes that finished (complete with their
    final observation and ``terminated``/``truncated`` flags) and the ongoing one, cut with
    ``len_lookback_buffer`` so connectors can look across the border. The next call continues
    the ongoing episode (same id, ``t_started`` continues). The chunks come env by env, in time
    order; ``ep.custom_data["env_index"]`` names the sub-env.

    Autoreset modes (read from ``env.metadata["autoreset_mode"]``):

    * same-step: a finished sub-env's final observation and info come from
      ``infos["final_obs"]``/``infos["final_info"]``; the step's observation starts the next
      episode.
    * next-step: the step after a finished one is the sub-env's reset step; its observation and
      info start the next episode, its action and reward belong to no episode and are dropped
      (the step is not counted).
    * disabled: the runner resets finished sub-envs itself with
      ``env.reset(options={"reset_mask": mask})`` right after the step.

    Because all sub-envs step together, in next-step mode a sub-env may need more vector steps
    than the others to reach ``num_steps``; the extra transitions the others record meanwhile
    are kept and returned first by the next call (so nothing is lost, and their extra outputs
    such as ``action_logp`` are those of the policy that acted).

    Recurrent policies (see :class:`~episodes.runner.policy.RecurrentPolicy`) get and return a
    state; the runner resets a sub-env's state (from ``initial_state``) whenever that sub-env
    starts a new episode, before the policy sees the new episode's first observation.

    Args:
        env: The vector env.
        policy: ``policy(obs) -> (actions, extras)``, or with a state
            ``policy(obs, state) -> (actions, extras, state)``.
        len_lookback_buffer: Lookback of the continuing chunks (RLlib's default is 1).
        initial_state: ``initial_state(num_envs) -> state`` for a recurrent policy; taken from
            ``policy.initial_state`` when the policy has one. None: feed-forward.
        state_batch_axis: The env axis of every state leaf (0 for ``[N, H]``; 1 for torch RNN
            states ``[num_layers, N, H]``).
        seed: Seed of the first ``env.reset``.
        numpy_episodes: Return the chunks ``to_numpy()``'d (recording itself stays in lists).

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> runner = PerStepRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
        >>> chunks = runner.sample(50)
        >>> [sum(len(c) for c in chunks if c.custom_data["env_index"] == i) for i in range(2)]
        [50, 50]
    """

    def __init__(
        self,
        env: gym.vector.VectorEnv,
        policy: Callable[..., Any],
        *,
        len_lookback_buffer: int = 1,
        initial_state: Callable[[int], Any] | None = None,
        state_batch_axis: int = 0,
        seed: int | None = None,
        numpy_episodes: bool = True,
    ):
        if isinstance(len_lookback_buffer, bool) or int(len_lookback_buffer) < 0:
            raise ValueError(
                f"len_lookback_buffer must be an int >= 0, got {len_lookback_buffer!r}"
            )
        self.env = env
        self.policy = policy
        self.num_envs = int(env.num_envs)
        self.autoreset_mode = autoreset_mode_of(env)
        self.len_lookback_buffer = int(len_lookback_buffer)
        if initial_state is None:
            initial_state = getattr(policy, "initial_state", None)
        self._initial_state = initial_state
        self.state_batch_axis = int(state_batch_axis)
        self.seed = seed
        self.numpy_episodes = numpy_episodes
        self.metrics = RunnerMetrics()
        n = self.num_envs
        self._obs: Any = None
        self.state: Any = None
        self._pending: list[list[SingleAgentEpisode]] = [[] for _ in range(n)]
        self._n_pending = np.zeros(n, dtype=np.int64)
        self._awaiting_reset = np.zeros(n, dtype=bool)
        self._returns = np.zeros(n, dtype=np.float64)

    @property
    def is_recurrent(self) -> bool:
        """True when the policy gets and returns a state."""
        return self._initial_state is not None

    # --------------------------------------------------------------------------------- public
    def sample(self, num_steps: int) -> list[SingleAgentEpisode]:
        """Steps the env until every sub-env recorded ``num_steps`` transitions; returns them.

        Args:
            num_steps: Transitions per sub-env (>= 1).

        Returns:
            The chunks, sub-env by sub-env, in time order; per sub-env their lengths sum to
            ``num_steps``.

        Raises:
            ValueError: ``num_steps < 1``.
        """
        if isinstance(num_steps, bool) or int(num_steps) < 1:
            raise ValueError(f"num_steps must be an int >= 1, got {num_steps!r}")
        num_steps = int(num_steps)
        start = time.perf_counter()
        if self._obs is None:
            self._reset_all()
        recorded = vector_steps = 0
        while int(self._n_pending.min()) < num_steps:
            recorded += self._step()
            vector_steps += 1
        chunks: list[SingleAgentEpisode] = []
        for i in range(self.num_envs):
            chunks.extend(self._split(i, num_steps))
        if self.numpy_episodes:
            for chunk in chunks:
                chunk.to_numpy()
        self.metrics.add_time(recorded, vector_steps, time.perf_counter() - start)
        return chunks

    def get_metrics(self, *, reset: bool = True) -> dict[str, Any]:
        """Returns (and by default clears) the metrics; see :meth:`RunnerMetrics.reduce`."""
        return self.metrics.reduce(reset=reset)

    # ------------------------------------------------------------------------------- internal
    def _new_episode(self, index: int, obs: Any, info: dict[str, Any]) -> None:
        episode = SingleAgentEpisode(
            observation_space=self.env.single_observation_space,
            action_space=self.env.single_action_space,
        )
        episode.custom_data["env_index"] = index
        episode.add_env_reset(obs, info)
        self._pending[index].append(episode)
        self._returns[index] = 0.0

    def _reset_all(self) -> None:
        obs, infos = self.env.reset(seed=self.seed)
        obs = _own(obs)
        for i, item in enumerate(iterate(self.env.observation_space, obs)):
            self._new_episode(i, item, env_info(infos, i))
        self._obs = obs
        if self._initial_state is not None:
            self.state = self._initial_state(self.num_envs)

    def _act(self) -> tuple[Any, dict[str, np.ndarray]]:
        if self._initial_state is None:
            actions, extras = self.policy(self._obs)
        else:
            actions, extras, self.state = self.policy(self._obs, self.state)
        return actions, {
            key: tree.map_structure(np.asarray, value) for key, value in (extras or {}).items()
        }

    def _step(self) -> int:
        """One vector step; returns how many transitions it recorded."""
        actions, extras = self._act()
        obs, rewards, terminateds, truncateds, infos = self.env.step(actions)
        obs = _own(obs)
        rewards = np.asarray(rewards, dtype=np.float64)
        mode = self.autoreset_mode
        started = np.zeros(self.num_envs, dtype=bool)
        reset_mask = np.zeros(self.num_envs, dtype=bool)
        recorded = 0
        per_env = zip(
            iterate(self.env.observation_space, obs),
            iterate(self.env.action_space, actions),
            strict=True,
        )
        for i, (item, action) in enumerate(per_env):
            if mode is AutoresetMode.NEXT_STEP and self._awaiting_reset[i]:
                # The reset step: its observation starts the next episode; action and reward
                # belong to no episode.
                self._awaiting_reset[i] = False
                self._new_episode(i, item, env_info(infos, i))
                started[i] = True
                continue
            terminated, truncated = bool(terminateds[i]), bool(truncateds[i])
            done = terminated or truncated
            same_step_done = done and mode is AutoresetMode.SAME_STEP
            if same_step_done:
                final_obs = infos["final_obs"][i]
                info = env_info(infos.get("final_info", {}), i)
            else:
                final_obs, info = item, env_info(infos, i)
            episode = self._pending[i][-1]
            episode.add_env_step(
                final_obs,
                action,
                float(rewards[i]),
                info,
                terminated=terminated,
                truncated=truncated,
                extra_model_outputs=(
                    {k: tree.map_structure(lambda leaf: leaf[i], v) for k, v in extras.items()}  # noqa: B023
                    if extras
                    else None
                ),
            )
            self._returns[i] += rewards[i]
            self._n_pending[i] += 1
            recorded += 1
            if not done:
                continue
            self.metrics.add_episode(self._returns[i], episode.t)
            if same_step_done:
                self._new_episode(i, item, env_info(infos, i, drop=FINAL_KEYS))
                started[i] = True
            elif mode is AutoresetMode.NEXT_STEP:
                self._awaiting_reset[i] = True
            else:
                reset_mask[i] = True
        if reset_mask.any():
            obs, infos = self.env.reset(options={"reset_mask": reset_mask.copy()})
            obs = _own(obs)
            for i, item in enumerate(iterate(self.env.observation_space, obs)):
                if reset_mask[i]:
                    self._new_episode(i, item, env_info(infos, i))
            started |= reset_mask
        self._obs = obs
        if self._initial_state is not None and started.any():
            self.state = self._reset_state(self.state, started)
        return recorded

    def _reset_state(self, state: Any, mask: np.ndarray) -> Any:
        assert self._initial_state is not None
        fresh = self._initial_state(self.num_envs)
        rows = [int(i) for i in np.flatnonzero(mask)]
        where = (slice(None),) * self.state_batch_axis + (rows,)

        def reset_leaf(old: Any, new: Any) -> Any:
            # Copy first: the policy may still hold (or have logged) the state it returned.
            out = old.clone() if hasattr(old, "clone") else np.array(old, copy=True)
            out[where] = new[where]
            return out

        return tree.map_structure(reset_leaf, state, fresh)

    def _split(self, index: int, num_steps: int) -> list[SingleAgentEpisode]:
        """Takes ``num_steps`` transitions of sub-env ``index`` off its pending chunks."""
        out: list[SingleAgentEpisode] = []
        keep: list[SingleAgentEpisode] = []
        remaining = num_steps
        lookback = self.len_lookback_buffer
        for chunk in self._pending[index]:
            length = len(chunk)
            if remaining == 0:
                keep.append(chunk)
            elif length <= remaining:
                # A chunk that fits is done, or it is the last (ongoing) one and fills the rest.
                remaining -= length
                out.append(chunk)
                if not chunk.is_done:
                    keep.append(chunk.cut(len_lookback_buffer=lookback))
            else:
                out.append(chunk.slice(slice(0, remaining)))
                keep.append(chunk.slice(slice(remaining, None), len_lookback_buffer=lookback))
                remaining = 0
        self._pending[index] = keep
        self._n_pending[index] = sum(len(chunk) for chunk in keep)
        return out


def _own(obs: Any) -> Any:
    """A private copy of a batched observation (vector envs may reuse their buffers)."""
    return tree.map_structure(np.array, obs) if isinstance(obs, (dict, tuple)) else np.array(obs)
