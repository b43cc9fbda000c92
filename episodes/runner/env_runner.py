"""EnvRunner: drives a gymnasium VectorEnv with a policy and records SingleAgentEpisode chunks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, SupportsIndex

import gymnasium as gym
import numpy as np

from episodes.indexing import as_flag, as_int, whole_number
from episodes.runner import reset_options as resets
from episodes.runner.backlog import backlog_due, warn_backlog
from episodes.runner.dead_workers import refuse_dead_workers
from episodes.runner.first_outputs import allocate_outputs
from episodes.runner.fixed_attributes import Fixed
from episodes.runner.infos import check_batched_infos
from episodes.runner.metrics import MetricsSlot, RunnerMetrics
from episodes.runner.modes import autoreset_mode_of, warn_doubt
from episodes.runner.nesting import check_env_rows
from episodes.runner.policy import (
    check_holds_data,
    check_outputs,
    check_outputs_hold_data,
    check_shapes,
    output_shapes,
    policy_return,
)
from episodes.runner.recordable import check_vector_env, unrecordable_kind
from episodes.runner.recorder import BatchedRecorder
from episodes.runner.recorder_choice import device_recorder, holds_tensors
from episodes.runner.sampled import SampledChunks
from episodes.runner.sizing import allocating
from episodes.runner.space_shapes import space_mismatch, warn_space_mismatch
from episodes.runner.state_layout import StateLayout
from episodes.runner.state_rows import detached, out_of_inference, with_fresh_rows
from episodes.runner.step_count import checked_num_steps
from episodes.seeds import check_env_seed
from episodes.structs import flatten

__all__ = ["WINDOWS", "EnvRunner", "autoreset_mode_of"]

#: What ``EnvRunner.sample(num_steps)`` counts (see ``EnvRunner``'s ``window``).
WINDOWS = ("transitions", "vector_steps")


class EnvRunner:
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
    such as ``action_logp`` are those of the policy that acted). When sub-envs reset at random
    at one rate, how many such transitions the luckiest sub-envs hold grows slowly (like the
    square root of the number of calls); where their episodes end at different rates (a
    per-env exploration rate, task variants), it grows linearly, and so do the memory held,
    each call's cost and the age of what is handed out. The runner warns once when a sub-env
    holds more than 16 calls' worth, and at least 256 rows (:mod:`episodes.runner.backlog`),
    as the last thing that call does (a ``RuntimeWarning`` naming the line calling
    :meth:`sample`; a filter raising it leaves the runner usable, only that call's chunks are
    not handed out); ``window="vector_steps"`` carries nothing over.

    Recording is batched: each vector step is written as one row per field into time-major
    blocks (see :mod:`episodes.runner.recorder`), and :meth:`sample` returns a
    :class:`~episodes.runner.sampled.SampledChunks`, a sequence whose chunks are built (as
    views into the blocks) only when touched. Episode ids are a per-runner prefix plus the
    episode's number.

    Recurrent policies (see :class:`~episodes.runner.policy.RecurrentPolicy`) get and return a
    state; the runner resets a sub-env's state (from ``initial_state``) whenever that sub-env
    starts a new episode, before the policy sees the new episode's first observation.

    Args:
        env: The vector env.
        policy: ``policy(obs) -> (actions, extras)``, or with a state
            ``policy(obs, state) -> (actions, extras, state)``.
        len_lookback_buffer: Lookback of the continuing chunks (RLlib's default 1; a
            ``FrameStack(n)`` reads ``n - 1``), at most the episode's age (``2**63 - 1``: all).
        initial_state: ``initial_state(num_envs) -> state`` for a recurrent policy; taken from
            ``policy.initial_state`` when the policy has one. None: feed-forward.
        state_batch_axis: The env axis of every state leaf (0 for ``[N, H]``; 1 for torch RNN
            states ``[num_layers, N, H]``); an int.
        seed: Seed of the first ``env.reset``: None, an int >= 0 (numpy ints taken) or, as
            ``VectorEnv.reset`` takes, a list of ``num_envs`` seeds, one per sub-env, each None
            or an int >= 0.
        numpy_episodes: Return numpy'd chunks (False: list-mode chunks, which the converter
            reads through its general path once one is built).
        window: What ``sample(num_steps)`` counts. ``"transitions"`` (default): every sub-env
            records ``num_steps`` transitions (see above). ``"vector_steps"``: the call takes
            exactly ``num_steps`` vector steps and every sub-env's window is those steps; in
            next-step mode a sub-env's reset steps are cells of its window that hold no
            transition (its chunks sum to ``num_steps`` less its reset steps), nothing is
            carried over, and the converter masks those cells (``Rollout.mask``,
            ``RolloutStorage.valid``). Same-step and disabled modes record the same either way.
        reset_options: Disabled mode only: options beside ``reset_mask`` at the runner's resets,
            a dict or ``reset_options(mask) -> dict`` (:mod:`episodes.runner.reset_options`).

    Raises:
        ValueError: A negative ``len_lookback_buffer``, a ``seed`` of none of those forms (a
            float, a bool, a negative int, a list of another length), an unknown ``window``, or
            ``reset_options`` outside disabled mode or holding ``reset_mask``.
        TypeError: ``len_lookback_buffer`` or ``state_batch_axis`` is not an int (a bool, a
            float, a string), as the episode's ``len_lookback_buffer``, ``numpy_episodes``
            is not a bool, or ``reset_options`` neither None, a dict nor a callable.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
        >>> chunks = runner.sample(50)
        >>> [sum(len(c) for c in chunks if c.custom_data["env_index"] == i) for i in range(2)]
        [50, 50]
        >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0,
        ...                    window="vector_steps")
        >>> chunks = runner.sample(50)  # 50 vector steps; reset steps record no transition
        >>> [sum(len(c) for c in chunks if c.custom_data["env_index"] == i) for i in range(2)]
        [47, 48]
    """

    #: Where the runner counts (:class:`RunnerMetrics`); a new one set here takes effect at once.
    metrics = MetricsSlot("_recorder")
    #: What the recorder and the checks were made with: read-only (:class:`Fixed`).
    env: Fixed[gym.vector.VectorEnv] = Fixed(
        "the runner steps the env it was made with: create a new EnvRunner"
    )
    num_envs: Fixed[int] = Fixed("it is the env's: create a new EnvRunner for another env")
    autoreset_mode: Fixed[gym.vector.AutoresetMode] = Fixed(
        "the recorder was made for it: create a new EnvRunner"
    )
    window: Fixed[str] = Fixed("the recorder was made for it: create a new EnvRunner")

    # What a sample continues from, set by _start_over (unstarted) and by each call.
    _recorder: BatchedRecorder
    seed: Any
    _obs: Any
    state: Any
    _state_layout: StateLayout | None  # what every state the policy returns must match
    _output_keys: tuple[str, ...] | None  # the policy's extra outputs
    _output_key_set: frozenset[str]
    _output_shapes: dict[str | None, Any]
    _failure: str | None  # why a sample() stopped part-way, if one did
    _options: dict[str, Any] | None = None  # the next full reset's (reset(options=))
    _reset_options: Any = None  # disabled mode's, beside reset_mask (None: reset_mask alone)

    def __init__(
        self,
        env: gym.vector.VectorEnv,
        policy: Callable[..., Any],
        *,
        len_lookback_buffer: int = 1,
        initial_state: Callable[[int], Any] | None = None,
        state_batch_axis: int = 0,
        seed: SupportsIndex | Sequence[SupportsIndex | None] | None = None,
        numpy_episodes: bool = True,
        window: str = "transitions",
        reset_options: resets.ResetOptions | None = None,
    ):
        as_int(len_lookback_buffer, what="len_lookback_buffer")  # a TypeError, as the episode's
        # Beyond int64 the blocks' index arithmetic would overflow (an age never gets there).
        lookback = min(whole_number(len_lookback_buffer, "len_lookback_buffer", 0), 2**63 - 1)
        check_vector_env(env)
        # 1.5 or True would reset the env quietly with seed 1
        seed = check_env_seed(seed, int(env.num_envs))
        if window not in WINDOWS:
            raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
        for name in ("observation", "action"):
            kind = unrecordable_kind(getattr(env, f"single_{name}_space", None))
            if kind:
                raise TypeError(
                    f"EnvRunner cannot record {kind} {name}s: their items have no fixed shape "
                    "to batch (Box, Discrete, MultiBinary, MultiDiscrete, in Dict/Tuple, can)"
                )
        self._window = window
        self._env = env
        self.policy = policy
        self._num_envs = int(env.num_envs)
        self._autoreset_mode = autoreset_mode_of(env)
        self._reset_options = resets.check_reset_options(reset_options, self._autoreset_mode)
        self._lookback = lookback
        if initial_state is None:
            initial_state = getattr(policy, "initial_state", None)
        self._initial_state = initial_state
        self.state_batch_axis = _axis(state_batch_axis)
        self.numpy_episodes = numpy_episodes  # checked by the property
        self.metrics = RunnerMetrics()
        self._stepped = False  # whether the current sample() has stepped the env
        # Once per runner, reset() or not: the warnings of next-step carry-over, and of first
        # observations that do not fit the env's space (the message, until it is given).
        self._backlog_warned = self._space_warned = False
        self._space_doubt: str | None = None
        self._start_over(seed)

    def __repr__(self) -> str:
        mode = getattr(self._autoreset_mode, "name", self._autoreset_mode)
        return (
            f"EnvRunner(num_envs={self._num_envs}, autoreset_mode={mode}, window={self._window!r})"
        )

    @property
    def len_lookback_buffer(self) -> int:
        """Lookback of the continuing chunks; read-only: the recorder was made with it."""
        return self._lookback

    @property
    def numpy_episodes(self) -> bool:
        """Whether ``sample`` returns numpy'd chunks; set it to a bool (else a ``TypeError``)."""
        return self._numpy_episodes

    @numpy_episodes.setter
    def numpy_episodes(self, value: bool) -> None:
        self._numpy_episodes = as_flag(value, "numpy_episodes")  # "no" would be True

    @property
    def is_recurrent(self) -> bool:
        """True when the policy gets and returns a state.

        Example:
            >>> from episodes.runner import RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> policy = RandomPolicy(env.action_space, seed=0)
            >>> EnvRunner(env, policy).is_recurrent
            False
            >>> EnvRunner(env, policy, initial_state=lambda n: np.zeros((n, 1))).is_recurrent
            True
        """
        return self._initial_state is not None

    @property
    def least_num_steps(self) -> int:
        """The smallest ``num_steps`` :meth:`sample` takes (2 for vector steps of a next-step env).

        Example:
            >>> from episodes.runner import RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> policy = RandomPolicy(env.action_space, seed=0)
            >>> EnvRunner(env, policy).least_num_steps
            1
            >>> EnvRunner(env, policy, window="vector_steps").least_num_steps
            2
        """
        # One vector step of a next-step env could be every sub-env's reset step.
        resets = self._autoreset_mode is gym.vector.AutoresetMode.NEXT_STEP
        return 2 if self._window == "vector_steps" and resets else 1

    # --------------------------------------------------------------------------------- public
    def sample(self, num_steps: int) -> SampledChunks:
        """Steps the env until every sub-env recorded ``num_steps`` transitions; returns them.

        With ``window="vector_steps"`` the call takes exactly ``num_steps`` vector steps.

        Args:
            num_steps: Transitions per sub-env, or vector steps (>= 1; >= 2 for vector steps
                of a next-step env, whose one step could be a sub-env's reset step).

        Returns:
            The chunks, sub-env by sub-env, in time order (a lazy sequence); per sub-env their
            lengths sum to ``num_steps`` (less the sub-env's reset steps with vector steps).

        Raises:
            ValueError: ``num_steps`` too small (or too large for its blocks to be allocated,
                before the env steps), the policy's outputs do not fit (a batch
                without one entry per sub-env, an empty dict or tuple, a torch tensor on the
                meta device, extra outputs whose keys, shapes or nesting change, values their
                column cannot take), or the env's do not (reset observations without one item
                per sub-env; observations, rewards or flags whose shapes, or observations
                whose nesting, differ from the first batch's). Whatever a call raises before
                the env steps leaves the runner as it was (the next call goes on as if it had
                not been made).
            TypeError: The policy returned no ``(actions, extras)`` tuple (with a state:
                ``(actions, extras, state)``), extras that are not a dict, or a key that is
                not a string; refused before the env steps, as above.
            RuntimeError: An earlier call failed after the env stepped (whatever raised:
                the env, the policy, an interrupt): the env had stepped past what was
                recorded, so its episodes cannot go on; :meth:`reset` starts new ones.

        Warns:
            RuntimeWarning: Once per runner, as the call's last act, where next-step carry-over
                grows past its bound (:mod:`episodes.runner.backlog`); an error filter raising
                it leaves the runner usable (only that call's chunks are not handed out).
                So are, once per runner each, an ``AutoresetModeWarning`` (an env read as
                next-step whose reset steps look same-step) and a ``SpaceMismatchWarning`` (the
                first observations do not fit ``single_observation_space``).

        Example:
            >>> from episodes.runner import RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
            >>> first, second = runner.sample(3), runner.sample(3)
            >>> [len(c) for c in first], [c.custom_data["env_index"] for c in first]
            ([3, 3], [0, 1])
            >>> second[0].id_ == first[0].id_, second[0].t_started
            (True, 3)
        """
        num_steps = checked_num_steps(num_steps, self.least_num_steps)
        refuse_dead_workers(self._env)  # before the failure's advice to reset()
        if self._failure is not None:
            raise RuntimeError(
                f"an earlier sample() of this runner failed part-way ({self._failure}): the "
                "env had stepped and its episodes cannot continue consistently; call reset() "
                "to start new episodes, or create a new EnvRunner"
            )
        start = time.perf_counter()
        # A call that raises before the env steps (a refused first output, the policy's error,
        # an interrupt) puts this back: a first call leaves the runner unstarted.
        recorder_before, recorder_saved = self._recorder, self._recorder.saved()
        saved = (self._obs, self.state, self._state_layout, self._output_keys, self._output_key_set)
        self._stepped = False
        vector_steps = 0
        try:
            recorder = self._begin(num_steps)
            while not recorder.full():
                self._step()
                vector_steps += 1
            recording = recorder.finish()
            recorded = recorder.recorded  # known once finished (a device recorder counts then)
            chunks = SampledChunks(
                recording,
                # Read as the constructor reads them: a VectorEnv need not have them.
                getattr(self._env, "single_observation_space", None),
                getattr(self._env, "single_action_space", None),
                numpy_episodes=self.numpy_episodes,
            )
            self.metrics.add_time(recorded, vector_steps, time.perf_counter() - start)
        except BaseException as err:  # Ctrl-C too: the recorder holds a half-recorded call
            if self._stepped:  # the env went on past what was recorded: no way back
                self._failure = f"{type(err).__name__}: {err}"
                raise
            self._recorder = recorder_before
            recorder_before.restore(recorder_saved)
            self._obs, self.state, self._state_layout, self._output_keys = saved[:4]
            self._output_key_set = saved[4]
            raise
        # Last, the call complete: a filter raising a warning leaves the runner usable.
        warn_doubt(recorder, self._env)  # an env read as next-step that looks same-step
        if self._space_doubt is not None:
            self._space_warned, doubt, self._space_doubt = True, self._space_doubt, None
            warn_space_mismatch(doubt)
        if not self._backlog_warned and backlog_due(recorder.waiting, num_steps):
            self._backlog_warned = True  # first: such a filter raises it once
            warn_backlog(carried=recorder.waiting, num_steps=num_steps, warned=False)
        return chunks

    def get_metrics(self, *, reset: bool = True) -> dict[str, Any]:
        """Returns (and by default clears) the metrics; see :meth:`RunnerMetrics.reduce`.

        Example:
            >>> from episodes.runner import RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
            >>> _ = runner.sample(3)
            >>> m = runner.get_metrics()
            >>> m["num_env_steps"], m["num_vector_steps"], runner.get_metrics()["num_env_steps"]
            (6, 3, 0)
        """
        return self.metrics.reduce(reset=reset)

    def reset(self, seed: resets.Seed = None, options: dict[str, Any] | None = None) -> None:
        """Starts over: the next :meth:`sample` resets the env (with ``seed``, ``options``).

        For a re-seed, or after the env was reset or stepped outside the runner (which it
        cannot see: its next call would continue each episode from the observation it kept).
        The episodes running now are abandoned: chunks handed out keep what they hold (neither
        terminated nor truncated), transitions recorded but not handed out yet (next-step
        carry-over) are dropped, and new episodes get new ids. A recurrent state starts from
        ``initial_state`` again. A runner whose ``sample`` failed part-way is usable again.
        Metrics are kept.

        Args:
            seed: Seed of that reset, in the forms the constructor's ``seed`` takes; None
                resets without one (the env's generators go on). It becomes ``runner.seed``.
            options: That reset's ``options`` (a dict, passed once to ``env.reset``; no
                ``reset_mask``); None passes none. Only that reset's: the next reset() has its own.

        Raises:
            ValueError: A ``seed`` of none of those forms, or ``options`` holding ``reset_mask``.
            TypeError: ``options`` neither None nor a dict. Either way the runner is unchanged.

        Example:
            >>> from episodes.runner import RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
            >>> first = runner.sample(3)
            >>> runner.reset(seed=0)
            >>> again = runner.sample(3)
            >>> again[0].id_ == first[0].id_, again[0].t_started
            (False, 0)
            >>> bool((again[0].get_observations(0) == first[0].get_observations(0)).all())
            True
        """
        self._start_over(check_env_seed(seed, self._num_envs), resets.check_options(options))

    def _start_over(self, seed: Any, options: dict[str, Any] | None = None) -> None:
        """Unstarted: the next call resets the env with ``seed`` and records new episodes."""
        self._recorder = self._new_recorder()
        self.seed, self._options = seed, options  # the first reset's (until reset() gives more)
        self._obs = self.state = self._state_layout = self._output_keys = self._failure = None
        self._output_key_set, self._output_shapes = frozenset(), {}

    def _new_recorder(self, on_device: bool = False) -> BatchedRecorder:
        """A recorder for this runner (torch blocks ``on_device``), told what the last one knew.

        The autoreset mode's doubt is said once per runner: a new recorder (``reset``, or the
        device recorder a torch env's first reset picks) takes the flag of the one it replaces.
        """
        make = device_recorder if on_device else BatchedRecorder
        vector_steps = self._window == "vector_steps"
        recorder = make(
            self._num_envs,
            self._autoreset_mode,
            self._lookback,
            self.metrics,
            vector_steps=vector_steps,
        )
        previous = self.__dict__.get("_recorder")
        if previous is not None:
            recorder.doubted = previous.doubted
        return recorder

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A runner pickled by an earlier build holds its fixed attributes under their names.
        for name in ("env", "num_envs", "autoreset_mode", "window"):
            if name in state:
                state["_" + name] = state.pop(name)
        state.setdefault("_space_warned", False)
        state.setdefault("_space_doubt", None)
        self.__dict__.update(state)

    # ------------------------------------------------------------------------------- internal
    def _begin(self, num_steps: int) -> BatchedRecorder:
        """Begins the call's recording; the first call resets the env (and picks the recorder)."""
        recorder = self._recorder
        if self._obs is not None:
            # Kept from a call made under torch.inference_mode: a policy run with grad now
            # could not use them (inference tensors cannot be saved for backward).
            self._obs, self.state = out_of_inference(self._obs), out_of_inference(self.state)
            with allocating(num_steps):  # a num_steps no memory holds: named, not numpy's words
                recorder.begin(num_steps, self._obs, None)
            return recorder
        state = None if self._initial_state is None else self._initial_state(self._num_envs)
        if self._initial_state is not None:
            self._state_layout = StateLayout.of(state, self._num_envs, self.state_batch_axis)
        # Sync and async vector envs take a list of seeds too; VectorEnv's signature says int
        options = {} if self._options is None else {"options": dict(self._options)}
        obs, reset_infos = self._env.reset(seed=self.seed, **options)  # unused: as before
        check_batched_infos(reset_infos, "the env's reset infos")
        # Before the device recorder is picked by its first leaf (either recorder's begin
        # would fail in numpy's or torch's words); the runner stays unstarted.
        check_env_rows(obs, self._num_envs, "the env's reset observations")
        if not self._space_warned:  # said as the call's last act (see sample)
            self._space_doubt = space_mismatch(
                obs, getattr(self._env, "single_observation_space", None)
            )
        if holds_tensors(obs):  # chosen at the first reset, before anything was recorded
            recorder = self._new_recorder(on_device=True)
        with allocating(num_steps):
            recorder.begin(num_steps, obs, reset_infos)
        self._recorder, self._obs, self.state = recorder, obs, state
        return recorder

    def _act(self) -> tuple[Any, dict[str, np.ndarray]]:
        if self._initial_state is None:
            actions, extras, _ = policy_return(self.policy(self._obs), False)
        else:
            actions, extras, state = policy_return(self.policy(self._obs, self.state), True)
            layout = self._state_layout
            assert layout is not None
            layout.check(state)  # before the env steps: a reset pairs its leaves with fresh ones
            if not self._stepped:  # a call's first step, where a refusal leaves no trace
                for leaf in flatten(state)[0]:
                    check_holds_data(leaf, "the policy's state")
            # Kept as data: a state that carries the policy's autograd graph would chain every
            # step's graph (and observations) to the next, across calls, without bound.
            self.state = detached(state)
        return actions, extras

    def _step(self) -> None:
        # The env's observation goes to the policy as is: the blocks keep their own copy.
        actions, extras = self._act()
        keys = self._output_keys
        # Checked before the env steps; a set comparison per step (a renamed key as well).
        if keys is None or extras.keys() != self._output_key_set:
            self._output_keys = check_outputs(actions, extras, self._num_envs, keys)
            self._output_key_set = frozenset(self._output_keys)
            if keys is None:  # the runner's first step: its output blocks, before env.step
                self._output_shapes = output_shapes(actions, extras)
                allocate_outputs(self._recorder, actions, extras)
        elif not self._stepped:  # a later call's first step: refused, the runner is untouched
            check_outputs_hold_data(actions, extras)  # (later steps refuse them once recorded)
        check_shapes(actions, extras, self._output_shapes)
        # Written before the env steps: outputs that are views of the observations (an action
        # mask passed through) would change under an env that reuses its observation buffer,
        # and actions under an env that clips them in place. Not recorded until env_step.
        actions = self._recorder.put_outputs(actions, extras)  # a numpy env's: host arrays
        self._stepped = True  # from here a failure leaves the env past what was recorded
        obs, rewards, terminateds, truncateds, infos = self._env.step(actions)
        check_batched_infos(infos, "the env's step infos", self._autoreset_mode)
        opts, reset = self._reset_options, self._env.reset  # disabled mode's (else unused)
        reset = reset if opts is None else resets.masked_reset(reset, opts)
        self._obs, started = self._recorder.env_step(
            obs, rewards, terminateds, truncateds, infos, reset=reset
        )
        if self._initial_state is not None and started is not None:
            self.state = self._reset_state(self.state, started)

    def _reset_state(self, state: Any, mask: Any) -> Any:
        """The state with the started sub-envs' entries taken from a fresh ``initial_state``.

        Leaf by leaf, in the structure the policy returned (``initial_state`` may give a
        namedtuple where the policy returns a tuple: ``StateLayout`` checked that the leaves
        pair up). Tensor leaves are picked by ``where`` (torch has no row write for uint16/32/64;
        under a device mask, on the device: no sync); numpy leaves by the mask's rows on the
        host (one copy of a device mask per step, which only a policy keeping numpy state on a
        tensor env pays). Fresh entries are cast to the dtype of the state the policy returned.
        """
        assert self._initial_state is not None and self._state_layout is not None
        # Called for every reset step (on a torch env, every step: which sub-envs started
        # stays on the device), as a random fresh state is drawn anew for each reset.
        fresh = self._initial_state(self._num_envs)
        # The policy's state matched the layout; a fresh one of other leaves would fail in
        # numpy's words, or be broadcast into the state's leaves without an error.
        self._state_layout.check(fresh, "initial_state returned (at a sub-env's reset)")
        return with_fresh_rows(state, fresh, mask, self.state_batch_axis)


def _axis(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"state_batch_axis must be an int, got {value!r}")
    return int(value)
