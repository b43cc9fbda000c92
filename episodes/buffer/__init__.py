from episodes.buffer.lookback_buffer import InfiniteLookbackBuffer

__all__ = ["InfiniteLookbackBuffer"]
