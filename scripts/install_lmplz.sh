#!/usr/bin/env bash
# Build kenlm's estimator (lmplz) and its binary-format converter (build_binary)
# from the kenlm source distribution, and copy both into a prefix.
#
#   scripts/install_lmplz.sh [PREFIX]        (default: .tools/bin)
#
# PyPI's kenlm wheels only *query* models; no PyPI package ships lmplz. pivot
# has its own modified Kneser-Ney estimator (pivot/pipeline/lm.py); lmplz is
# optional, used when asked for and by the agreement test in tests/test_lm.py.
# pivot looks for lmplz and build_binary in the repository's .tools/bin (this
# script's default prefix when run from the repository's root) first, then on
# PATH (pivot.pipeline.lm.find_lmplz).
#
# Needs: a C++ compiler, cmake, make, and the Boost/compression headers below
# (installed with apt-get when running as root and they are missing).
set -euo pipefail

PREFIX="${1:-.tools/bin}"
KENLM_VERSION="${KENLM_VERSION:-0.3.0}"
JOBS="${JOBS:-2}"

mkdir -p "$PREFIX"
PREFIX="$(cd "$PREFIX" && pwd)"

APT_PACKAGES=(libboost-program-options-dev libboost-system-dev libboost-thread-dev
              libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y "${missing[@]}"
    else
        echo "install_lmplz.sh: missing packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})" >&2
        exit 1
    fi
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# The sdist is the whole kenlm C++ tree plus the Python binding.
# --no-binary on kenlm alone (not :all:): pip prepares the sdist's metadata, and
# with :all: it would first build its build requirement cmake from source.
# Without build isolation that takes the environment's setuptools (no download);
# an environment without setuptools gets the build requirements as wheels.
PY="${PYTHON:-python3}"
if ! "$PY" -m pip download "kenlm==${KENLM_VERSION}" --no-deps --no-binary kenlm \
        --no-build-isolation -d . -q 2>/dev/null; then
    "$PY" -m pip download "kenlm==${KENLM_VERSION}" --no-deps --no-binary kenlm -d . -q
fi
tar xzf kenlm-*.tar.gz
SRC="$(find . -maxdepth 1 -type d -name 'kenlm-*' | head -n1)"

mkdir -p "$SRC/build"
cd "$SRC/build"
# The compiler is chatty about deprecated std::binary_function: keep its
# output in a log and show the tail only when the build fails.
LOG="$WORK/build.log"
if ! { cmake .. -DCMAKE_BUILD_TYPE=Release -DKENLM_MAX_ORDER=6 &&
       make -j"$JOBS" lmplz build_binary; } >"$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    echo "install_lmplz.sh: cmake/make failed (last 40 lines of its output above)" >&2
    exit 1
fi

cp bin/lmplz bin/build_binary "$PREFIX/"
echo "installed: $PREFIX/lmplz $PREFIX/build_binary"
