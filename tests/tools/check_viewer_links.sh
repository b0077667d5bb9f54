#!/usr/bin/env bash
# The viewer does not carry the engine: `ultrascope` (GUI, run, report, export, predict) links the settings library
# (us_config), not the trainer's backends, so it loads no MPI, BLAS, OpenMP or CUDA library. Exits 1 naming any.
#   tests/tools/check_viewer_links.sh PATH/TO/ultrascope
set -uo pipefail
bin=${1:?usage: check_viewer_links.sh PATH/TO/ultrascope}
libs=$(ldd "$bin") || { echo "viewer_links: ldd $bin failed"; exit 2; }
engine=$(echo "$libs" | grep -E 'lib(mpi|open-pal|open-rte|openblas|blas|gomp|cudart|cublas|cublasLt|nccl|cupti)\.' || true)
if [ -n "$engine" ]; then
  echo "viewer_links: $bin loads the engine's libraries (link us_config, not us_engine):"
  echo "$engine" | sed 's/^/  /'
  exit 1
fi
echo "viewer_links: ok ($(echo "$libs" | wc -l) libraries, none of MPI, BLAS, OpenMP, CUDA)"
