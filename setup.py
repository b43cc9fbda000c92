"""Build hook for the optional C accelerator; the project's metadata lives in pyproject.toml.

``optional=True``: where no C compiler is available the extension is skipped and the package
runs its pure-Python code paths (the reference behaviour the accelerator is tested against).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "episodes._speedups",
            sources=["episodes/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
