// A Flight Recorder dump's tables and names (flight_dump.h).
#include "profiler/flight/flight_dump.h"

#include <charconv>

namespace us::flight {

const char* entry_state_name(EntryState s) {
    switch (s) {
        case EntryState::scheduled:
            return "scheduled";
        case EntryState::started:
            return "started";
        case EntryState::completed:
            return "completed";
    }
    return "?";
}

bool parse_entry_state(std::string_view text, EntryState& out) {
    for (EntryState s : {EntryState::scheduled, EntryState::started, EntryState::completed})
        if (text == entry_state_name(s)) {
            out = s;
            return true;
        }
    return false;
}

FlightDumpBuilder::FlightDumpBuilder(FlightDump& dump) : dump_(dump) {
    // A dump already holding tables (one recorded before, added to) keeps them: each is indexed again.
    for (StringId i = 0; i < dump_.strings.size(); ++i) strings_.emplace(dump_.strings[i], i);
    for (uint32_t g = 0; g < dump_.groups.size(); ++g)
        groups_.emplace(uint64_t(dump_.groups[g].name) << 32 | dump_.groups[g].desc, g);
    std::vector<TensorShapes> shapes;
    shapes.swap(dump_.shapes);
    for (TensorShapes& s : shapes) this->shapes(std::move(s));
    if (dump_.stacks.empty()) dump_.stacks.emplace_back();
    std::vector<std::vector<Frame>> stacks;
    stacks.swap(dump_.stacks);
    dump_.stacks.emplace_back();
    for (size_t i = 1; i < stacks.size(); ++i) stack(std::move(stacks[i]));
}

StringId FlightDumpBuilder::string(std::string_view s) {
    auto [it, added] = strings_.try_emplace(std::string(s), StringId(dump_.strings.size()));
    if (added) dump_.strings.emplace_back(s);
    return it->second;
}

uint32_t FlightDumpBuilder::group(std::string_view name, std::string_view desc) {
    const GroupRef ref{string(name), string(desc)};
    auto [it, added] = groups_.try_emplace(uint64_t(ref.name) << 32 | ref.desc, uint32_t(dump_.groups.size()));
    if (added) dump_.groups.push_back(ref);
    return it->second;
}

namespace {
void append_sizes(std::string& key, const std::vector<std::vector<int64_t>>& sizes) {
    for (const auto& tensor : sizes) {
        key += '[';
        for (int64_t d : tensor) key += std::to_string(d) + ',';
        key += ']';
    }
    key += '|';
}
void append_ids(std::string& key, const std::vector<StringId>& ids) {
    for (StringId id : ids) key += std::to_string(id) + ',';
    key += '|';
}
}  // namespace

uint32_t FlightDumpBuilder::shapes(TensorShapes&& s) {
    std::string key;
    append_sizes(key, s.input_sizes);
    append_sizes(key, s.output_sizes);
    append_ids(key, s.input_dtypes);
    append_ids(key, s.output_dtypes);
    auto [it, added] = shapes_.try_emplace(std::move(key), uint32_t(dump_.shapes.size()));
    if (added) dump_.shapes.push_back(std::move(s));
    return it->second;
}

uint32_t FlightDumpBuilder::stack(const std::vector<Frame>& frames) {
    if (frames.empty()) return 0;
    key_.assign(reinterpret_cast<const char*>(frames.data()), frames.size() * sizeof(Frame));
    if (const auto it = stacks_.find(key_); it != stacks_.end()) return it->second;
    stacks_.emplace(key_, uint32_t(dump_.stacks.size()));
    dump_.stacks.push_back(frames);
    return uint32_t(dump_.stacks.size() - 1);
}

uint32_t FlightDumpBuilder::stack(std::vector<Frame>&& frames) {
    const std::vector<Frame>& view = frames;
    return stack(view);
}

std::string_view op_short_name(std::string_view profiling_name) {
    std::string_view s = profiling_name;
    if (const size_t colon = s.find(':'); colon != std::string_view::npos) s.remove_prefix(colon + 1);
    if (const size_t space = s.find(' '); space != std::string_view::npos) s = s.substr(0, space);
    return s;
}

bool parse_p2p_peers(std::string_view profiling_name, int& self, int& peer) {
    const size_t space = profiling_name.rfind(' ');
    if (space == std::string_view::npos) return false;
    const std::string_view sides = profiling_name.substr(space + 1);
    size_t arrow = sides.find("->");
    const bool backwards = arrow == std::string_view::npos;
    if (backwards) arrow = sides.find("<-");
    if (arrow == std::string_view::npos) return false;
    int first = 0, second = 0;
    const char* a = sides.data();
    const auto r1 = std::from_chars(a, a + arrow, first);
    const auto r2 = std::from_chars(a + arrow + 2, a + sides.size(), second);
    if (r1.ec != std::errc{} || r1.ptr != a + arrow || r2.ec != std::errc{} || r2.ptr != a + sides.size()) return false;
    const bool receive = op_short_name(profiling_name).find("recv") != std::string_view::npos;
    self = receive && !backwards ? second : first;
    peer = receive && !backwards ? first : second;
    return true;
}

}  // namespace us::flight
