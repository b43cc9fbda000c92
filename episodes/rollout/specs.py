"""What a :class:`RolloutStorage` allocates: field specs parsed into named ``[T, N, ...]`` leaves.

Every stored field becomes one or more leaves, each named by its path: ``"actions"``,
``"observations/policy"``, ``"observations/extra/ids"``, ``"distribution_params/0"``. The
storage allocates one contiguous tensor per name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import torch

from episodes.errors import too_big_to_allocate
from episodes.indexing import whole_number

__all__ = [
    "HiddenSpec",
    "Leaf",
    "ObsSpec",
    "Shape",
    "TRAINING_TYPES",
    "check_dtypes",
    "check_sizes",
    "distribution_leaves",
    "distribution_remedy",
    "allocation_of",
    "name_leaves",
    "normal_tensors",
    "hidden_tensors",
    "parse_hidden",
    "parse_observations",
]

#: A shape: a flat size (an int), a sequence of sizes or a ``torch.Size``; numpy ints count.
Shape: TypeAlias = int | np.integer[Any] | Sequence[int | np.integer[Any]] | torch.Size
#: A leaf: a shape (``float`` dtype of the storage), ``(shape, dtype)`` or an example
#: ``[N, ...]`` tensor; or a (nested) mapping of those.
ObsSpec: TypeAlias = Shape | tuple[Shape, torch.dtype] | torch.Tensor | Mapping[str, Any]
#: A hidden state spec: an example ``[num_layers, N, hidden]`` tensor or a
#: ``(num_layers, hidden)`` shape, or a tuple of those (LSTM ``(h, c)``).
HiddenSpec: TypeAlias = torch.Tensor | Sequence[Any] | None

TRAINING_TYPES = ("rl", "distillation")


def normal_tensors() -> AbstractContextManager[Any]:
    """A context whose new tensors are normal ones, also inside ``torch.inference_mode``.

    What a storage or buffer keeps across calls is made in it: an inference tensor would
    refuse a later in-place write outside inference mode, and a loss's ``backward()``.
    Grad mode stays off in it. Outside inference mode it does nothing.

    Example:
        >>> with torch.inference_mode(), normal_tensors():
        ...     torch.zeros(1).is_inference(), torch.is_grad_enabled()
        (False, False)
    """
    return _outside_inference() if torch.is_inference_mode_enabled() else nullcontext()


@contextmanager
def _outside_inference() -> Iterator[None]:
    with torch.inference_mode(False), torch.no_grad():  # inference_mode(False) enables grad
        yield


def hidden_pair(value: Any) -> tuple[Any, Any]:
    """``hidden_states`` as its ``(actor, critic)`` pair, else a ``ValueError``.

    A third part would be ignored by a ``zip``: it is refused instead.

    Example:
        >>> hidden_pair((None, None))
        (None, None)
    """
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        given = type(value).__name__
        if isinstance(value, (tuple, list)):
            given += f" of {len(value)}"
        raise ValueError(
            f"hidden_states is a pair (actor, critic), each a state or None; got {given}"
        )
    return value[0], value[1]


def check_dtypes(dtype: Any, actions_dtype: Any) -> None:
    """Refuse a storage's ``dtype`` unless a real float dtype, and ``actions_dtype`` unless a dtype.

    Raises:
        ValueError: ``dtype`` is not a real floating-point torch dtype (ints would truncate).
        TypeError: ``actions_dtype`` is neither a torch dtype nor None (a name, ``"int64"``).

    Example:
        >>> check_dtypes(torch.float32, torch.int64)
        >>> check_dtypes(torch.float32, "int64")
        Traceback (most recent call last):
        ...
        TypeError: actions_dtype must be a torch dtype or None, got 'int64'
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a real floating-point torch dtype, got {dtype!r}")
    if actions_dtype is not None and not isinstance(actions_dtype, torch.dtype):
        raise TypeError(f"actions_dtype must be a torch dtype or None, got {actions_dtype!r}")


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _as_shape(x: Any) -> tuple[int, ...] | None:
    if _is_int(x):
        return (int(x),)
    if isinstance(x, np.ndarray) and x.ndim == 1:  # a space's shape kept as an array
        x = x.tolist()
    if isinstance(x, Sequence) and not isinstance(x, (str, bytes)) and all(map(_is_int, x)):
        return tuple(int(i) for i in x)
    return None


def shape_of(shape: Any, label: str = "actions_shape") -> tuple[int, ...]:
    """A shape as a tuple of ints; an int is a flat shape (rsl_rl passes lists or tuples).

    Raises:
        TypeError: neither an int nor a sequence of ints (a float, a bool, a nested list,
            a string); the message names ``label``.
        ValueError: a negative size; the message names ``label``.

    Example:
        >>> shape_of(4), shape_of([2, 3])
        ((4,), (2, 3))
        >>> shape_of(2.0, "distribution_params[0]")
        Traceback (most recent call last):
        ...
        TypeError: distribution_params[0]: expected a shape (an int or a sequence of ints), got 2.0
    """
    parsed = _as_shape(shape)
    if parsed is None:
        raise TypeError(f"{label}: expected a shape (an int or a sequence of ints), got {shape!r}")
    return _sizes_checked(parsed, label)


def _sizes_checked(shape: tuple[int, ...], label: str) -> tuple[int, ...]:
    # torch would refuse a negative size only when allocating, naming no argument.
    if any(size < 0 for size in shape):
        raise ValueError(f"{label}: sizes must be >= 0, got {shape}")
    return shape


def distribution_leaves(
    shapes: Any, actions_shape: tuple[int, ...], dtype: torch.dtype
) -> tuple[Leaf, ...]:
    """One :class:`Leaf` per distribution parameter; ``None``: a Gaussian's mean and std.

    Raises:
        TypeError: ``shapes`` is not a tuple or list of shapes (:func:`shape_of`).

    Example:
        >>> distribution_leaves([3, (2, 2)], (3,), torch.float32)
        (Leaf(shape=(3,), dtype=torch.float32), Leaf(shape=(2, 2), dtype=torch.float32))
    """
    if shapes is None:
        shapes = (actions_shape, actions_shape)
    if not isinstance(shapes, (tuple, list)):
        raise TypeError(f"distribution_params: expected a sequence of shapes, got {shapes!r}")
    return tuple(
        Leaf(shape_of(s, f"distribution_params[{i}]"), dtype) for i, s in enumerate(shapes)
    )


@contextmanager
def distribution_remedy(storage: Any, name: str, value: Any, one_step: bool) -> Iterator[None]:
    """Says how to make ``storage`` when a write of its default distribution parameters fails.

    A storage made without ``distribution_params`` holds ``(actions_shape, actions_shape)``
    (a Gaussian's mean and std), where rsl_rl allocates them from the first transition. A
    ``ValueError`` raised inside for ``name == "distribution_params"`` whose count or per-env
    shapes (of ``[N, ...]`` tensors; ``[k, N, ...]`` blocks when not ``one_step``) differ from
    the stored ones is raised again with the ``distribution_params=`` that fits them. Any
    other error, and any error of a storage given its shapes, passes as it is.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
        >>> with distribution_remedy(st, "distribution_params", (torch.zeros(2, 5),), True):
        ...     raise ValueError("expected 2 tensors, got 1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: expected 2 tensors, got 1. ... RolloutStorage(..., distribution_params=[(5,)])
    """
    try:
        yield
    except ValueError as err:
        if name != "distribution_params" or not getattr(storage, "_default_params", False):
            raise
        tensors = [storage.tensors[n] for n in storage.field_names[name]]
        held = [tuple(t.shape[2:]) for t in tensors]
        skip, envs = (1 if one_step else 2), storage.num_envs
        many = isinstance(value, (tuple, list))
        # Tensors only: the remedy would not fit numpy arrays, which the storage refuses.
        shapes = (
            [v.shape if isinstance(v, torch.Tensor) else None for v in value] if many else [None]
        )
        if any(s is None or len(s) < skip or s[skip - 1] != envs for s in shapes):
            raise  # not tensors of N envs: nothing to say about the storage
        given = [tuple(s[skip:]) for s in shapes]  # type: ignore[index]
        if len(given) == len(held) and all(map(_same_but_ones, given, held)):
            raise  # they fit: refused for another reason
        raise ValueError(
            f"{err}. The storage was made with the default distribution_params, "
            f"(actions_shape, actions_shape) = {held} (a Gaussian's mean and std; rsl_rl "
            "allocates them from the first transition): for these, make it with "
            f"RolloutStorage(..., distribution_params={given})"
        ) from None


def _same_but_ones(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether two per-env shapes differ at most in trailing 1s, as a write takes them."""
    while a and a[-1] == 1:
        a = a[:-1]
    while b and b[-1] == 1:
        b = b[:-1]
    return a == b


def check_sizes(training_type: str, num_envs: int, num_transitions_per_env: int) -> None:
    """``ValueError`` for an unknown training type or a non-positive size.

    Example:
        >>> check_sizes("rl", 0, 24)
        Traceback (most recent call last):
        ...
        ValueError: num_envs must be an int >= 1, got 0
    """
    if training_type not in TRAINING_TYPES:
        raise ValueError(f"training_type must be one of {TRAINING_TYPES}, got {training_type!r}")
    whole_number(num_envs, "num_envs", 1)
    whole_number(num_transitions_per_env, "num_transitions_per_env", 1)


class Leaf(NamedTuple):
    """The per-env shape and the dtype of one stored tensor.

    Example:
        >>> leaf = parse_observations(torch.zeros(4, 3, dtype=torch.uint8), 4, torch.float32)
        >>> leaf.shape, leaf.dtype  # the env axis is dropped, the example's dtype kept
        ((3,), torch.uint8)
    """

    shape: tuple[int, ...]
    dtype: torch.dtype


def parse_observations(
    spec: Any, num_envs: int, dtype: torch.dtype, label: str = "observations"
) -> Any:
    """Turn an observation spec into a :class:`Leaf` or a (nested) dict of them.

    Args:
        spec: A shape (an int is a flat one, as for ``actions_shape``), ``(shape, dtype)``,
            an example ``[num_envs, ...]`` tensor, or a (nested) mapping of those with str
            keys.
        num_envs: ``N``, checked against example tensors.
        dtype: The dtype of leaves given as bare shapes.
        label: The argument's name, for the errors.

    Raises:
        ValueError: An example tensor is not ``[num_envs, ...]``.
        TypeError: A key that is not a str (a write's keys are matched as given, and ``1``
            and ``"1"`` would name one tensor), or something else that is not a spec; the
            message names ``label`` and the key's path.

    Example:
        >>> parse_observations({"x": (3,)}, 2, torch.float32)
        {'x': Leaf(shape=(3,), dtype=torch.float32)}
    """
    if isinstance(spec, torch.Tensor):
        if spec.dim() == 0 or spec.shape[0] != num_envs:
            raise ValueError(
                f"example tensors must be [num_envs={num_envs}, ...], got {tuple(spec.shape)}"
            )
        return Leaf(tuple(spec.shape[1:]), spec.dtype)
    if isinstance(spec, Mapping):
        out = {}
        for k, v in spec.items():
            if not isinstance(k, str):
                raise TypeError(f"{label}: keys must be str, got {k!r} ({type(k).__name__})")
            out[k] = parse_observations(v, num_envs, dtype, f"{label}[{k!r}]")
        return out
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], torch.dtype):
        return Leaf(shape_of(spec[0], label), spec[1])
    shape = _as_shape(spec)
    if shape is None:
        raise TypeError(
            f"{label}: expected a shape, (shape, torch dtype), an example tensor or a mapping "
            f"of those, got {spec!r}"
        )
    return Leaf(_sizes_checked(shape, label), dtype)


def _field_specs(
    training_type: str,
    num_envs: int,
    actions_shape: tuple[int, ...],
    observations: Any,
    privileged_observations: Any,
    distribution_params: Any,
    dtype: torch.dtype,
    actions_dtype: torch.dtype | None,
) -> dict[str, Any]:
    """A storage's public field -> its leaf spec (a :class:`Leaf`, a dict of them, or a tuple)."""
    n = num_envs
    scalar = Leaf((1,), dtype)
    action = Leaf(actions_shape, actions_dtype or dtype)
    specs: dict[str, Any] = {"observations": parse_observations(observations, n, dtype)}
    if privileged_observations is not None:
        specs["privileged_observations"] = parse_observations(
            privileged_observations, n, dtype, "privileged_observations"
        )
    specs.update(actions=action, rewards=scalar, dones=Leaf((1,), torch.bool))
    if training_type == "rl":
        # One tensor per scalar: compute_returns writes whole columns (strided writes cost
        # several contiguous passes), and a 1-wide tensor gathers through a 1-D view.
        for name in ("values", "actions_log_prob", "returns", "advantages"):
            specs[name] = scalar
        specs["distribution_params"] = distribution_leaves(
            distribution_params, actions_shape, dtype
        )
    else:
        specs["privileged_actions"] = action
    return specs


def parse_hidden(
    spec: HiddenSpec,
    num_envs: int,
    dtype: torch.dtype = torch.float32,
    label: str = "hidden state",
    *,
    written: bool = False,
) -> list[Leaf] | None:
    """One ``Leaf((num_layers, hidden), dtype)`` per recurrent state component.

    A tensor gives its own dtype; a ``(num_layers, hidden)`` shape (ints, numpy's too, or a
    1-D array) takes ``dtype``; a tuple or list of those is one component each (an LSTM's
    ``(h, c)``). ``written``: the components of a state being written (a transition's), which
    must be tensors: a numpy array or a shape there is refused as a write refuses it.

    Raises:
        TypeError: A component that is neither (with ``written``, that is no tensor); the
            message names ``label`` and the component's type (an array's shape, never its
            contents).
        ValueError: A negative size, or a tensor that is not ``[num_layers, num_envs, hidden]``.

    Example:
        >>> parse_hidden((1, 8), 4)
        [Leaf(shape=(1, 8), dtype=torch.float32)]
        >>> parse_hidden(((1, 8), (1, 8)), 4)  # an LSTM's h and c
        [Leaf(shape=(1, 8), dtype=torch.float32), Leaf(shape=(1, 8), dtype=torch.float32)]
        >>> parse_hidden((np.zeros((1, 4, 8)),), 4, label="actor hidden state", written=True)
        Traceback (most recent call last):
        ...
        TypeError: actor hidden state: expected a torch.Tensor, got ndarray
    """
    if spec is None:
        return None
    if isinstance(spec, torch.Tensor) or (not written and _is_pair(spec)):
        comps = [spec]
    elif isinstance(spec, (tuple, list, np.ndarray)):
        comps = list(spec)
    else:
        raise TypeError(
            f"{label}: expected a (num_layers, hidden) shape, a [num_layers, num_envs, hidden] "
            f"tensor or a tuple of those, got {_described(spec)}"
        )
    out = []
    for c in comps:
        if isinstance(c, torch.Tensor):
            if c.dim() != 3 or c.shape[1] != num_envs:
                raise ValueError(
                    f"hidden states must be [num_layers, {num_envs}, hidden], got {tuple(c.shape)}"
                )
            out.append(Leaf((c.shape[0], c.shape[2]), c.dtype))
        elif written:  # the words of a write into a storage that holds its states already
            raise TypeError(f"{label}: expected a torch.Tensor, got {type(c).__name__}")
        elif _is_pair(c):
            out.append(Leaf(_sizes_checked(_as_shape(c) or (), label), dtype))
        else:
            raise TypeError(
                f"{label}: cannot interpret hidden-state spec {_described(c)}: expected a "
                "(num_layers, hidden) shape or a [num_layers, num_envs, hidden] tensor"
            )
    return out


def _described(value: Any) -> str:
    """``repr(value)``, but an array's type and shape only: its contents may be huge."""
    if isinstance(value, np.ndarray) and value.ndim > 1:
        return f"a numpy array of shape {value.shape}"
    return repr(value)


def hidden_tensors(
    spec: HiddenSpec,
    size: tuple[int, int],
    dtype: torch.dtype,
    device: torch.device,
    label: str,
    zeroed: bool = True,
    *,
    written: bool = False,
) -> list[torch.Tensor] | None:
    """Zeroed ``[T, num_layers, N, hidden]`` tensors for ``spec`` (see :func:`parse_hidden`).

    ``zeroed=False`` leaves their memory unfilled, for a caller that writes every element;
    ``written``: ``spec`` is a state being written (:func:`parse_hidden`).

    Example:
        >>> [t.shape for t in hidden_tensors((1, 8), (3, 4), torch.float32, "cpu", "h")]
        [torch.Size([3, 1, 4, 8])]
    """
    num_steps, num_envs = size
    leaves = parse_hidden(spec, num_envs, dtype, label, written=written)
    if leaves is None:
        return None
    make = torch.zeros if zeroed else torch.empty
    with normal_tensors():  # kept by the storage: normal tensors, inside inference mode too
        return [
            make(num_steps, layers, num_envs, hidden, dtype=leaf.dtype, device=device)
            for leaf in leaves
            for layers, hidden in [leaf.shape]
        ]


def _is_pair(x: Any) -> bool:
    shape = None if isinstance(x, torch.Tensor) else _as_shape(x)
    return shape is not None and len(shape) == 2 and not _is_int(x)


def name_leaves(prefix: str, tree: Any, out: dict[str, Leaf]) -> Any:
    """Name every leaf of ``tree`` by its path under ``prefix``, recording it in ``out``.

    Mappings nest by key and tuples by position. Returns the tree with each leaf replaced by
    its name, which is how the storage later finds a field's tensors.

    Raises:
        ValueError: Two leaves get the same name (a key containing ``"/"`` that collides with
            a nested key).

    Example:
        >>> names = {}
        >>> name_leaves("obs", {"a": Leaf((2,), torch.int64)}, names)
        {'a': 'obs/a'}
        >>> list(names)
        ['obs/a']
    """
    if isinstance(tree, Mapping):
        return {k: name_leaves(f"{prefix}/{k}", v, out) for k, v in tree.items()}
    if isinstance(tree, tuple) and not isinstance(tree, Leaf):
        return tuple(name_leaves(f"{prefix}/{i}", v, out) for i, v in enumerate(tree))
    if prefix in out:
        raise ValueError(f"two stored fields would share the name {prefix!r}; rename a key")
    out[prefix] = tree
    return prefix


@contextmanager
def allocation_of(sizes: str) -> Iterator[None]:
    """Turns torch's errors for tensors too big to make into a ``ValueError`` naming ``sizes``.

    torch reports them as a ``TypeError`` (a size beyond int64), a ``RuntimeError`` (a total
    that overflows, or memory that cannot be had), naming no argument.

    Example:
        >>> with allocation_of("num_envs=2**70"):
        ...     torch.zeros(2**70)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: num_envs=2**70: too large to allocate (TypeError: ...
    """
    try:
        yield
    except (MemoryError, OverflowError, RuntimeError, TypeError) as err:
        if not too_big_to_allocate(err):
            raise
        first = str(err).splitlines()[0] if str(err) else ""
        raise ValueError(f"{sizes}: too large to allocate ({type(err).__name__}: {first})") from err
