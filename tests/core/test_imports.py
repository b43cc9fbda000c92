"""Public imports and the layering rule that `import episodes` does not pull in torch."""

from __future__ import annotations

import subprocess
import sys


def test_public_names():
    from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

    assert SingleAgentEpisode.__name__ == "SingleAgentEpisode"
    assert InfiniteLookbackBuffer.__name__ == "InfiniteLookbackBuffer"


def test_import_episodes_does_not_import_torch():
    code = (
        "import sys, episodes, episodes.spaces, episodes.indexing\n"
        "heavy = ('torch', 'hypothesis', 'matplotlib', 'pyarrow', 'ray')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import episodes pulled in: {out.stdout.strip()}"


def test_py_typed_is_shipped():
    from importlib import resources

    assert resources.files("episodes").joinpath("py.typed").is_file()
