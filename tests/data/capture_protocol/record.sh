#!/usr/bin/env bash
# Records what real Kineto sends: a 2-rank torchrun job (ddp_job.py) started with KINETO_USE_DAEMON=1 and 1 s
# polls, and `ultrascope agent --record` owning a socket directory of its own (so a dynolog on this machine is not
# disturbed), for a few seconds. The recording (JSON lines: time, datagram in hex, each sender's environment at its
# first poll) is what tests/unit/test_capture_replay.cpp replays in CI, where there is no torch.
#   tests/data/capture_protocol/record.sh PYTHON_WITH_TORCH ULTRASCOPE_BINARY [SECONDS]
set -euo pipefail
python=${1:?python with torch}
ultrascope=${2:?the ultrascope binary}
seconds=${3:-8}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
job_pid= agent_pid=
trap '[ -n "$job_pid" ] && kill -- -$job_pid 2>/dev/null || true; kill $agent_pid 2>/dev/null || true; rm -rf "$work"' EXIT
echo "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1" > "$work/kineto.conf"
export KINETO_IPC_SOCKET_DIR=$work
"$ultrascope" agent --port 0 --record "$work/polls.jsonl" > "$work/agent.log" 2>&1 &
agent_pid=$!
sleep 1
# The shell setsid starts leads the job's session (whether or not setsid forked): its pid kills the whole job.
KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf setsid sh -c "echo \$\$ > '$work/session'; exec '$python' \
  -m torch.distributed.run --nproc-per-node 2 --master-port $((29500 + $$ % 1000)) '$here/ddp_job.py' \
  --seconds $((seconds + 20))" > "$work/job.log" 2>&1 &
sleep 1
job_pid=$(cat "$work/session")
sleep "$seconds"
"$python" -c "import torch; print(torch.__version__)" > "$here/torch_version.txt"
cp "$work/polls.jsonl" "$here/kineto_polls.jsonl"
echo "recorded $(wc -l < "$here/kineto_polls.jsonl") datagrams from torch $(cat "$here/torch_version.txt")"
