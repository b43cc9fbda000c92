"""The replay buffers' errors (both are ``ValueError`` subclasses)."""

from __future__ import annotations

__all__ = ["EmptyBufferError", "EvictedEpisodeError"]


class EmptyBufferError(ValueError):
    """Nothing to sample: an empty buffer, or no start that fits the asked sequence length."""


class EvictedEpisodeError(ValueError):
    """A chunk continues an episode that the buffer has already evicted."""
