#!/usr/bin/env bash
# Creates .venv-ref: the reference implementations (RLlib 2.60, rsl_rl 5.5.1) that the
# differential tests and benchmarks compare against. They pin their own gymnasium, so they live
# apart from the project's .venv. Our package is installed into it without dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${REF_VENV:-.venv-ref}
# Done already, unless this script changed since (make's rule runs it then).
if [ -f "$VENV/.installed" ] && [ "$VENV/.installed" -nt scripts/make_ref_venv.sh ]; then exit 0; fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch first, so nothing pulls a multi-GB CUDA build.
"$VENV/bin/python" -m pip install -q torch==2.13.0
"$VENV/bin/python" -m pip install -q "ray[rllib]==2.60.0" "rsl-rl-lib==5.5.1" pytest hypothesis
# TorchRL for bench_replay.py: without its dependencies, so it keeps the torch above.
"$VENV/bin/python" -m pip install -q --no-deps torchrl==0.14.1 tensordict==0.15.3
"$VENV/bin/python" -m pip install -q --no-deps -e .
touch "$VENV/.installed"
