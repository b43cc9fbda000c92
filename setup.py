"""Build hook for the optional C accelerator; the project's metadata lives in pyproject.toml.

``optional=True``: where no C compiler is available the extension is skipped and the package
runs its pure-Python code paths (the reference behaviour the accelerator is tested against).
"""

import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "episodes._speedups",
            sources=sorted(glob.glob("episodes/_csrc/*.c")),
            depends=sorted(glob.glob("episodes/_csrc/*.h")),
            optional=True,
            # Only the module's init function is exported: the shared state stays private.
            extra_compile_args=["-O2", "-fvisibility=hidden"],
        )
    ]
)
