"""Every connector contract at once, on episodes hypothesis draws.

:func:`check_connector` runs the five contracts of :mod:`episodes.testing.contracts` on drawn
episodes; :class:`ConnectorContract` is the same as a pytest mixin, one test per contract.

Example:
    >>> import gymnasium as gym
    >>> def count_steps(episodes, batch):
    ...     return {**batch, "steps": [len(ep) for ep in episodes]}
    >>> check_connector(count_steps, observation_space=gym.spaces.Discrete(3), max_examples=5)
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from episodes.connectors import Float32RangeError
from episodes.episode import SingleAgentEpisode
from episodes.testing.contracts import (
    Connector,
    ConnectorContractError,
    _check_row_keys,
    _check_unchanged_and_deterministic,
    check_deterministic,
    check_does_not_mutate,
    check_handles_empty_and_reset,
    check_list_numpy_agree,
    check_lookback_across_cuts,
)
from episodes.testing.strategies import episodes
from episodes.testing.strategies.episodes import _check_space_like, resolve_space
from episodes.testing.strategies.spaces import whole

__all__ = ["CONTRACTS", "ConnectorContract", "check_connector"]

#: The contracts' names, as ``check_connector(skip=...)`` takes them (each is ``check_<name>``
#: of :mod:`episodes.testing.contracts`, and ``test_<name>`` of :class:`ConnectorContract`).
CONTRACTS = (
    "does_not_mutate",
    "handles_empty_and_reset",
    "lookback_across_cuts",
    "deterministic",
    "list_numpy_agree",
)


@st.composite
def _example_ids(draw: st.DrawFn) -> st.SearchStrategy[str]:
    """Ids fresh to each example, two of them per example (a batch may hold both, or one twice).

    A connector keeping state per episode id (a memo of the ids it has seen) sees each
    example's ids for the first time, as it would a new episode's; drawn, so hypothesis
    replays the same ids.
    """
    base = draw(st.integers(0, 2**32 - 1), label="episode ids")
    return st.sampled_from((f"ep-{base}-0", f"ep-{base}-1"))


def _episode_kwargs(
    observation_space: Any, action_space: Any, max_len: int, **extra: Any
) -> dict[str, Any]:
    kwargs = {"observation_space": observation_space, "action_space": action_space}
    return {**kwargs, "max_len": max_len, **extra}


def _check_skip(skip: Any) -> frozenset[str]:
    """The contract names in ``skip``, checked before any contract runs."""
    if isinstance(skip, (str, bytes)) or not isinstance(skip, Collection):
        raise TypeError(
            f"skip is a collection of contract names such as ['lookback_across_cuts'], got {skip!r}"
        )
    unknown = [name for name in skip if name not in CONTRACTS]
    if unknown:
        raise ValueError(f"skip names unknown contracts {unknown!r}; the contracts: {CONTRACTS}")
    return frozenset(skip)


def _check_settings(observation_space: Any, action_space: Any, lookback: Any, max_len: Any) -> None:
    """Refuses bad settings before any contract runs (not halfway, inside hypothesis)."""
    _check_space_like(observation_space, "observation_space")
    _check_space_like(action_space, "action_space")
    for name, value in (("lookback", lookback), ("max_len", max_len)):
        if not (whole(value) and value >= 0):
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")


@contextlib.contextmanager
def _refusal_taken() -> Iterator[None]:
    """A :class:`~episodes.connectors.Float32RangeError` passes the example it ends.

    The connector refused, as documented, values its float32 columns cannot hold (an
    unbounded float64 Box draws up to 1.8e308): its answer to that draw, not a broken
    contract, and nothing to compare. Passed, not rejected: such draws are common, and
    rejecting them would trip hypothesis's filter health check.
    """
    try:
        yield
    except Float32RangeError:
        pass


def _own_spaces(draw: st.DrawFn, kwargs: dict[str, Any]) -> dict[str, Any]:
    # Deep copies: a connector changing an episode's space in place must neither change the
    # caller's space nor hide from the later contracts, which would copy the changed one.
    spaces = {
        name: copy.deepcopy(resolve_space(draw, kwargs[name]))
        for name in ("observation_space", "action_space")
    }
    return {**kwargs, **spaces}


@st.composite
def _batches(draw: st.DrawFn, kwargs: dict[str, Any]) -> list[SingleAgentEpisode]:
    """Up to three episodes of one observation and one action space, as in a real batch."""
    ids = draw(_example_ids())
    return draw(st.lists(episodes(**_own_spaces(draw, kwargs), id_=ids), max_size=3))


@st.composite
def _one_episode(draw: st.DrawFn, kwargs: dict[str, Any]) -> SingleAgentEpisode:
    """One episode on spaces of its own (see :func:`_own_spaces`)."""
    return draw(episodes(**_own_spaces(draw, kwargs), id_=draw(_example_ids())))


def check_connector(
    connector: Connector,
    *,
    observation_space: Any = None,
    action_space: Any = None,
    lookback: int = 3,
    max_len: int = 6,
    max_examples: int = 25,
    row_keys: Collection[str] | None = None,
    extra_model_outputs: Mapping[str, Any] | None = None,
    skip: Collection[str] = (),
) -> None:
    """Runs every contract on episodes drawn by hypothesis (spaces, strategies or None).

    Args:
        connector: The connector under test.
        observation_space: A space, a strategy of spaces, or None (any small batchable space).
        action_space: The same for actions.
        lookback: Steps the connector reads into the past; chunks are cut with this lookback.
        max_len: Longest drawn episode.
        max_examples: Hypothesis examples per contract.
        row_keys: See :func:`check_lookback_across_cuts`.
        extra_model_outputs: Dict of key -> space of one value that every drawn episode
            records (as a runner's episodes all record the same ones, e.g. ``vf_preds``), as
            :func:`~episodes.testing.strategies.episodes` takes it; None draws a subset of
            its defaults per episode, ``{}`` none.
        skip: Names of contracts to leave out (from :data:`CONTRACTS`); the default runs all.
            A connector reading future steps (returns-to-go, GAE value targets) skips
            ``"lookback_across_cuts"``: a chunk cannot see the steps after it.

    Episodes are drawn on deep copies of the spaces: the connector never gets your space
    objects, so no contract can change them. A connector raising
    :class:`~episodes.connectors.Float32RangeError` (the shipped float32 columns refuse a
    float64 Box's values beyond float32's range so) passes that example: a documented refusal.
    Each example draws episode ids of its own, and the first call on each batch is the one
    judged for changes to its episodes and the first of the two compared for determinism, so
    a connector acting otherwise on its first sight of an episode id is seen doing it.

    Raises:
        ConnectorContractError: A contract failed (hypothesis reports the minimal example of
            the first failure it found: a connector breaking two contracts raises one
            ``ConnectorContractError``, not an ``ExceptionGroup`` of both). So does a connector
            keeping state that breaks a contract on one call but not on hypothesis's replay
            (not hypothesis's ``FlakyFailure``); the message says it behaved differently.
        TypeError: ``row_keys`` is not a collection of str (see
            :func:`check_lookback_across_cuts`), ``skip`` not a collection of names (one str
            is refused), or a space is neither a space, a strategy nor None.
        ValueError: ``lookback`` or ``max_len`` is not an int >= 0, ``max_examples`` not an
            int >= 1, or ``skip`` names a contract not in :data:`CONTRACTS` (all checked
            before any contract runs).

    Example:
        >>> check_connector(lambda eps, batch: dict(batch), max_examples=3)
        >>> check_connector(lambda eps, batch: dict(batch), max_examples=3,
        ...                 skip=["lookback_across_cuts"])
    """
    skipped = _check_skip(skip)
    _check_row_keys(row_keys)
    _check_settings(observation_space, action_space, lookback, max_len)
    if not (whole(max_examples) and max_examples >= 1):
        raise ValueError(f"max_examples must be an int >= 1, got {max_examples!r}")
    kwargs = _episode_kwargs(
        observation_space, action_space, max_len, extra_model_outputs=extra_model_outputs
    )
    episodes(**kwargs)  # built once: it refuses bad extra_model_outputs here, not mid-run
    # int(): hypothesis refuses numpy integers, which the check above accepts. One failure,
    # not a group of all it found: callers catch ConnectorContractError, as documented.
    run = settings(
        max_examples=int(max_examples), deadline=None, database=None, report_multiple_bugs=False
    )

    @run
    @given(_batches(kwargs))
    def mutate_and_determinism(eps: list[SingleAgentEpisode]) -> None:
        with _refusal_taken():
            # Both on one first call with these (fresh) ids: a connector acting otherwise on its
            # first sight of an episode id shows it on that call alone.
            if "does_not_mutate" in skipped:
                check_deterministic(connector, eps)
            elif "deterministic" in skipped:
                check_does_not_mutate(connector, eps)
            else:
                _check_unchanged_and_deterministic(connector, eps)

    @run
    @given(_batches({**kwargs, "numpy": False}))
    def list_numpy(eps: list[SingleAgentEpisode]) -> None:
        with _refusal_taken():
            check_list_numpy_agree(connector, eps)  # skips what has no numpy mode

    @run
    @given(_one_episode(kwargs), st.data())
    def cuts(ep: SingleAgentEpisode, data: st.DataObject) -> None:
        start = data.draw(st.integers(0, len(ep)), label="start")
        stop = data.draw(st.integers(start, len(ep)), label="stop")
        with _refusal_taken():
            check_lookback_across_cuts(connector, ep, start, stop, lookback, row_keys=row_keys)

    @run
    @given(_one_episode({**kwargs, "max_len": 0}))
    def empty(ep: SingleAgentEpisode) -> None:
        with _refusal_taken():
            check_handles_empty_and_reset(connector, ep.observation_space, ep.action_space)

    tests = [
        (empty, ("handles_empty_and_reset",)),
        (mutate_and_determinism, ("deterministic", "does_not_mutate")),
        (list_numpy, ("list_numpy_agree",)),
        (cuts, ("lookback_across_cuts",)),
    ]
    for test, names in tests:
        if skipped.issuperset(names):
            continue
        try:
            test()
        except Flaky as err:
            _raise_contract_error(err)
            raise


def _first_contract_error(err: BaseException) -> ConnectorContractError | None:
    """The first ``ConnectorContractError`` in ``err`` or the exception groups it nests."""
    if isinstance(err, ConnectorContractError):
        return err
    for inner in getattr(err, "exceptions", ()):  # an ExceptionGroup (3.10: exceptiongroup's)
        found = _first_contract_error(inner)
        if found is not None:
            return found
    return None


def _raise_contract_error(flaky: BaseException) -> None:
    """Raises hypothesis's flaky failure of a contract as the one documented error.

    A connector keeping state between calls (caching, memoising, acting on the first sight of
    an episode id) can break a contract once and keep it when hypothesis replays the failing
    example: hypothesis then raises ``FlakyFailure``, an ``ExceptionGroup``, which
    ``pytest.raises(ConnectorContractError)`` would not catch.
    """
    found = _first_contract_error(flaky)
    if found is not None:
        # Chained: the flaky failure's notes show the example hypothesis drew.
        raise ConnectorContractError(
            f"{found}\n(the connector behaved differently when hypothesis replayed this "
            "example: it keeps state between calls, e.g. a cache, a memo or a record of the "
            "episodes it has seen)"
        ) from flaky


class ConnectorContract:
    """A pytest mixin with one test per connector contract.

    Subclass it in a ``Test*`` class and implement :meth:`make_connector`; optionally set
    ``observation_space``, ``action_space`` (spaces or strategies; None draws any small
    space), ``lookback`` (steps the connector reads into the past), ``row_keys`` (see
    :func:`check_lookback_across_cuts`), ``max_len`` and ``extra_model_outputs`` (see
    :func:`check_connector`).
    Hypothesis settings come from your active profile. A ``test_<contract>`` the subclass (or
    a class between it and the mixin) sets itself wins, as in any subclass: a method replaces
    the mixin's test, and ``None`` drops it (pytest's way to leave an inherited test out).

    Example:
        >>> import gymnasium as gym
        >>> class TestMyConnector(ConnectorContract):
        ...     observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
        ...     def make_connector(self):
        ...         return lambda episodes, batch: {**batch, "n": len(episodes)}

        pytest collects the ``test_*`` methods; each also runs on its own (hypothesis draws):

        >>> check = settings(max_examples=5, database=None)(TestMyConnector.test_deterministic)
        >>> check(TestMyConnector())
    """

    observation_space: Any = None
    action_space: Any = None
    lookback: int = 3
    max_len: int = 6
    row_keys: Collection[str] | None = None
    extra_model_outputs: Mapping[str, Any] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_row_keys(cls.row_keys)  # at the class, not in one of its tests
        # Each subclass gets its own hypothesis-wrapped copy of every contract test: sharing one
        # wrapped function between classes trips hypothesis' differing-executors health check.
        for name in _CONTRACT_TESTS:
            if _overridden(cls, name):  # a subclass's own version wins, as in any subclass
                continue
            copy = given(data=st.data())(_fresh_test(getattr(ConnectorContract, name)))
            copy._contract_copy = True  # type: ignore[attr-defined]
            setattr(cls, name, copy)

    def make_connector(self) -> Connector:
        """Returns a fresh connector under test.

        Example:
            >>> ConnectorContract().make_connector()
            Traceback (most recent call last):
            NotImplementedError: ConnectorContract subclasses must implement make_connector()
        """
        raise NotImplementedError("ConnectorContract subclasses must implement make_connector()")

    def _kwargs(self, **extra: Any) -> dict[str, Any]:
        _check_settings(self.observation_space, self.action_space, self.lookback, self.max_len)
        extra = {"max_len": self.max_len, "extra_model_outputs": self.extra_model_outputs, **extra}
        return _episode_kwargs(self.observation_space, self.action_space, **extra)

    def test_does_not_mutate(self, data: st.DataObject) -> None:
        """The connector leaves its input episodes unchanged."""
        eps = data.draw(_batches(self._kwargs()), label="episodes")
        check_does_not_mutate(self.make_connector(), eps)

    def test_handles_empty_and_reset(self, data: st.DataObject) -> None:
        """The connector accepts no episodes and just-reset episodes."""
        ep = data.draw(_one_episode(self._kwargs(max_len=0)), label="episode")
        check_handles_empty_and_reset(self.make_connector(), ep.observation_space, ep.action_space)

    def test_lookback_across_cuts(self, data: st.DataObject) -> None:
        """A chunk with enough lookback gives the un-cut episode's rows."""
        ep = data.draw(_one_episode(self._kwargs()), label="episode")
        start = data.draw(st.integers(0, len(ep)), label="start")
        stop = data.draw(st.integers(start, len(ep)), label="stop")
        check_lookback_across_cuts(
            self.make_connector(), ep, start, stop, self.lookback, row_keys=self.row_keys
        )

    def test_deterministic(self, data: st.DataObject) -> None:
        """Equal inputs give equal outputs."""
        eps = data.draw(_batches(self._kwargs()), label="episodes")
        check_deterministic(self.make_connector(), eps)

    def test_list_numpy_agree(self, data: st.DataObject) -> None:
        """List and numpy episodes give the same output."""
        eps = data.draw(_batches(self._kwargs(numpy=False)), label="episodes")
        check_list_numpy_agree(self.make_connector(), eps)  # skips what has no numpy mode


_CONTRACT_TESTS = (
    "test_does_not_mutate",
    "test_handles_empty_and_reset",
    "test_lookback_across_cuts",
    "test_deterministic",
    "test_list_numpy_agree",
)


def _fresh_test(body: Callable[[Any, st.DataObject], None]) -> Callable[[Any, st.DataObject], None]:
    def test(self: Any, data: st.DataObject) -> None:
        with _refusal_taken():
            body(self, data)

    test.__name__ = test.__qualname__ = body.__name__
    test.__doc__ = body.__doc__
    return test


def _overridden(cls: type, name: str) -> bool:
    """Whether a class between ``cls`` and ConnectorContract defines its own ``name``.

    Whatever it sets counts, ``None`` included (that drops the test), but not a copy of the
    mixin's test that :meth:`ConnectorContract.__init_subclass__` gave a parent class.
    """
    for klass in cls.__mro__:
        if klass is ConnectorContract:
            return False
        if name in klass.__dict__ and not getattr(klass.__dict__[name], "_contract_copy", False):
            return True
    return False
