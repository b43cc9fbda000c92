"""What a replay buffer's ``sample`` says of a keyword it does not take.

Code ported from TorchRL or RLlib keeps its keyword names (``sample(batch_size=32)``,
``sample(return_info=True)``, ``sample(n_steps=3)``), and Python's own answer, "got an
unexpected keyword argument", says neither what the keyword is called here nor whether it has
a counterpart. :func:`explains_sample_keywords` wraps ``EpisodeReplayBuffer.sample`` so that
such a keyword is a ``TypeError`` naming it and saying what to write instead
(:data:`SAMPLE_KEYWORDS`), or, for a name the table does not list, the nearest keyword taken
or the list of those taken. It is raised before anything is drawn: the buffer and its
generator are left as they were. The prioritized buffer, whose ``sample`` passes its other
keywords on, refuses through :func:`refuse_sample_keywords` with the same words.

Example:
    >>> from episodes.replay import EpisodeReplayBuffer
    >>> try:
    ...     EpisodeReplayBuffer(10).sample(batch_size=32)
    ... except TypeError as err:
    ...     print(err)  # doctest: +ELLIPSIS
    EpisodeReplayBuffer.sample() takes no keyword argument 'batch_size': the batch size is ...
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

__all__ = ["SAMPLE_KEYWORDS", "explains_sample_keywords", "refuse_sample_keywords", "taken_by"]

_BATCH = "the batch size is num_items, by position (sample(32)) or as batch_size_B=32"
_LENGTH = (
    "the sequence length is batch_length_T= (sample(B, batch_length_T=T) gives [B, T, ...] columns)"
)

# A keyword other libraries' sample() takes (TorchRL, RLlib's old and new stacks) -> ours.
SAMPLE_KEYWORDS: dict[str, str] = {
    "batch_size": _BATCH,
    "num_samples": _BATCH,
    "return_info": (
        "there is no separate info: the batch itself carries the items' indices "
        "(batch['indices'], what update_priorities takes) and, in transition and prioritized "
        "batches, their importance weights (batch['weights'])"
    ),
    "beta": (
        "beta, the importance-weight exponent, is PrioritizedEpisodeReplayBuffer.sample's; "
        "a uniform buffer draws without priorities (its transitions' weights are 1)"
    ),
    "batch_size_T": _LENGTH,
    "seq_len": _LENGTH,
    "n_steps": "the steps of each return are n_step= (an int, or (lo, hi) drawn per item)",
    "discount": "the discount of the n-step returns is gamma=",
    "to_numpy": "batches and sampled episodes are numpy already (device= gives torch tensors)",
    "min_batch_length_T": (
        "sampled chunks and sequences always have batch_length_T steps (pad=True lets a "
        "sequence run past its episode's end)"
    ),
}

P = ParamSpec("P")
R = TypeVar("R")


def taken_by(function: Callable[..., object]) -> list[str]:
    """The keywords ``function`` takes by name, in order (a method's ``self`` left out).

    Example:
        >>> def sample(self, num_items=None, *, beta=0.0): ...
        >>> taken_by(sample)
        ['num_items', 'beta']
    """
    return [
        p.name
        for i, p in enumerate(inspect.signature(function).parameters.values())
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not (i == 0 and p.name == "self")
    ]


def refuse_sample_keywords(owner: str, keys: Iterable[str], taken: Iterable[str]) -> None:
    """Raises the ``TypeError`` for ``owner.sample()`` given the keywords ``keys``, if any.

    Each is named with what to write instead: its entry in :data:`SAMPLE_KEYWORDS`, else the
    nearest of ``taken`` (a misspelling), else the list of ``taken``.

    Example:
        >>> refuse_sample_keywords("Buf", [], ["num_items"])  # nothing to refuse
        >>> refuse_sample_keywords("Buf", ["n_steps"], ["n_step"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: Buf.sample() takes no keyword argument 'n_steps': the steps of each return ...
        >>> refuse_sample_keywords("Buf", ["num_item"], ["num_items", "n_step"])
        Traceback (most recent call last):
        ...
        TypeError: Buf.sample() takes no keyword argument 'num_item': did you mean 'num_items'?
    """
    keys, taken = list(keys), list(taken)
    if not keys:
        return
    words = []
    for key in keys:
        hint = SAMPLE_KEYWORDS.get(key)
        if hint is None:
            near = difflib.get_close_matches(key, taken, n=1)
            hint = f"did you mean {near[0]!r}?" if near else "it takes " + ", ".join(taken)
        words.append(f"{owner}.sample() takes no keyword argument {key!r}: {hint}")
    raise TypeError("; ".join(words))


def explains_sample_keywords(sample: Callable[P, R]) -> Callable[P, R]:
    """``sample`` (a buffer's method), refusing a keyword it does not take with our name for it.

    The refusal (:func:`refuse_sample_keywords`) comes before ``sample`` runs; every call
    ``sample`` takes goes to it as it came, and ``inspect`` and type checkers see its own
    signature.

    Example:
        >>> class Buf:
        ...     @explains_sample_keywords
        ...     def sample(self, num_items=None, *, n_step=1):
        ...         return num_items, n_step
        >>> Buf().sample(4, n_step=3), str(inspect.signature(Buf.sample))
        ((4, 3), '(self, num_items=None, *, n_step=1)')
        >>> Buf().sample(4, seq_len=8)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: Buf.sample() takes no keyword argument 'seq_len': the sequence length is ...
    """
    taken = taken_by(sample)
    known = frozenset(taken)

    @functools.wraps(sample)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if not known.issuperset(kwargs):
            odd = [key for key in kwargs if key not in known]
            refuse_sample_keywords(type(args[0]).__name__, odd, taken)
        return sample(*args, **kwargs)

    return checked
