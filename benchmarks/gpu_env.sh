#!/usr/bin/env bash
# Run a Python script under the interpreter `make gpu-check` measures with, chosen in this order:
#
# 1. python3 whose torch sees a CUDA device (a GPU machine's own image, e.g. a CUDA torch of
#    another version than the pin): used as it is. The project's requirements it lacks (the
#    bag reader and its parts; rclpy is never needed here) go into .gpu-site, installed from
#    ./.whl when that folder holds wheels (`make gpu-wheels`, for a machine with no registry),
#    else from the registry.
# 2. A machine with an NVIDIA driver whose python3 has no CUDA torch: .venv-gpu with the pinned
#    torch from PyPI (on Linux that wheel is the CUDA build) and the requirements.
# 3. No CUDA at all: the project's .venv (`make venv`); the check then runs as a dry run.
#
#     bash benchmarks/gpu_env.sh benchmarks/gpu_check.py [ARGS ...]
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_PIN=2.13.0
# Imported by the check besides torch; each one's pip name after the colon.
NEEDS="numpy:numpy scipy:scipy yaml:pyyaml matplotlib:matplotlib pytest:pytest<9 rosbags:rosbags"

cuda_python() {
    "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
}

if command -v python3 >/dev/null && cuda_python python3; then
    PY=python3
    SITE="$PWD/.gpu-site"
    missing=()
    for pair in $NEEDS; do
        module=${pair%%:*}
        PYTHONPATH="$SITE" $PY -c "import $module" 2>/dev/null || missing+=("${pair#*:}")
    done
    if ((${#missing[@]})); then
        echo "gpu_env: installing into .gpu-site: ${missing[*]}" >&2
        if compgen -G ".whl/*.whl" >/dev/null; then
            $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
                --target "$SITE" .whl/*.whl >&2
        else
            $PY -m pip install -q --target "$SITE" "${missing[@]}" >&2
        fi
    fi
    for pair in $NEEDS; do  # what the install could not bring is said now, not mid-check
        module=${pair%%:*}
        PYTHONPATH="$SITE" $PY -c "import $module" 2>/dev/null || {
            echo "gpu_env: $module is still missing (add its wheel to .whl/: make gpu-wheels)" >&2
            exit 1
        }
    done
    export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
    export GPU_CHECK_ENV="the machine's python3 and torch (CUDA available)"
elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    if [ ! -f .venv-gpu/.installed ]; then
        echo "gpu_env: building .venv-gpu with torch==$TORCH_PIN (CUDA build)" >&2
        python3 -m venv .venv-gpu
        .venv-gpu/bin/pip install -q "torch==$TORCH_PIN" >&2
        .venv-gpu/bin/pip install -q -r requirements.txt >&2
        .venv-gpu/bin/pip install -q --no-deps -e . >&2
        touch .venv-gpu/.installed
    fi
    PY=.venv-gpu/bin/python
    export GPU_CHECK_ENV=".venv-gpu (torch==$TORCH_PIN from PyPI)"
else
    make --no-print-directory venv >&2
    PY=.venv/bin/python
    export GPU_CHECK_ENV=".venv (no CUDA on this machine)"
fi
exec "$PY" "$@"
