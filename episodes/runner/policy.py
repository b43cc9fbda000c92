"""What an env runner expects of a policy, plus a random policy for demos and tests."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from episodes.runner.infos import is_tensor
from episodes.seeds import check_space_seed
from episodes.structs import map_batch

__all__ = [
    "Policy",
    "RandomPolicy",
    "RecurrentPolicy",
    "check_env_holds_data",
    "check_holds_data",
    "check_no_mapping",
    "check_numpy_dtype",
    "check_outputs",
    "check_outputs_hold_data",
    "policy_return",
]


@runtime_checkable
class Policy(Protocol):
    """A feed-forward policy: ``policy(obs_batch) -> (actions, extra_model_outputs)``.

    ``obs_batch`` is the vector env's batched observation; ``actions`` a batch the vector env
    accepts; ``extra_model_outputs`` a dict of arrays with the env axis first (e.g.
    ``{"action_logp": [N], "vf_preds": [N]}``), possibly empty.

    Example:
        >>> from episodes.runner import EnvRunner
        >>> class PushLeft:
        ...     def __call__(self, obs):
        ...         return np.zeros(len(obs), np.int64), {"vf_preds": obs[:, 0]}
        >>> isinstance(PushLeft(), Policy), isinstance(PushLeft(), RecurrentPolicy)
        (True, False)
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> chunk = EnvRunner(env, PushLeft(), seed=0).sample(3)[0]
        >>> chunk.get_actions().tolist(), list(chunk.extra_model_outputs)
        ([0, 0, 0], ['vf_preds'])
    """

    def __call__(self, obs: Any) -> tuple[Any, dict[str, Any] | None]: ...  # noqa: D102


@runtime_checkable
class RecurrentPolicy(Protocol):
    """A recurrent policy: ``policy(obs_batch, state) -> (actions, extra_model_outputs, state)``.

    ``initial_state(num_envs)`` returns a fresh state batch: an array/tensor or a tuple/dict of
    them, each with the env axis at the runner's ``state_batch_axis``.

    Example:
        >>> class StepCounter:  # its state counts the steps of each sub-env's episode
        ...     def initial_state(self, num_envs):
        ...         return np.zeros(num_envs, np.int64)
        ...     def __call__(self, obs, state):
        ...         return np.zeros(len(obs), np.int64), {"t": state}, state + 1
        >>> isinstance(StepCounter(), RecurrentPolicy)
        True
    """

    def initial_state(self, num_envs: int) -> Any:
        """A fresh state batch; the runner also resets a sub-env's state from it at each reset.

        Example:
            >>> from episodes.runner import EnvRunner
            >>> class StepCounter:
            ...     def initial_state(self, num_envs):
            ...         return np.zeros(num_envs, np.int64)
            ...     def __call__(self, obs, state):
            ...         return np.zeros(len(obs), np.int64), {"t": state}, state + 1
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, StepCounter(), seed=0).sample(12)  # sub-env 0 resets
            >>> [c.get_extra_model_outputs("t").tolist() for c in chunks.by_env()[0]]
            [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [0]]
        """
        ...

    def __call__(self, obs: Any, state: Any) -> tuple[Any, dict[str, Any] | None, Any]: ...  # noqa: D102


class RandomPolicy:
    """Samples uniformly from a vector env's batched action space; records no extra outputs.

    Args:
        action_space: The vector env's (batched) ``action_space``.
        seed: Seed for the action space's sampler, as ``action_space.seed`` takes it: None, an
            int >= 0, or for a Tuple / Dict space a list / dict of such seeds.

    Raises:
        ValueError: A ``seed`` holding a bool, a float, a string or a negative int.

    Example:
        >>> import gymnasium as gym
        >>> policy = RandomPolicy(gym.spaces.MultiDiscrete([2, 2]), seed=0)
        >>> actions, extras = policy(None); actions.shape, extras
        ((2,), {})
    """

    def __init__(self, action_space: gym.Space[Any], seed: Any = None):
        seed = check_space_seed(seed)  # True would seed the sampler with 1 without a word
        self.action_space = action_space
        if seed is not None:
            self.action_space.seed(seed)

    def __repr__(self) -> str:
        return f"RandomPolicy({self.action_space})"

    def __call__(self, obs: Any) -> tuple[Any, dict[str, np.ndarray]]:
        """One random action per sub-env (``obs`` is ignored) and no extra outputs."""
        return self.action_space.sample(), {}


def check_outputs(
    actions: Any, extras: dict[str, Any], num_envs: int, keys: tuple[str, ...] | None
) -> tuple[str, ...]:
    """Checks a policy's outputs against the sub-envs and the keys it returned before.

    Every leaf of ``actions`` and of each extra output must be a batch with one entry per
    sub-env whose dtype numpy has (a torch ``bfloat16`` has none: the episodes are numpy) and
    which holds data (not a torch tensor on the meta device), the extra outputs' keys must be
    strings (each names a column), and they may not change once recorded (an episode's columns
    run the whole episode: a key that appears later has no values for the earlier steps).

    Args:
        actions: The policy's actions.
        extras: Its extra model outputs.
        num_envs: The vector env's sub-envs.
        keys: The keys returned so far, or None at the first step.

    Returns:
        The keys, sorted.

    Raises:
        ValueError: A batch of the wrong length, without a numpy dtype or without data, a
            ragged list, an output without any batch (an empty dict or tuple), or keys that
            changed; nothing is recorded.
        TypeError: A key that is not a string, or a leaf that is a mapping but no dict (a
            TensorDict: :func:`check_no_mapping`).

    Example:
        >>> check_outputs(np.zeros(2), {"vf_preds": np.zeros(2)}, 2, None)
        ('vf_preds',)
        >>> check_outputs(np.zeros(2), {}, 2, ("vf_preds",))
        Traceback (most recent call last):
        ...
        ValueError: the policy's extra outputs changed from ['vf_preds'] to []: ...
    """
    for key in extras:  # before sorting them: an int among strs would stop sorted()
        if not isinstance(key, str):
            raise TypeError(
                f"the policy's extra outputs are named by str keys (each names a column of "
                f"the episodes), got the {type(key).__name__} key {key!r}"
            )
    if keys is not None:
        now = sorted(extras)
        if now != list(keys):
            raise ValueError(
                f"the policy's extra outputs changed from {list(keys)} to {now}: a runner "
                "records the same extra outputs at every step (each is a column of the "
                "episodes, with a value for every step)"
            )
        return keys
    named = [("actions", actions), *((f"extra output {k!r}", v) for k, v in extras.items())]
    for name, batch in named:
        leaves = _leaves(batch)
        if not leaves:  # no column to record it in (a block row would find no leaf)
            raise ValueError(
                f"the policy's {name} holds no batch (an empty {type(batch).__name__}): an "
                "output is an array, or a dict / tuple holding at least one"
            )
        for leaf in leaves:
            check_no_mapping(leaf, f"the policy's {name}")
            shape = getattr(leaf, "shape", None)
            shape = tuple(shape) if shape is not None else _list_shape(leaf, name)
            if not shape or shape[0] != num_envs:
                raise ValueError(
                    f"the policy's {name} must hold one entry per sub-env ({num_envs}) along "
                    f"the first axis, got shape {shape}"
                )
            check_numpy_dtype(leaf)
            check_holds_data(leaf, f"the policy's {name}")
    return tuple(sorted(extras))


def policy_return(out: Any, recurrent: bool) -> tuple[Any, dict[str, Any], Any]:
    """Splits a policy's return into its actions, extra outputs (a new dict) and state.

    A policy returns a tuple ``(actions, extras)``, a recurrent one ``(actions, extras,
    state)`` (a list of those items is taken too); ``extras`` is a dict of extra outputs, or
    None for none. Anything else is refused before the env steps: unpacking it, or ``dict()``
    on it, would fail in words that name neither the policy nor what it returned.

    Args:
        out: What the policy returned.
        recurrent: Whether the policy gets and returns a state.

    Returns:
        ``(actions, extras, state)``; the state is None for a feed-forward policy.

    Raises:
        TypeError: A return of another type or length, or extras that are not a dict.

    Example:
        >>> actions, extras, state = policy_return((np.zeros(2), None), recurrent=False)
        >>> extras, state
        ({}, None)
        >>> policy_return((np.zeros(2), [1, 2]), recurrent=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: the policy's extra outputs must be a dict (or None), got a list of 2 items: ...
    """
    size = 3 if recurrent else 2
    if type(out) is not tuple or len(out) != size:  # one comparison for the usual tuple
        if not isinstance(out, (tuple, list)) or len(out) != size:
            raise TypeError(f"the policy returned {_described(out)}: {_form(recurrent)}")
    extras = out[1]
    if type(extras) is not dict:
        if extras is None:
            extras = {}
        elif not hasattr(extras, "keys"):  # dict() would read it as (key, value) pairs
            raise TypeError(
                f"the policy's extra outputs must be a dict (or None), got "
                f"{_described(extras)}: {_form(recurrent)}"
            )
    return out[0], dict(extras), out[2] if recurrent else None


def _described(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a value of type {type(value).__name__}"


def _form(recurrent: bool) -> str:
    if recurrent:
        return "a recurrent policy(obs, state) returns a tuple (actions, extras, state)"
    return (
        "a policy(obs) returns a tuple (actions, extras), extras a dict of extra outputs "
        "(possibly empty); one that also returns a state needs initial_state"
    )


def check_outputs_hold_data(actions: Any, extras: dict[str, Any]) -> None:
    """Raises ``check_holds_data``'s ``ValueError`` for the first output leaf without data.

    ``check_outputs`` checks this at the policy's first step; the runner checks it again at
    each later call's first step, where a refusal still leaves the env unstepped, and with it
    :func:`check_no_mapping`'s ``TypeError`` for a leaf that is a mapping but no dict.

    Example:
        >>> import torch
        >>> check_outputs_hold_data(np.zeros(2), {"vf": torch.zeros(2)})
        >>> check_outputs_hold_data(np.zeros(2), {"vf": (torch.zeros(2, device="meta"),)})
        Traceback (most recent call last):
        ...
        ValueError: the policy's extra output 'vf': got a torch tensor on the meta device, ...
    """
    named = [("actions", actions), *((f"extra output {k!r}", v) for k, v in extras.items())]
    for name, batch in named:
        map_batch(functools.partial(check_no_mapping, who=f"the policy's {name}"), batch)
        map_batch(functools.partial(check_holds_data, who=f"the policy's {name}"), batch)


def check_no_mapping(value: Any, who: str) -> None:
    """Raises a ``TypeError`` for a mapping that is no dict (a TensorDict) as an output leaf.

    Only dicts (and tuples) nest a policy's outputs: any other mapping was one leaf, recorded
    as numpy reads it (a TensorDict as an empty ``(rows, 0)`` float32 column, a ``Mapping`` as
    an object) or failing in numpy's words after the env stepped. A TensorDict counts whether
    or not it registers as a ``Mapping`` (it has a ``batch_size`` and ``keys``).

    Example:
        >>> from types import MappingProxyType
        >>> check_no_mapping({"loc": np.zeros(2)}, "the policy's extra output 'dist'")
        >>> check_no_mapping(MappingProxyType({}), "the policy's actions")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: the policy's actions: got a mappingproxy, a mapping the runner does not ...
    """
    if value.__class__ is dict or value.__class__ is np.ndarray:
        return
    if isinstance(value, Mapping) or hasattr(value, "batch_size") and hasattr(value, "keys"):
        raise TypeError(
            f"{who}: got a {type(value).__name__}, a mapping the runner does not walk (only "
            "dicts nest outputs): return a plain dict of arrays or tensors, dict(...) of it "
            "(a TensorDict's to_dict())"
        )


def check_env_holds_data(
    obs: Any,
    rewards: Any = None,
    terminateds: Any = None,
    truncateds: Any = None,
    *,
    obs_name: str = "the env's observations",
) -> None:
    """Raises a ``ValueError`` naming the first of an env step's values without data.

    Such a value is a torch tensor on the meta device (see ``check_holds_data``). The
    recorders call it only once a conversion or a write failed (torch's words name no field),
    so the usual step pays nothing for it. ``obs_name`` names the observations (a reset's).

    Example:
        >>> import torch
        >>> check_env_holds_data({"a": torch.zeros(2)}, np.zeros(2), [True, False], None)
        >>> check_env_holds_data(np.zeros(2), torch.zeros(2, device="meta"))
        Traceback (most recent call last):
        ...
        ValueError: the env's rewards: got a torch tensor on the meta device, which holds no ...
    """
    use = "to record"
    map_batch(functools.partial(check_holds_data, who=obs_name, use=use), obs)
    named = (("rewards", rewards), ("terminated", terminateds), ("truncated", truncateds))
    for name, value in named:
        check_holds_data(value, f"the env's {name}", use)


def check_holds_data(value: Any, who: str, use: str = "to step the env with or to record") -> None:
    """Raises a ``ValueError`` for a torch tensor on the meta device: a shape without data.

    Such a tensor can neither step the env nor be recorded, and torch's own error (naming no
    field) would come only after the env stepped.

    Args:
        value: A leaf of an output.
        who: What the value is, for the message.
        use: What it would have been used for, for the message.

    Example:
        >>> import torch
        >>> check_holds_data(torch.zeros(2), "the policy's actions")
        >>> check_holds_data(torch.zeros(2, device="meta"), "the policy's actions")
        Traceback (most recent call last):
        ...
        ValueError: the policy's actions: got a torch tensor on the meta device, which holds ...
    """
    if getattr(value, "is_meta", False) is True:  # without importing torch
        raise ValueError(
            f"{who}: got a torch tensor on the meta device, which holds no data (only a "
            f"shape) {use}: make it on a real device"
        )


def check_numpy_dtype(value: Any) -> None:
    """Raises a ``ValueError`` for a torch tensor whose dtype numpy lacks (``bfloat16``).

    Recorded values become numpy episodes: such a tensor could not be, and without this
    check numpy's bare ``TypeError`` would come only after the env stepped.

    Example:
        >>> import torch
        >>> check_numpy_dtype(torch.zeros(2)); check_numpy_dtype(np.zeros(2))
        >>> check_numpy_dtype(torch.zeros(2, dtype=torch.bfloat16))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: a torch env or policy gave torch.bfloat16 values, which have no numpy ...
    """
    if not is_tensor(value):  # told without importing torch
        return
    import torch  # already imported by whoever made the tensor

    try:
        torch.empty(0, dtype=value.dtype, device="cpu").numpy()  # not the default device
    except TypeError:
        raise ValueError(
            f"a torch env or policy gave {value.dtype} values, which have no numpy dtype for "
            "the episodes: cast them (float32) before they are recorded"
        ) from None


def output_shapes(actions: Any, extras: dict[str, Any]) -> dict[str | None, Any]:
    """The shapes of a step's outputs, actions under None: what each later step must repeat.

    An array's (or a list's) shape; for a dict or tuple of them the same nesting with each
    leaf's shape, so that a renamed inner key or a tuple turned dict differs too (a block
    row records the first step's structure: another one would be filed under its names). A
    block row takes a batch that lost its env axis or has a unit dimension by broadcasting it
    over the sub-envs, without an error.

    Example:
        >>> output_shapes(np.zeros(2), {"vf_preds": np.zeros((2, 1)), "s": {"h": np.zeros(2)}})
        {None: (2,), 'vf_preds': (2, 1), 's': {'h': (2,)}}
    """
    shapes: dict[str | None, Any] = {None: _shape_of(actions)}
    for key, value in extras.items():
        shapes[key] = _shape_of(value)
    return shapes


def check_shapes(actions: Any, extras: dict[str, Any], shapes: dict[str | None, Any]) -> None:
    """Raises a ``ValueError`` when an output's shape or nesting differs from ``output_shapes``'s.

    Example:
        >>> shapes = output_shapes(np.zeros(2), {"vf_preds": np.zeros(2), "s": (np.zeros(2),)})
        >>> check_shapes(np.zeros(2), {"vf_preds": np.zeros(2), "s": (np.ones(2),)}, shapes)
        >>> check_shapes(np.zeros(2), {"vf_preds": np.float64(0.0), "s": (np.ones(2),)}, shapes)
        Traceback (most recent call last):
        ...
        ValueError: the policy's extra output 'vf_preds' changed shape from (2,) to (): ...
        >>> check_shapes(np.zeros(2), {"vf_preds": np.zeros(2), "s": {"h": np.ones(2)}}, shapes)
        Traceback (most recent call last):
        ...
        ValueError: the policy's extra output 's' changed nesting from ((2,),) to {'h': (2,)}: ...
    """
    # An array costs one attribute read and one comparison: this runs at every vector step.
    # A dict or tuple has no shape: its nesting of leaf shapes is built and compared.
    expected = shapes[None]
    if getattr(actions, "shape", None) != expected and _checked_shape(actions, None) != expected:
        _shape_changed("actions", expected, actions)
    for key, value in extras.items():
        expected = shapes[key]
        if getattr(value, "shape", None) != expected and _checked_shape(value, key) != expected:
            _shape_changed(f"extra output {key!r}", expected, value)


def _shape_of(batch: Any) -> Any:
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return tuple(shape)
    if isinstance(batch, (dict, tuple)):  # nests as map_batch does: a namedtuple equals a tuple
        return map_batch(_shape_of, batch)
    return tuple(np.shape(batch))  # a list is one leaf, a batch: shaped as its array


def _checked_shape(batch: Any, key: str | None) -> Any:
    try:
        return _shape_of(batch)
    except ValueError:  # a ragged list, in numpy's words that name no output
        name = "actions" if key is None else f"extra output {key!r}"
        for leaf in _leaves(batch):
            _list_shape(leaf, name)
        raise


def _leaves(batch: Any) -> list[Any]:
    leaves: list[Any] = []
    map_batch(leaves.append, batch)  # a list is one leaf here: a batch, not a structure
    return leaves


def _list_shape(leaf: Any, name: str) -> tuple[int, ...]:
    """The shape of a leaf without one (a list), or a ``ValueError`` naming the output.

    A list numpy cannot shape is ragged, unless an object in it (or the leaf itself) raised
    its own error (its ``__array__``, say): that error is quoted and chained.
    """
    try:
        return tuple(np.shape(leaf))
    except ValueError as err:
        try:
            own = _own_error(leaf) if isinstance(leaf, (list, tuple)) else (leaf, err)
        except RecursionError:  # a list holding itself
            own = None
        if own is not None:
            raise ValueError(
                f"the policy's {name} cannot be read as an array (numpy reading a "
                f"{type(own[0]).__name__} in it raised: {own[1]})"
            ) from own[1]
        raise ValueError(
            f"the policy's {name} is a list whose items differ in shape (a ragged list): a "
            "batch holds one entry of one shape per sub-env"
        ) from None


def _own_error(items: list[Any] | tuple[Any, ...]) -> tuple[Any, ValueError] | None:
    """The first object in nested ``items`` (no list) whose shape numpy cannot read, and why."""
    for item in items:
        if isinstance(item, (list, tuple)):
            found = _own_error(item)
            if found is not None:
                return found
            continue
        try:
            np.shape(item)
        except ValueError as err:
            return item, err
    return None


def _shape_changed(name: str, before: Any, value: Any) -> None:
    # A mapping that is no dict (a TensorDict) has a shape of its own: name it instead.
    map_batch(functools.partial(check_no_mapping, who=f"the policy's {name}"), value)
    after = _shape_of(value)
    flat_before, flat_after = _leaf_shapes(before), _leaf_shapes(after)
    if flat_before == flat_after:  # the same leaves under other keys or containers
        what = f"nesting from {before} to {after}"
    elif isinstance(before, dict) or isinstance(after, dict) or before != flat_before[0]:
        what = f"shape from {flat_before} to {flat_after}"  # leaf by leaf
    else:
        what = f"shape from {before} to {after}"
    raise ValueError(
        f"the policy's {name} changed {what}: every step's outputs keep the first step's "
        "shapes (one row per sub-env) and nesting (the same dict keys, tuples of the same "
        "length)"
    )


def _leaf_shapes(shapes: Any) -> tuple[Any, ...]:
    """The leaf shapes of an ``output_shapes`` entry, in ``flatten``'s order (keys sorted)."""
    if isinstance(shapes, dict):
        return tuple(leaf for key in sorted(shapes) for leaf in _leaf_shapes(shapes[key]))
    if all(isinstance(n, int) for n in shapes):  # a shape (an empty tuple counts as one)
        return (shapes,)
    return tuple(leaf for part in shapes for leaf in _leaf_shapes(part))
