// The flight recorder's ring and its dump (flight_recorder.h).
#include "engine/comm/flight_recorder.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "profiler/record/recorder.h"

namespace us {

const char* flight_op_name(FlightOp op) {
    switch (op) {
        case FlightOp::all_reduce:
            return "all_reduce";
        case FlightOp::reduce_scatter:
            return "reduce_scatter";
        case FlightOp::all_gather:
            return "all_gather";
        case FlightOp::broadcast:
            return "broadcast";
        case FlightOp::all_to_all:
            return "all_to_all";
        case FlightOp::barrier:
            return "barrier";
        case FlightOp::send:
            return "send";
        case FlightOp::recv:
            return "recv";
    }
    return "?";
}

FlightDType flight_dtype(DType t) {
    switch (t) {
        case DType::f32:
            return FlightDType::float32;
        case DType::bf16:
            return FlightDType::bfloat16;
        case DType::i32:
            return FlightDType::int32;
    }
    return FlightDType::byte;
}

const char* flight_dtype_name(FlightDType t) {
    switch (t) {
        case FlightDType::float32:
            return "Float";
        case FlightDType::bfloat16:
            return "BFloat16";
        case FlightDType::int32:
            return "Int";
        case FlightDType::float64:
            return "Double";
        case FlightDType::byte:
            return "Byte";
    }
    return "?";
}

int64_t flight_now_ns() {
    timespec t{};
    clock_gettime(CLOCK_REALTIME, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

void FlightRecorder::configure(const FlightRecorderOptions& options) {
    std::lock_guard lock(m_mutex);
    m_options = options;
    m_capacity = std::max(0, options.capacity);
    m_ring.assign(size_t(m_capacity), Slot{});
    m_next_id = 0;
}

int FlightRecorder::add_group(const std::string& name, const std::string& desc, std::vector<int> ranks,
                              const std::string& library, int group_rank) {
    std::lock_guard lock(m_mutex);
    Group g;
    g.name = name, g.desc = desc, g.library = library, g.ranks = std::move(ranks), g.group_rank = group_rank;
    m_groups.push_back(std::move(g));
    return int(m_groups.size()) - 1;
}

FlightRecorder::Slot* FlightRecorder::slot_of(int64_t id) {
    if (id < 0 || m_capacity == 0) return nullptr;
    Slot& s = m_ring[size_t(id % m_capacity)];
    return s.record_id == id ? &s : nullptr;
}

int64_t FlightRecorder::record(int group, const FlightCall& call) {
    if (m_capacity == 0) return -1;
    const int64_t now = flight_now_ns();
    const FlightFrameStack& frames = flight_frames();
    const prof::RecordContext& context = prof::context();
    std::lock_guard lock(m_mutex);
    Group& g = m_groups[size_t(group)];
    const bool p2p = call.op == FlightOp::send || call.op == FlightOp::recv;
    (p2p ? g.p2p_seq : g.collective_seq) += 1;
    g.op_id += 1;
    const int64_t id = m_next_id++;
    Slot& s = m_ring[size_t(id % m_capacity)];
    s.record_id = id;
    s.collective_seq = g.collective_seq, s.p2p_seq = g.p2p_seq, s.op_id = g.op_id;
    s.created_ns = now, s.started_ns = -1, s.completed_ns = -1;
    s.in_numel = call.in_numel, s.out_numel = call.out_numel;
    s.step = context.step, s.micro_batch = context.micro_batch, s.peer = call.peer;
    s.group = uint16_t(group), s.op = call.op, s.dtype = call.dtype, s.state = flight::EntryState::scheduled;
    // The innermost frames (the open scopes' last ones), innermost first.
    const int open = std::min(frames.depth, FlightFrameStack::kCapacity);
    s.depth = uint8_t(std::min(open, Slot::kFrames));
    for (int i = 0; i < s.depth; ++i) s.frames[i] = frames.sites[open - 1 - i];
    return id;
}

void FlightRecorder::started(int64_t id) {
    if (id < 0) return;
    const int64_t now = flight_now_ns();
    std::lock_guard lock(m_mutex);
    if (Slot* s = slot_of(id); s && s->state == flight::EntryState::scheduled) {
        s->state = flight::EntryState::started;
        s->started_ns = now;
    }
}

void FlightRecorder::completed(int64_t id) {
    if (id < 0) return;
    const int64_t now = flight_now_ns();
    std::lock_guard lock(m_mutex);
    if (Slot* s = slot_of(id); s && s->state != flight::EntryState::completed) {
        if (s->started_ns < 0) s->started_ns = now;
        s->state = flight::EntryState::completed;
        s->completed_ns = now;
    }
}

void FlightRecorder::watch_unfinished(int64_t id, CommHandle handle) {
    if (id < 0) return;
    std::lock_guard lock(m_unfinished_mutex);
    if (m_unfinished.size() >= size_t(std::max(m_capacity, 1))) m_unfinished.erase(m_unfinished.begin());
    m_unfinished.emplace_back(id, std::move(handle));
}

void FlightRecorder::poll_unfinished() {
    std::lock_guard lock(m_unfinished_mutex);
    std::erase_if(m_unfinished, [&](const std::pair<int64_t, CommHandle>& u) {
        if (!u.second->test()) return false;
        completed(u.first);
        return true;
    });
}

void FlightRecorder::begin_step(int step) {
    m_step.store(step, std::memory_order_relaxed);
    m_step_began_ns.store(flight_now_ns(), std::memory_order_release);
}

void FlightRecorder::end_steps() { m_step_began_ns.store(0, std::memory_order_release); }

std::string FlightRecorder::stall(double limit_s, int64_t& key) const {
    const int64_t now = flight_now_ns(), limit_ns = int64_t(limit_s * 1e9);
    {
        std::lock_guard lock(m_mutex);
        const Slot* oldest = nullptr;
        for (const Slot& s : m_ring)
            if (s.record_id >= 0 && s.state != flight::EntryState::completed &&
                (!oldest || s.record_id < oldest->record_id))
                oldest = &s;
        if (oldest && now - oldest->created_ns > limit_ns) {
            const Group& g = m_groups[oldest->group];
            key = oldest->record_id;
            return fmt::format(
                "{} on {} (#{} of the group) has not completed after {:.0f} s", flight_op_name(oldest->op), g.name,
                oldest->op == FlightOp::send || oldest->op == FlightOp::recv ? oldest->p2p_seq : oldest->collective_seq,
                double(now - oldest->created_ns) / 1e9);
        }
    }
    const int64_t began = m_step_began_ns.load(std::memory_order_acquire);
    if (began != 0 && now - began > limit_ns) {
        key = -1 - m_step.load(std::memory_order_relaxed);  // apart from record ids
        return fmt::format("step {} has run for {:.0f} s", m_step.load(), double(now - began) / 1e9);
    }
    return {};
}

int64_t FlightRecorder::recorded() const {
    std::lock_guard lock(m_mutex);
    return m_next_id;
}

namespace {

// The source file as the repository names it ("engine/parallel/data_parallel.cpp"): __FILE__ is absolute, or
// relative to the build folder where ccache's base_dir rewrote it ("../engine/...").
std::string relative_file(const char* file) {
    std::string_view f = file;
#ifdef US_SOURCE_DIR
    const std::string_view root = US_SOURCE_DIR;
    if (f.size() > root.size() && f.substr(0, root.size()) == root && f[root.size()] == '/')
        f.remove_prefix(root.size() + 1);
#endif
    while (f.substr(0, 3) == "../" || f.substr(0, 2) == "./") f.remove_prefix(f[1] == '/' ? 2 : 3);
    return std::string(f);
}

std::string frame_name(const FlightSite& site, int step, int micro_batch) {
    switch (site.detail) {
        case FrameDetail::none:
            return site.name;
        case FrameDetail::step:
            return fmt::format("{} (step {})", site.name, step);
        case FrameDetail::micro_batch:
            return micro_batch < 0 ? fmt::format("{} (step {})", site.name, step)
                                   : fmt::format("{} (step {}, micro-batch {})", site.name, step, micro_batch);
    }
    return site.name;
}

}  // namespace

void FlightRecorder::add_entry(flight::FlightDump& dump, flight::FlightDumpBuilder& build, const Group& g,
                               uint32_t group_id, const Slot& s) const {
    const bool p2p = s.op == FlightOp::send || s.op == FlightOp::recv;
    flight::FlightEntry e;
    e.record_id = s.record_id;
    e.collective_seq_id = s.collective_seq, e.p2p_seq_id = s.p2p_seq, e.op_id = s.op_id;
    e.time_created_ns = s.created_ns, e.time_started_ns = s.started_ns, e.time_completed_ns = s.completed_ns;
    e.timeout_ms = int32_t(std::min<int64_t>(m_options.timeout_ms, INT32_MAX));
    e.group = group_id;
    // PyTorch's names: "nccl:all_reduce", and for p2p the group ranks, "nccl:send 0->1" / "nccl:recv 1<-0".
    std::string name = g.library + ":" + flight_op_name(s.op);
    if (s.op == FlightOp::send) name += fmt::format(" {}->{}", g.group_rank, s.peer);
    if (s.op == FlightOp::recv) name += fmt::format(" {}<-{}", g.group_rank, s.peer);
    e.op = build.string(name);
    flight::TensorShapes shapes;
    if (s.op != FlightOp::barrier) {
        const flight::StringId dtype = build.string(flight_dtype_name(s.dtype));
        shapes.input_sizes = {{s.in_numel}}, shapes.output_sizes = {{s.out_numel}};
        shapes.input_dtypes = {dtype}, shapes.output_dtypes = {dtype};
    }
    e.shapes = build.shapes(std::move(shapes));
    std::vector<flight::Frame> frames;
    for (int i = 0; i < s.depth; ++i)
        frames.push_back({build.string(frame_name(*s.frames[i], s.step, s.micro_batch)),
                          build.string(relative_file(s.frames[i]->file)), s.frames[i]->line});
    e.stack = build.stack(std::move(frames));
    e.peer = p2p ? s.peer : -1;
    e.state = s.state;
    e.retired = s.state == flight::EntryState::completed;
    e.is_p2p = p2p;
    dump.entries.push_back(e);
}

flight::FlightDump FlightRecorder::snapshot() const {
    flight::FlightDump dump;
    dump.rank = m_options.rank;
    dump.host = m_options.host;
    dump.pid = int64_t(getpid());
    dump.version = "2.10";
    dump.comm_lib_version = m_options.comm_lib_version;
    dump.injected_fault = m_options.injected_fault;
    std::vector<Slot> slots;
    std::vector<Group> groups;
    {  // copied under the lock, written outside it: recording goes on meanwhile
        std::lock_guard lock(m_mutex);
        groups = m_groups;
        const int64_t kept = std::min<int64_t>(m_next_id, m_capacity);
        slots.reserve(size_t(kept));
        for (int64_t id = m_next_id - kept; id < m_next_id; ++id) slots.push_back(m_ring[size_t(id % m_capacity)]);
    }
    flight::FlightDumpBuilder build(dump);
    std::vector<uint32_t> group_ids;
    for (const Group& g : groups) {
        dump.pg_config.push_back({g.name, g.desc, g.ranks});
        group_ids.push_back(build.group(g.name, g.desc));
    }
    dump.entries.reserve(slots.size());
    for (const Slot& s : slots) add_entry(dump, build, groups[s.group], group_ids[s.group], s);
    return dump;
}

FlightRecorder& flight_recorder() {
    static FlightRecorder recorder;
    return recorder;
}

}  // namespace us
