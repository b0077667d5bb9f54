#!/usr/bin/env bash
# Ultrascope quick start on Debian 12 / Ubuntu: installs the Debian packages that are missing (with sudo when not
# root), configures and builds into build/, then
#   ./quickstart.sh         runs the main job: a default training run with a live progress display and a report
#   ./quickstart.sh test    runs the whole test suite through ctest
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-run}
case "$mode" in run|test) ;; *) echo "usage: $0 [run|test]" >&2; exit 2 ;; esac

packages=(cmake ninja-build g++ pkg-config
          libopenblas-openmp-dev libopenmpi-dev openmpi-bin
          libfmt-dev libcli11-dev nlohmann-json3-dev libzstd-dev zlib1g-dev libdeflate-dev libsimdjson-dev catch2
          libimgui-dev libglfw3-dev libgl-dev libegl-dev libstb-dev fonts-dejavu-core
          xvfb xauth libgl1-mesa-dri libegl-mesa0 clang libclang-rt-dev clang-format iproute2
          slurmctld slurmd slurm-client munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
  echo "quickstart: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
# The fuzz tests' targets are a second, sanitized build of the readers with clang (tests/CMakeLists.txt) that adds
# 12-20% to the main build's compiling: the test mode turns them on; a first run leaves them off, so that it does
# not wait for them (once on, they stay on and are kept up to date by every build).
fuzz=()
if [ "$mode" = test ]; then fuzz=(-DULTRASCOPE_FUZZ=ON)
elif [ ! -f build/CMakeCache.txt ]; then fuzz=(-DULTRASCOPE_FUZZ=OFF); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${fuzz[@]}"
cmake --build build -j "$jobs"

# Open MPI refuses to run as root unless told; ranks yield when idle so that oversubscribed runs stay fair.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1

if [ "$mode" = test ]; then
  exec ctest --test-dir build --output-on-failure -j "$jobs"
fi
# The GUI on the default live run (dp 2 x pp 2 on 4 ranks, small preset); without a display, the same run headless.
exec build/bin/ultrascope
