"""The CLI's lines reach a stdout whose encoding lacks some of their characters, escaped."""

import io
import sys

import pytest

from episodes.cli.errors import say


@pytest.mark.parametrize(
    "encoding,line,shown",
    [
        ("ascii", "env Tøy-v0", "env T\\xf8y-v0"),
        ("latin-1", "env Tøy-v0 ✓", "env Tøy-v0 \\u2713"),
        ("utf-8", "env Tøy-v0 ✓", "env Tøy-v0 ✓"),
    ],
)
def test_say_escapes_what_the_stream_cannot_encode(monkeypatch, encoding, line, shown):
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    say(line)
    stream.flush()
    assert raw.getvalue().decode(encoding) == shown + "\n"
