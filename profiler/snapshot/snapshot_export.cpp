// Ultrascope memory events -> a PyTorch memory snapshot (snapshot_export.h). A free is matched to the latest live
// allocation of the same category and label (last in, first out); a free larger than that allocation frees the
// next ones too, and one smaller frees it whole and allocates the rest again at a new address.
#include "profiler/snapshot/snapshot_export.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "common/core/check.h"
#include "common/core/memory_category.h"
#include "profiler/plain/pickle_writer.h"

namespace us::snap {
namespace {

struct LiveBlock {
    uint64_t addr;
    int64_t size;
    const prof::MemoryPoint* made_by;
};

constexpr uint64_t base_address = 0x7f0000000000;
constexpr uint64_t alignment = 512;  // as PyTorch's allocator rounds

class SnapshotBuilder {
public:
    SnapshotBuilder(const prof::TraceStore& store, const prof::RankTrace& rank, SnapshotExportStats& stats)
        : store_(store), rank_(rank), stats_(stats) {}

    std::string build() {
        w_.begin_dict();
        w_.string("device_traces");
        w_.begin_list();
        w_.begin_list();
        // What was allocated before the first recorded event (its total says so): one allocation, so that the
        // snapshot's allocated bytes are the trace's total, not only the events' sum.
        if (!rank_.memory.empty() && rank_.memory[0].total_bytes - rank_.memory[0].delta > 0) {
            before_.t = rank_.memory[0].t, before_.label = unlabelled, before_.category = 255;
            allocate(before_, rank_.memory[0].total_bytes - rank_.memory[0].delta, before_);
        }
        for (const prof::MemoryPoint& p : rank_.memory) {
            if (p.delta > 0)
                allocate(p, p.delta, p);
            else if (p.delta < 0)
                release(p);
        }
        w_.end_list();
        w_.end_list();
        write_segments();
        w_.string("allocator_settings");
        w_.begin_dict();
        w_.string("exported_by"), w_.string("ultrascope export --memory-snapshot (one segment per allocation)");
        w_.end_dict();
        w_.end_dict();
        return w_.finish();
    }

private:
    const prof::TraceStore& store_;
    const prof::RankTrace& rank_;
    SnapshotExportStats& stats_;
    plain::PickleWriter w_;
    static constexpr uint32_t unlabelled = UINT32_MAX;
    prof::MemoryPoint before_;
    uint64_t next_addr_ = base_address;
    std::map<std::pair<uint8_t, uint32_t>, std::vector<LiveBlock>> live_;  // by (category, label)

    int64_t time_us(const prof::MemoryPoint& p) const { return (p.t - store_.origin()) / 1000; }

    // Two frames: "category:layer in label" and "ultrascope:step in phase".
    void frames(const prof::MemoryPoint& p) {
        w_.string("frames");
        w_.begin_list();
        w_.begin_dict();
        w_.string("filename");
        w_.string(p.category < kMemCategoryCount ? std::string(kMemCategoryNames[p.category]) : "unknown");
        w_.string("line"), w_.integer(p.layer), w_.string("name");
        w_.string(p.label == unlabelled ? std::string("(allocated before the first memory event)")
                                        : store_.name(p.label));
        w_.end_dict();
        w_.begin_dict();
        w_.string("filename"), w_.string("ultrascope step"), w_.string("line"), w_.integer(p.step), w_.string("name");
        w_.string(std::string(prof::kPhaseNames[size_t(p.phase) < 4 ? size_t(p.phase) : 0]));
        w_.end_dict();
        w_.end_list();
    }

    void entry(const char* action, uint64_t addr, int64_t size, const prof::MemoryPoint& when,
               const prof::MemoryPoint& made_by) {
        w_.begin_dict();
        w_.string("action"), w_.string(action), w_.string("addr"), w_.integer(int64_t(addr));
        w_.string("size"), w_.integer(size), w_.string("stream"), w_.integer(0);
        w_.string("time_us"), w_.integer(time_us(when));
        frames(made_by);
        w_.end_dict();
    }

    void allocate(const prof::MemoryPoint& when, int64_t size, const prof::MemoryPoint& made_by) {
        const uint64_t addr = next_addr_;
        next_addr_ += (uint64_t(size) + alignment - 1) / alignment * alignment;
        entry("segment_alloc", addr, size, when, made_by);
        entry("alloc", addr, size, when, made_by);
        live_[{made_by.category, made_by.label}].push_back({addr, size, &made_by});
        ++stats_.allocations;
    }

    void release(const prof::MemoryPoint& p) {
        auto it = live_.find({p.category, p.label});
        int64_t left = -p.delta;
        if (it == live_.end() || it->second.empty()) {
            ++stats_.unmatched_frees;
            return;
        }
        auto& stack = it->second;
        while (left > 0 && !stack.empty()) {
            const LiveBlock b = stack.back();
            stack.pop_back();
            entry("free_requested", b.addr, b.size, p, *b.made_by);
            entry("free_completed", b.addr, b.size, p, *b.made_by);
            entry("segment_free", b.addr, b.size, p, *b.made_by);
            ++stats_.frees;
            if (b.size > left) allocate(p, b.size - left, *b.made_by);  // a partial free: the rest lives on
            left -= b.size;
        }
        if (left > 0) ++stats_.unmatched_frees;
    }

    // At dump time: one segment per live allocation, holding it as one active block.
    void write_segments() {
        w_.string("segments");
        w_.begin_list();
        for (const auto& [key, stack] : live_) {
            for (const LiveBlock& b : stack) {
                ++stats_.alive_at_end;
                w_.begin_dict();
                w_.string("device"), w_.integer(0), w_.string("address"), w_.integer(int64_t(b.addr));
                w_.string("total_size"), w_.integer(b.size), w_.string("allocated_size"), w_.integer(b.size);
                w_.string("active_size"), w_.integer(b.size), w_.string("requested_size"), w_.integer(b.size);
                w_.string("stream"), w_.integer(0), w_.string("segment_type"), w_.string("large");
                w_.string("is_expandable"), w_.boolean(false);
                w_.string("blocks");
                w_.begin_list();
                w_.begin_dict();
                w_.string("address"), w_.integer(int64_t(b.addr)), w_.string("size"), w_.integer(b.size);
                w_.string("requested_size"), w_.integer(b.size), w_.string("state"), w_.string("active_allocated");
                frames(*b.made_by);
                w_.end_dict();
                w_.end_list();
                frames(*b.made_by);
                w_.end_dict();
            }
        }
        w_.end_list();
    }
};

}  // namespace

std::string memory_snapshot_of_rank(const prof::TraceStore& store, int rank, SnapshotExportStats& stats) {
    const prof::RankTrace* r = store.rank(rank);
    US_CHECK_INPUT(r != nullptr, "rank {} is not in the trace", rank);
    return SnapshotBuilder(store, *r, stats).build();
}

std::vector<std::string> export_memory_snapshots(const prof::TraceStore& store, const std::string& out,
                                                 std::vector<SnapshotExportStats>* stats) {
    const std::vector<int> ranks = store.ranks();
    size_t events = 0;
    for (const int r : ranks) events += store.rank(r)->memory.size();
    US_CHECK_INPUT(events > 0,
                   "--memory-snapshot {}: the trace has no memory events to export (was it recorded "
                   "with memory tracking, and not past the store's cap?)",
                   out);
    std::vector<std::string> written;
    for (const int r : ranks) {
        std::filesystem::path path(out);
        if (ranks.size() > 1) path = path.parent_path() / ("rank" + std::to_string(r) + "_" + path.filename().string());
        SnapshotExportStats s;
        const std::string bytes = memory_snapshot_of_rank(store, r, s);
        const std::string tmp = path.string() + ".partial";
        {
            std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
            US_CHECK_INPUT(f.good(), "--memory-snapshot: cannot write {} (does its directory exist?)", tmp);
            f.write(bytes.data(), std::streamsize(bytes.size()));
            US_CHECK_INPUT(f.good(), "--memory-snapshot: writing {} failed (disk full?)", tmp);
        }
        std::filesystem::rename(tmp, path);
        written.push_back(path.string());
        if (stats) stats->push_back(s);
    }
    return written;
}

}  // namespace us::snap
