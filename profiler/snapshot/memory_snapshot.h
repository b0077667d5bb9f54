// A PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot: a pickle, or the same dict as JSON) as typed
// data: the allocator's segments and blocks at dump time, and the per-device trace of what it did
// (_record_memory_history). Stacks are interned: an entry holds a stack id, a stack a range of frame ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/plain/plain_data.h"

namespace us::snap {

struct SnapshotFrame {
    std::string_view filename, name;  // into the snapshot's own text
    int64_t line = 0;
};

enum class BlockState : uint8_t { active_allocated, active_awaiting_free, inactive, unknown };

struct SnapshotBlock {
    uint64_t address = 0;
    int64_t size = 0, requested_size = 0;
    BlockState state = BlockState::unknown;
    uint32_t stack = 0;
};

struct SnapshotSegment {
    int device = 0;
    uint64_t address = 0;
    int64_t total_size = 0, allocated_size = 0, active_size = 0, stream = 0;
    std::string_view segment_type;              // "large" / "small"
    uint32_t block_begin = 0, block_count = 0;  // in MemorySnapshot::blocks
};

enum class TraceAction : uint8_t {
    alloc,
    free_requested,
    free_completed,
    segment_alloc,
    segment_free,
    segment_map,
    segment_unmap,
    oom,
    snapshot,
    other
};
const char* trace_action_name(TraceAction action);

struct TraceEntry {
    TraceAction action = TraceAction::other;
    uint64_t addr = 0;
    int64_t size = 0, stream = 0;
    int64_t time_us = -1;      // -1: not recorded
    int64_t device_free = -1;  // OOM only: what cudaMemGetInfo said was free; -1: not recorded
    uint32_t stack = 0;
};

class MemorySnapshot {
public:
    std::string source;  // the file name, for messages
    int rank = -1;       // from the file name (rank3_...), -1 when it does not say
    std::vector<SnapshotSegment> segments;
    std::vector<SnapshotBlock> blocks;
    std::vector<std::vector<TraceEntry>> device_traces;  // [device][entry], in recorded order
    bool has_traces = false;                             // the dict had device_traces
    std::vector<std::string> warnings;

    std::span<const uint32_t> stack(uint32_t id) const {
        return std::span<const uint32_t>(stack_frames_.data() + stacks_[id].begin, stacks_[id].count);
    }
    const SnapshotFrame& frame(uint32_t id) const { return frames_[id]; }
    size_t frame_count() const { return frames_.size(); }
    size_t trace_entries() const;

    // Built by the loader: stack 0 is the empty stack.
    MemorySnapshot();
    uint32_t add_frame(const SnapshotFrame& f);
    uint32_t add_stack(std::span<const uint32_t> frame_ids);
    plain::PlainData data;  // owns the strings the frames point into

private:
    struct StackRange {
        uint32_t begin, count;
    };
    std::vector<SnapshotFrame> frames_;
    std::vector<uint32_t> stack_frames_;
    std::vector<StackRange> stacks_;
};

// Reads a snapshot file: a pickle (protocols 2-5, plain data only) or JSON. Throws UserError naming the file.
MemorySnapshot load_memory_snapshot(const std::string& path);
MemorySnapshot parse_memory_snapshot(std::string_view bytes, const std::string& source);
// Whether a path is a memory snapshot by its name or first bytes (.pickle/.pkl, or JSON with "segments").
bool is_memory_snapshot_path(const std::string& path);

}  // namespace us::snap
