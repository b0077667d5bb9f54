// A hung job made in memory, for tests and the hang benchmark: each rank's Flight Recorder dump built the way the
// recorders build theirs (PyTorch's, the engine's), one collective or p2p operation at a time, per process group.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "profiler/flight/flight_dump.h"

namespace us::test {

class FlightJob {
public:
    explicit FlightJob(int world, std::string comm_lib = "2.21.5") {
        dumps.resize(size_t(world));
        for (int r = 0; r < world; ++r) {
            dumps[size_t(r)].rank = r;
            dumps[size_t(r)].version = "2.10";
            dumps[size_t(r)].comm_lib_version = comm_lib;
            dumps[size_t(r)].source = "rank_" + std::to_string(r);
        }
    }

    // `ranks` each record the next collective of group (name, desc); ranks in `incomplete` leave it unfinished.
    // `elements` is the tensor's size (one input, one output), `line` the caller's line in the stack.
    void collective(const std::string& name, const std::string& desc, const std::vector<int>& ranks,
                    const std::string& op, int64_t elements, const std::vector<int>& incomplete = {}, int line = 10,
                    const std::string& dtype = "Float") {
        const int64_t seq = ++collective_seq_[name];
        for (int r : ranks) {
            const bool done = std::find(incomplete.begin(), incomplete.end(), r) == incomplete.end();
            add(r, name, desc, op, elements, dtype, done, false, seq, -1, line);
        }
    }
    // Rank `r` records one collective of its own (the one that differs, or the one others never reach).
    void collective_on(int r, const std::string& name, const std::string& desc, const std::string& op, int64_t elements,
                       bool done, int64_t seq, int line = 10, const std::string& dtype = "Float") {
        add(r, name, desc, op, elements, dtype, done, false, seq, -1, line);
    }
    // A p2p operation of rank r: "send" to or "recv" from `peer` (group ranks), torch's name "nccl:send 0->1".
    void p2p(int r, const std::string& name, const std::string& desc, const std::string& kind, int self, int peer,
             int64_t elements, bool done, int line = 20) {
        const std::string op = kind == "send" ? "nccl:send " + std::to_string(self) + "->" + std::to_string(peer)
                                              : "nccl:recv " + std::to_string(self) + "<-" + std::to_string(peer);
        add(r, name, desc, op, elements, "Float", done, true, 0, ++p2p_seq_[{name, r}], line);
    }
    // pg_config of every dump: each group's ranks, as NCCL dumps give them.
    void config(const std::string& name, const std::string& desc, const std::vector<int>& ranks) {
        for (int r : ranks) dumps[size_t(r)].pg_config.push_back({name, desc, ranks});
    }

    std::vector<flight::FlightDump> dumps;

private:
    void add(int r, const std::string& name, const std::string& desc, const std::string& op, int64_t elements,
             const std::string& dtype, bool done, bool p2p, int64_t seq, int64_t p2p_seq, int line) {
        flight::FlightDump& d = dumps[size_t(r)];
        flight::FlightDumpBuilder b(d);
        flight::FlightEntry e;
        e.record_id = int64_t(d.entries.size());
        e.group = b.group(name, desc);
        e.collective_seq_id = p2p ? 0 : seq;
        e.p2p_seq_id = p2p ? p2p_seq : 0;
        e.op_id = ++op_id_[{r, name}];  // per group, as PyTorch and the engine number them
        e.op = b.string(op);
        e.shapes = b.shapes({{{elements}}, {{elements}}, {b.string(dtype)}, {b.string(dtype)}});
        e.stack = b.stack(
            {{b.string("train_step"), b.string("train.py"), line}, {b.string("main"), b.string("train.py"), 99}});
        e.time_created_ns = int64_t(d.entries.size() + 1) * 1000000;
        e.state = done ? flight::EntryState::completed : flight::EntryState::started;
        e.retired = done;
        e.is_p2p = p2p;
        int self = -1, peer = -1;
        if (p2p && flight::parse_p2p_peers(op, self, peer)) e.peer = peer;
        d.entries.push_back(e);
    }
    std::map<std::string, int64_t> collective_seq_;
    std::map<std::pair<std::string, int>, int64_t> p2p_seq_;
    std::map<std::pair<int, std::string>, int64_t> op_id_;
};

}  // namespace us::test
