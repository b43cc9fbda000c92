"""Policy outputs as numpy arrays on the host, whatever array type the policy returned."""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from episodes.buffer.plain_arrays import holds_masked, masked_words
from episodes.runner.policy import check_no_mapping, check_numpy_dtype
from episodes.structs import map_batch

__all__ = ["env_actions", "host_array", "host_outputs"]


def host_array(value: Any, what: str = "a policy output") -> np.ndarray:
    """A numpy array of ``value``; a torch tensor is detached and moved to the host first.

    A policy's outputs may carry its autograd graph: recorded, they are data. A float dtype
    numpy lacks comes as float32, which holds each of its values (a later step's bfloat16,
    the first step's being refused before ``env.step``), rounded into its column as a torch
    env's blocks round it; complex32 comes as complex64. A numpy masked array with masked
    entries (or a list holding one) is refused: the array would drop its mask, and the masked
    values would be recorded as data (one with none masked is the plain array it holds).

    A torch tensor is told by its class (torch being imported already), not by its ``detach``
    and ``cpu``: a TensorDict has both, and a mapping that is no dict is refused
    (:func:`~episodes.runner.policy.check_no_mapping`), as an output's leaf.

    Raises:
        ValueError: ``value`` holds a masked array with masked entries, naming ``what``.
        TypeError: ``value`` is a mapping that is no dict (a TensorDict), naming ``what``.

    Example:
        >>> import torch
        >>> host_array([1, 2]).tolist(), host_array(torch.tensor([0.5], dtype=torch.bfloat16))
        ([1, 2], array([0.5], dtype=float32))
        >>> try:
        ...     host_array(np.ma.masked_array([0, 1], mask=[0, 1]), "the policy's actions")
        ... except ValueError as err:
        ...     print(str(err)[:62])
        the policy's actions: a numpy masked array with masked entries
    """
    detach = getattr(value, "detach", None)
    if detach is not None and hasattr(value, "cpu") and _is_torch_tensor(value):
        value = detach().cpu()
        try:
            return np.asarray(value)
        except TypeError:  # a dtype numpy lacks: only here, off the per-step path
            if value.dtype.is_floating_point:
                return np.asarray(value.float())
            if value.dtype.is_complex:
                return np.asarray(value.cfloat())
            check_numpy_dtype(value)  # bit-packed or sub-byte dtypes: no numpy dtype holds them
            raise
    if value.__class__ is not np.ndarray:
        if detach is not None or isinstance(value, Mapping):  # numpy would read its keys, or
            check_no_mapping(value, what)  # a TensorDict as rows of nothing: refused
        if _may_hold_masked(value) and holds_masked([value]):
            raise _MaskedOutput(masked_words(what))  # np.asarray would drop its mask
    return np.asarray(value)


def _is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (a subclass too), without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


# Classes that are or may hold a masked array.
_SUSPECT = (np.ma.MaskedArray, dict, list, tuple)


def _may_hold_masked(value: Any) -> bool:
    """False for a list of items none of which is or holds a masked array (the usual list)."""
    if value.__class__ is not list:
        return True
    for kind in set(map(type, value)):  # a list of ints: one class, at C speed
        if issubclass(kind, _SUSPECT):
            return True
    return False


def host_outputs(actions: Any, extras: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A policy's actions and extra outputs with every leaf a host array (:func:`host_array`).

    Outputs that are numpy arrays already are taken as they are, at no cost; a refusal names
    the output (``the policy's actions``, ``the policy's extra output 'logp'``).

    Raises:
        ValueError: A leaf holds a masked array with masked entries, naming the output.
        TypeError: A leaf is a mapping that is no dict (a TensorDict), naming the output.

    Example:
        >>> actions, extras = host_outputs([1, 0], {"logp": np.zeros(2)})
        >>> actions.tolist(), extras["logp"].tolist()
        ([1, 0], [0.0, 0.0])
        >>> host_outputs(np.zeros(2), {"vf": np.ma.masked_array([1.0, 2.0], mask=[1, 0])})
        Traceback (most recent call last):
        ...
        ValueError: the policy's extra output 'vf': a numpy masked array with masked entries ...
    """
    try:  # the outputs' names are made only for a refusal: a step's torch outputs pay nothing
        if type(actions) is not np.ndarray:
            actions = map_batch(host_array, actions)
        extras = {
            key: value if type(value) is np.ndarray else map_batch(host_array, value)
            for key, value in extras.items()
        }
    except (_MaskedOutput, TypeError) as error:
        named = [("the policy's actions", actions)]
        named += [(f"the policy's extra output {key!r}", value) for key, value in extras.items()]
        if isinstance(error, TypeError):  # a mapping that is no dict, named; or torch's error
            for what, value in named:
                map_batch(functools.partial(check_no_mapping, who=what), value)
            raise
        what = next((what for what, value in named if holds_masked([value])), "a policy output")
        raise ValueError(masked_words(what)) from None
    return actions, extras


def env_actions(given: Any, host: Any) -> Any:
    """The actions a numpy env is handed: ``host`` where ``given`` holds a non-numpy array.

    A torch policy's actions reach a numpy env as the host arrays that were recorded
    (detached, on the CPU, bfloat16 as float32), as RLlib's connectors hand them: a tensor
    that requires grad cannot be read by numpy, and gymnasium's spaces refuse tensors (a
    Discrete's ``contains``) or pass them on into rewards. Other array-likes (a JAX array:
    anything with ``__array__`` that is no numpy value) go as the recorded arrays too, which
    are ``np.asarray`` of them: gymnasium's spaces refuse them as well. Anything else (numpy
    arrays, lists of numbers) goes to the env as the policy gave it.

    Example:
        >>> import torch
        >>> given = torch.tensor([0.5, 1.0], requires_grad=True)
        >>> env_actions(given, host_array(given)).tolist()
        [0.5, 1.0]
        >>> given = [0, 1]
        >>> env_actions(given, host_array(given)) is given
        True
    """
    return host if _holds_array_like(given) else given


def _holds_array_like(value: Any) -> bool:
    """Whether ``value`` is or holds a tensor or other non-numpy array-like (``__array__``).

    A list is judged by its first item: a policy's list of per-env actions holds one kind of
    item, and reading them all would cost a call per sub-env and step (96 us for 1,024 ints).
    """
    if value.__class__ is np.ndarray:
        return False
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        return True
    if isinstance(value, Mapping):
        return any(_holds_array_like(item) for item in value.values())
    if isinstance(value, tuple):
        return any(_holds_array_like(item) for item in value)
    if isinstance(value, list):
        return bool(value) and _holds_array_like(value[0])
    # A JAX array: numpy reads it, gymnasium's spaces do not (a Discrete's ``contains``).
    return hasattr(value, "__array__") and not isinstance(value, (np.ndarray, np.generic))


class _MaskedOutput(ValueError):
    """:func:`host_array`'s refusal, named by :func:`host_outputs` for the output holding it."""
