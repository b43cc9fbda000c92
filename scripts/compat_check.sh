#!/usr/bin/env bash
# The suite (differential tests aside) on versions other than the ones `make test` installs:
# the oldest ones pyproject.toml allows, and another Python.
#
#   bash scripts/compat_check.sh oldest            # numpy 1.26, pyarrow 16, gymnasium 1.2.2
#   bash scripts/compat_check.sh torch22           # torch 2.2 (with numpy 1.26, pyarrow 19)
#   bash scripts/compat_check.sh python PYTHON     # e.g. python3.10 or python3.13: latest deps
#
# Each builds a virtualenv of its own under .compat/ (git ignores it) and runs
# `pytest -m "not differential" tests` there. torch 2.2 comes from the package index with its
# CUDA libraries (about 3 GB); the other targets take whatever torch pip finds.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '.compat/' .gitignore || echo '.compat/' >> .gitignore

common=(dm-tree tqdm pytest hypothesis pytest-timeout)
target="${1:-}"
case "$target" in
oldest)
    venv=.compat/oldest python=python3
    deps=("numpy<2" pyarrow==16.0.0 gymnasium==1.2.2 torch "${common[@]}")
    ;;
torch22)
    venv=.compat/torch22 python=python3
    deps=("numpy<2" pyarrow==19.0.1 gymnasium torch==2.2.2 "${common[@]}")
    ;;
python)
    python="${2:?usage: $0 python PYTHON}"
    venv=".compat/$(basename "$python")"
    deps=(numpy pyarrow gymnasium torch "${common[@]}")
    ;;
*)
    echo "usage: $0 oldest|torch22|python PYTHON" >&2
    exit 2
    ;;
esac

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q "${deps[@]}"
fi
"$venv/bin/python" -c "import sys, numpy, pyarrow, gymnasium, torch; print(sys.version.split()[0], \
'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__, 'gymnasium', gymnasium.__version__, \
'torch', torch.__version__)"
HYPOTHESIS_PROFILE=ci PYTHONPATH="$PWD" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -o addopts="" --import-mode=importlib -m "not differential" tests
