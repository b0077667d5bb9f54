#!/usr/bin/env bash
# Re-records the real PyTorch (Kineto) traces with a known culprit under tests/data/kineto/blame/ that the blame
# (straggler) analysis's tests read: uses (or makes) the same venv as record_pytorch_traces.sh (torch from PyPI,
# build/torch-venv, never committed), runs record_blame_traces.py on gloo CPU ranks (127.0.0.1 only), writes
# blame/VERSIONS.txt and checks each scenario's culprit in its traces (check_blame_traces.py).
# Usage: tests/tools/record_blame_traces.sh [scenario ...]
# The ranks share this machine's cores: run it on an otherwise idle machine (the recorder waits for one, and records
# again when other processes took more than 5% of the cores during a run).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${TORCH_VENV:-$repo/build/torch-venv}"
out="$repo/tests/data/kineto/blame"

if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "making $venv with torch from PyPI (the default wheel brings NVIDIA libraries: a few GB, slow)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet torch numpy
fi
torch_version="$("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
python_version="$("$venv/bin/python" -c 'import platform; print(platform.python_version())')"
echo "torch $torch_version, python $python_version"

# One thread per rank: the ranks share this machine's cores.
export OMP_NUM_THREADS=1
cmd=("$venv/bin/python" "$repo/tests/tools/record_blame_traces.py" --out "$out")
if [ "$#" -gt 0 ]; then cmd+=(--only "$@"); fi
status=0
"${cmd[@]}" || status=$?

{
    echo "torch: $torch_version"
    echo "python: $python_version"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "command: tests/tools/record_blame_traces.sh $*"
    echo "backend: gloo on CPU, ranks spawned by torch.multiprocessing on 127.0.0.1, rank r pinned to core r % cores"
    echo "recorder exit status: $status (scenarios.json says which scenarios were recorded)"
} > "$out/VERSIONS.txt"
cat "$out/VERSIONS.txt"
du -ab "$out" | grep -E '\.(json|gz|txt)$' | sort -k2
check=0
folders=()
for d in "$out"/*/; do
    if [ -f "$d/meta.json" ]; then folders+=("$d"); fi
done
"$venv/bin/python" "$repo/tests/tools/check_blame_traces.py" "${folders[@]}" || check=$?
if [ "$status" -ne 0 ]; then exit "$status"; fi
exit "$check"
