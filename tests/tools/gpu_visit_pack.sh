#!/usr/bin/env bash
# Packs what one visit to a lent GPU machine needs and cannot build there (docs/gpu.md, "Visiting a GPU"): the
# binaries of a build made here (-DULTRASCOPE_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=90), optionally a baseline build's
# ultrascope-train and llm.c's train_gpt2cu for side-by-side figures, and the Debian libraries they load that a CUDA
# image lacks (OpenBLAS, Open MPI with its plugins and help files, fmt, GLFW, the GL dispatch libraries), as one
# .tar.xz that gpu_visit_run.sh unpacks there without overwriting anything the machine has.
#
#   tests/tools/gpu_visit_pack.sh BUILD OUTDIR [BASELINE_TRAIN] [LLMC_TRAIN_GPT2CU]
set -euo pipefail
build=$1 out=$2 baseline=${3:-} llmc=${4:-}
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

mkdir -p "$stage/visit/bin"
# the source folder the build baked in (the tests find their data through it): the visit links it to its copy
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" > "$stage/visit/source_dir"
for b in ultrascope ultrascope-train ultrascope-tests bench_sgemm_peak bench_gemm; do
  strip -o "$stage/visit/bin/$b" "$build/bin/$b"
done
[ -n "$baseline" ] && strip -o "$stage/visit/bin/ultrascope-train-baseline" "$baseline"
[ -n "$llmc" ] && cp "$llmc" "$stage/visit/bin/train_gpt2cu"

# Every library the binaries, Open MPI's programs and plugins, and GL's dispatch load, except glibc's and the
# compiler runtime's (newer on any CUDA image) and the CUDA toolkit's (the image has its own).
files=$(mktemp)
{
  ls "$stage"/visit/bin/* /usr/bin/orterun /usr/bin/orted \
     /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so \
     /usr/lib/x86_64-linux-gnu/libGL.so.1 /usr/lib/x86_64-linux-gnu/libGLX.so.0 2>/dev/null |
    xargs -n 1 ldd 2>/dev/null | awk '/=> \//{print $3}'
  echo /usr/lib/x86_64-linux-gnu/libGL.so.1 /usr/lib/x86_64-linux-gnu/libGLX.so.0 | tr ' ' '\n'
  dpkg -L openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libhwloc-plugins 2>/dev/null
} | grep -v -E '/(libc|libm|libdl|libpthread|librt|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
  grep -v -E '^/usr/local/cuda|^/usr/share/(doc|man|lintian)|^/usr/include' | sort -u > "$files"
# files only (a listed directory would take all of it); links stored as the files they point to (-h), so that
# chains through /etc/alternatives (OpenBLAS) arrive whole
while read -r f; do
  [ -e "$f" ] && [ ! -d "$f" ] && echo "$f"
done < "$files" | sort -u > "$files.all"
tar -C / -hcf "$stage/visit/runtime.tar" --files-from <(sed 's|^/||' "$files.all")
echo "runtime: $(wc -l < "$files.all") paths, $(du -h "$stage/visit/runtime.tar" | cut -f1) unpacked"
tar -C "$stage" -cJf "$out/visit.tar.xz" visit
du -h "$out/visit.tar.xz"
