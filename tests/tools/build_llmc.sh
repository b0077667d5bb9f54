#!/usr/bin/env bash
# Builds llm.c's train_gpt2cu, the baseline of tests/bench/bench_vs_llmc.py, on this machine (no GPU needed) for a
# GPU visit (docs/gpu.md, "Visiting a GPU"): outside the repository, from a checkout of karpathy/llm.c and one of
# NVIDIA/cudnn-frontend (header-only), with cuDNN's flash attention as llm.c's README recommends. The binary goes to
# gpu_visit_pack.sh as its LLMC argument; nothing of either project enters this repository.
#   tests/tools/build_llmc.sh LLMC_SRC CUDNN_FRONTEND_SRC OUT_DIR [LLMC_REV] [FRONTEND_REV]
# LLMC_SRC and CUDNN_FRONTEND_SRC are git repositories (bare or not); the revisions default to the ones the figures
# in docs/gpu.md were taken with (llm.c f1e2ace, cudnn-frontend v1.18.0).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 LLMC_SRC CUDNN_FRONTEND_SRC OUT_DIR [LLMC_REV] [FRONTEND_REV]" >&2; exit 2; }
llmc_src=$1 fe_src=$2 out=$3 llmc_rev=${4:-f1e2ace} fe_rev=${5:-v1.18.0}
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -x "$cuda/bin/nvcc" ] || { echo "no nvcc under $cuda: set CUDA_HOME to the CUDA toolkit" >&2; exit 1; }
[ -e "$cuda/include/cudnn.h" ] || { echo "no cuDNN headers under $cuda/include: install cuDNN 9 for this toolkit" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# llm.c's Makefile looks for the frontend in ./cudnn-frontend/include
mkdir -p "$work/llmc/cudnn-frontend"
git -C "$llmc_src" archive "$llmc_rev" | tar -x -C "$work/llmc"
git -C "$fe_src" archive "$fe_rev" include | tar -x -C "$work/llmc/cudnn-frontend"
# CUDA 13 took cudaMemAdvise's device argument as a cudaMemLocation: the one call llm.c makes, adapted
sed -i 's/cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
  "$work/llmc/llmc/cuda_utils.cuh"
grep -q cudaMemLocationTypeHost "$work/llmc/llmc/cuda_utils.cuh" || { echo "llm.c's cudaMemAdvise call moved: adapt $0" >&2; exit 1; }
export PATH=$cuda/bin:$PATH
# The libraries named here replace the Makefile's list, which adds NVML: without nvml.h (a driver's header, not the
# toolkit's) llm.c reads no GPU clocks or power and needs no libnvidia-ml.
make -C "$work/llmc" train_gpt2cu USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY=90 \
  NVCC_LDFLAGS="-lcublas -lcublasLt -lcudnn" -j"$(nproc)"
mkdir -p "$out"
cp "$work/llmc/train_gpt2cu" "$out/"
echo "$out/train_gpt2cu: llm.c $llmc_rev, cudnn-frontend $fe_rev, $(nvcc --version | tail -1)"
