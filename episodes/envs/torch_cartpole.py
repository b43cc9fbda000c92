"""CartPole as a gymnasium vector env of torch tensors, every sub-env stepped in one batch.

The dynamics, bounds and rewards are gymnasium's CartPole-v1 (Euler integration, 500-step
time limit), computed in float32 where gymnasium keeps its state in float64: one step agrees
to about 1e-7, whole trajectories drift apart after some tens of steps. The sub-envs live as
``[N, 4]`` state on one device, so N can be in the tens of thousands on a GPU. Autoreset is
next-step (gymnasium's default: the step after an episode's last one is its reset step, with
reward 0) or same-step (the step that ends an episode also resets it; its final observation
is ``infos["final_obs"]``, a ``[N, 4]`` tensor whose rows of unfinished sub-envs are not
meaningful, with the mask ``infos["_final_obs"]``).

Example:
    >>> import torch
    >>> env = TorchCartPole(4, device="cpu", autoreset_mode="SameStep")
    >>> obs, _ = env.reset(seed=0)
    >>> obs, rewards, terminated, truncated, infos = env.step(torch.ones(4, dtype=torch.long))
    >>> rewards.tolist(), sorted(infos)
    ([1.0, 1.0, 1.0, 1.0], ['_final_obs', 'final_obs'])
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control.utils import maybe_parse_reset_bounds
from gymnasium.vector import AutoresetMode

from episodes.errors import DeviceError
from episodes.seeds import check_env_seed

__all__ = ["TorchCartPole"]

GRAVITY, CART_MASS, POLE_MASS, POLE_HALF_LENGTH = 9.8, 1.0, 0.1, 0.5
FORCE, TAU, X_LIMIT, THETA_LIMIT = 10.0, 0.02, 2.4, 12 * 2 * math.pi / 360


class TorchCartPole(gym.vector.VectorEnv):
    """``num_envs`` CartPole-v1 sub-envs as ``[N, 4]`` float32 tensors on ``device``.

    One torch generator serves all sub-envs (their first states and every autoreset draw from
    it), so a per-sub-env seed list seeds them together (see :meth:`reset`). Actions are not
    checked against ``Discrete(2)`` (gymnasium's CartPole asserts each one): that would wait
    for the device every step; 1 pushes right and any other value, 2 or -1 included, left.

    Args:
        num_envs: Sub-envs, an int >= 1.
        device: Where the state and every returned tensor live.
        autoreset_mode: ``"NextStep"`` (default) or ``"SameStep"``.
        max_episode_steps: Time limit (truncation), an int from 1 to ``2**63 - 1``.

    Raises:
        ValueError: ``num_envs`` or ``max_episode_steps`` is not an int >= 1 (2.7 and True
            are refused, not rounded), ``max_episode_steps`` is beyond int64, or
            ``autoreset_mode`` is ``"Disabled"``.
        DeviceError: ``device`` is not available here (``"cuda"`` on a machine or torch build
            without one), unknown to torch (``"abc"``), or the meta device, which holds no
            data; as the converter and the replay buffers refuse such a device.

    Example:
        >>> env = TorchCartPole(3, max_episode_steps=2)
        >>> env.observation_space.shape, env.metadata["autoreset_mode"].value
        ((3, 4), 'NextStep')
        >>> _ = env.reset(seed=0)
        >>> [env.step(torch.ones(3, dtype=torch.long))[3].tolist() for _ in range(2)]
        [[False, False, False], [True, True, True]]
    """

    def __init__(
        self,
        num_envs: int,
        *,
        device: str | torch.device = "cpu",
        autoreset_mode: str = "NextStep",
        max_episode_steps: int = 500,
    ):
        self.num_envs = _count(num_envs, "num_envs")
        self.device = _device(device)
        mode = AutoresetMode(autoreset_mode)
        if mode is AutoresetMode.DISABLED:
            raise ValueError("TorchCartPole resets its sub-envs itself: NextStep or SameStep")
        self.metadata = {"autoreset_mode": mode}
        # At most int64's largest: the step counters are int64 tensors (2**63 wrapped: every
        # episode was truncated at its first step).
        self.max_episode_steps = _count(max_episode_steps, "max_episode_steps", 2**63 - 1)
        high = np.array([X_LIMIT * 2, np.inf, THETA_LIMIT * 2, np.inf], np.float32)
        self.single_observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self._generator = torch.Generator(device=self.device)
        # Fresh entropy, as gymnasium's first reset(seed=None) draws: a new generator's fixed
        # default seed would give every unseeded env the same episodes.
        self._generator.seed()
        # float32 whatever torch's default dtype: the observation space's.
        self._state = torch.zeros((self.num_envs, 4), dtype=torch.float32, device=self.device)
        self._steps = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._needs_reset = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _fresh(self, low: float = -0.05, high: float = 0.05) -> torch.Tensor:
        shape, generator = (self.num_envs, 4), self._generator
        noise = torch.rand(shape, generator=generator, dtype=torch.float32, device=self.device)
        return noise * (high - low) + low

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Resets every sub-env; ``seed`` seeds the env's generator (None: it continues).

        The generator starts from fresh entropy, so unseeded envs differ (as gymnasium's).
        ``seed`` is None, an int >= 0, or (as ``VectorEnv.reset`` takes) a list of ``num_envs``
        per-sub-env seeds, each None or an int >= 0. An int up to ``2**64 - 1`` seeds the
        generator as it is; a larger one (which torch's generator cannot take) is folded into
        64 bits by numpy's ``SeedSequence``, the same every time. Since one generator serves
        all sub-envs, a list seeds it from all its ints together (each one changes every
        sub-env's episodes); a list holding a None gives it fresh entropy, as gymnasium gives
        an unseeded sub-env. ``options`` may give ``"low"`` and ``"high"``, the bounds of
        the first states (gymnasium's CartPole reads them the same way; default -0.05 and
        0.05); later autoresets draw within the defaults, as gymnasium's do.

        Raises:
            ValueError: A seed of none of those forms (a float, a bool, a negative int, a
                list of another length), or bounds gymnasium's CartPole refuses (or whose
                range is not finite), before anything is reset.

        Example:
            >>> env = TorchCartPole(2)
            >>> obs, infos = env.reset(seed=0)
            >>> obs.shape, obs.dtype, infos, bool(obs.abs().max() <= 0.05)
            (torch.Size([2, 4]), torch.float32, {}, True)
            >>> torch.equal(obs, env.reset(seed=0)[0])
            True
            >>> torch.equal(env.reset(seed=[3, 7])[0], env.reset(seed=[3, 8])[0])
            False
        """
        seed = check_env_seed(seed, self.num_envs)
        low, high = maybe_parse_reset_bounds(options, -0.05, 0.05)
        with np.errstate(over="ignore"):  # the states are float32, as ``_fresh`` scales them
            parts = np.float32(low), np.float32(high), np.float32(float(high) - float(low))
        if not np.isfinite(parts).all():  # gymnasium: an OverflowError, or states of inf
            raise ValueError(
                f"reset bounds must span a finite float32 range, got low={low!r}, high={high!r}"
            )
        if isinstance(seed, list):
            ints = [one for one in seed if one is not None]
            if len(ints) < len(seed):
                self._generator.seed()
            else:  # every entry counts: [3, 7] and [3, 8] differ
                state = np.random.SeedSequence(ints).generate_state(1, np.uint64)[0]
                self._generator.manual_seed(int(state))
        elif seed is not None:
            self._generator.manual_seed(_generator_seed(seed))
        self._state = self._fresh(low, high)
        self._steps.zero_()
        self._needs_reset.zero_()
        return self._state.clone(), {}

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Steps every sub-env with ``actions`` (``[N]`` of 0/1, tensor or array; unchecked).

        Example:
            >>> env = TorchCartPole(2, max_episode_steps=1)  # next-step autoreset
            >>> _ = env.reset(seed=0)
            >>> _, rewards, _, truncated, _ = env.step(torch.zeros(2, dtype=torch.long))
            >>> rewards.tolist(), truncated.tolist()
            ([1.0, 1.0], [True, True])
            >>> _, rewards, _, truncated, _ = env.step(np.array([0, 1]))  # the reset step
            >>> rewards.tolist(), truncated.tolist()
            ([0.0, 0.0], [False, False])
        """
        if isinstance(actions, np.ndarray) and not actions.flags.writeable:
            actions = actions.copy()  # torch warns on read-only memory it cannot mark so
        push = torch.as_tensor(actions, device=self.device).reshape(self.num_envs)
        x, x_dot, theta, theta_dot = self._state.unbind(1)
        force = (push == 1).to(self._state.dtype) * (2 * FORCE) - FORCE  # float32: +-10
        cos, sin = torch.cos(theta), torch.sin(theta)
        total = CART_MASS + POLE_MASS
        temp = (force + POLE_MASS * POLE_HALF_LENGTH * theta_dot**2 * sin) / total
        theta_acc = (GRAVITY * sin - cos * temp) / (
            POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos**2 / total)
        )
        x_acc = temp - POLE_MASS * POLE_HALF_LENGTH * theta_acc * cos / total
        moved = torch.stack(
            [
                x + TAU * x_dot,
                x_dot + TAU * x_acc,
                theta + TAU * theta_dot,
                theta_dot + TAU * theta_acc,
            ],
            dim=1,
        )
        steps = self._steps + 1
        terminated = (moved[:, 0].abs() > X_LIMIT) | (moved[:, 2].abs() > THETA_LIMIT)
        truncated = steps >= self.max_episode_steps
        rewards = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)
        fresh = self._fresh()
        infos: dict[str, Any] = {}
        if self.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP:
            resetting = self._needs_reset
            moved = torch.where(resetting[:, None], fresh, moved)
            steps = torch.where(resetting, 0, steps)
            rewards = torch.where(resetting, 0.0, rewards)
            terminated &= ~resetting
            truncated &= ~resetting
            self._needs_reset = terminated | truncated
            obs = moved
        else:
            done = terminated | truncated
            infos = {"final_obs": moved, "_final_obs": done}
            obs = torch.where(done[:, None], fresh, moved)
            steps = torch.where(done, 0, steps)
        self._state, self._steps = obs, steps
        return obs.clone(), rewards, terminated, truncated, infos


def _device(device: Any) -> torch.device:
    """``device`` as a ``torch.device`` the env's tensors can live on, else named.

    Torch's own errors for a device that is not there (a ``RuntimeError`` about its CUDA
    library, or an ``AssertionError``) name no argument; the converter and the replay buffers
    raise ``DeviceError`` for it (``episodes.rollout.devices.checked_device``, a layer above).
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as error:  # "abc", 3.5, an index: none here
        if isinstance(error, RuntimeError) and isinstance(device, (int, np.integer)):
            raise DeviceError(f"device={device!r} is not available here: {error}") from error
        kind = TypeError if isinstance(error, TypeError) else DeviceError
        raise kind(f"device must be a torch device, its name or index, got {device!r}") from error
    if parsed.type == "meta":  # its tensors hold shapes only: no state to step
        raise DeviceError(f"device={device!r}: a meta device holds no data, so no env state")
    try:
        torch.empty(0, device=parsed)  # nothing to copy: only whether the device works here
    except (AssertionError, RuntimeError, NotImplementedError) as error:  # "cuda", "mps"
        why = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise DeviceError(f"device={device!r} is not available here: {why}") from error
    return parsed


def _count(value: Any, name: str, most: int | None = None) -> int:
    """``value`` as an int >= 1 (numpy ints taken), at most ``most``; else a ``ValueError``.

    Example:
        >>> _count(np.int64(3), "num_envs")
        3
        >>> _count(2.7, "num_envs")
        Traceback (most recent call last):
        ValueError: num_envs must be an int >= 1, got 2.7
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1:
        if most is None or value <= most:
            return int(value)
        raise ValueError(f"{name} must be at most {most}, got {value!r}")
    raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def _generator_seed(seed: int) -> int:
    """``seed`` as ``torch.Generator.manual_seed`` takes it: itself up to ``2**64 - 1``.

    A larger int, which torch refuses ("Overflow when unpacking long long"), is folded into
    64 bits by numpy's ``SeedSequence`` (as a list of seeds is), so it still picks one stream.

    Example:
        >>> _generator_seed(7), _generator_seed(2**64 - 1) == 2**64 - 1
        (7, True)
        >>> _generator_seed(2**64) == _generator_seed(2**64), _generator_seed(2**64) < 2**64
        (True, True)
    """
    if seed < 2**64:
        return seed
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])
