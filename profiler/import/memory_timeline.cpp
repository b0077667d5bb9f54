// Reading the memory profiler's timeline export (memory_timeline.h).
#include "profiler/import/memory_timeline.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/trace/run_info.h"

namespace us::prof {

namespace fs = std::filesystem;

const char* profiler_category_name(ProfilerCategory c) {
    static constexpr const char* kNames[] = {"parameter",  "optimizer_state", "input",           "temporary",
                                             "activation", "gradient",        "autograd_detail", "unknown"};
    return kNames[size_t(c)];
}

const char* profiler_category_label(ProfilerCategory c) {
    static constexpr const char* kLabels[] = {"parameters",  "optimizer state", "inputs",          "temporaries",
                                              "activations", "gradients",       "autograd detail", "unknown"};
    return kLabels[size_t(c)];
}

int64_t MemoryTimeline::total(size_t row) const {
    int64_t sum = 0;
    for (size_t c = 0; c < kProfilerCategories; ++c) sum += bytes[row * kProfilerCategories + c];
    return sum;
}

TimelinePeaks timeline_peaks(const MemoryTimeline& t) {
    TimelinePeaks p;
    if (t.size() == 0) return p;
    p.total_peak_bytes = INT64_MIN;
    for (size_t c = 0; c < kProfilerCategories; ++c) p.peak_bytes[c] = INT64_MIN;
    for (size_t r = 0; r < t.size(); ++r) {
        const int64_t total = t.total(r);
        if (total > p.total_peak_bytes) p.total_peak_bytes = total, p.total_peak_row = r;
        for (size_t c = 0; c < kProfilerCategories; ++c)
            p.peak_bytes[c] = std::max(p.peak_bytes[c], t.at(r, ProfilerCategory(c)));
    }
    p.total_peak_time_us = t.times_us[p.total_peak_row];
    for (size_t c = 0; c < kProfilerCategories; ++c) p.at_total_peak[c] = t.at(p.total_peak_row, ProfilerCategory(c));
    return p;
}

namespace {

constexpr size_t kColumns = kProfilerCategories + 1;  // column 0 is unused by torch

// A cursor over the export's text: only the shape torch writes, `[[t, ...], [[b0, ..., b8], ...]]`.
class TimelineParser {
public:
    TimelineParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

    MemoryTimeline parse() {
        MemoryTimeline out;
        out.source = source_;
        expect('[', "the export (a list [times, sizes])");
        expect('[', "the times (a list of microseconds)");
        if (!accept(']')) {
            do out.times_us.push_back(integer("times"));
            while (accept(','));
            expect(']', "the end of the times");
        }
        expect(',', "the sizes after the times");
        expect('[', "the sizes (a list of rows of bytes per category)");
        out.bytes.reserve(out.times_us.size() * kProfilerCategories);
        size_t rows = 0;
        if (!accept(']')) {
            do {
                const std::string where = fmt::format("sizes[{}]", rows);
                expect('[', where.c_str());
                size_t cols = 0;
                do {
                    const int64_t v = integer(where.c_str());
                    if (cols > 0 && cols < kColumns) out.bytes.push_back(v);
                    ++cols;
                } while (accept(','));
                expect(']', where.c_str());
                US_CHECK_INPUT(cols == kColumns,
                               "{}: {} has {} columns, expected {} (torch's layout: an unused column, then parameter, "
                               "optimizer state, input, temporary, activation, gradient, autograd detail, unknown); "
                               "re-export with prof.export_memory_timeline(path, device)",
                               source_, where, cols, kColumns);
                ++rows;
            } while (accept(','));
            expect(']', "the end of the sizes");
        }
        expect(']', "the end of the export");
        skip_blanks();
        US_CHECK_INPUT(pos_ == s_.size(), "{}: offset {}: unexpected text after the export's list", source_, pos_);
        US_CHECK_INPUT(rows == out.times_us.size(), "{}: {} times but {} rows of sizes: the two lists must match",
                       source_, out.times_us.size(), rows);
        US_CHECK_INPUT(rows > 0,
                       "{}: the timeline is empty (no times): was the profiler run with profile_memory=True, "
                       "record_shapes=True and with_stack=True, and did the device see allocations?",
                       source_);
        for (size_t i = 1; i < rows; ++i)
            US_CHECK_INPUT(out.times_us[i] >= out.times_us[i - 1],
                           "{}: times[{}] = {} comes before times[{}] = {}: the export's times are in order", source_,
                           i, out.times_us[i], i - 1, out.times_us[i - 1]);
        return out;
    }

private:
    void skip_blanks() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
            ++pos_;
    }
    bool accept(char c) {
        skip_blanks();
        if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
        return false;
    }
    void expect(char c, const char* what) {
        if (accept(c)) return;
        fail(fmt::format("expected '{}' for {}, found {}", c, what, found()));
    }
    std::string found() const {
        if (pos_ >= s_.size()) return "the end of the file (cut short?)";
        const std::string_view near = s_.substr(pos_, 16);
        std::string shown;
        for (char ch : near) shown += (ch >= 32 && ch < 127) ? ch : '?';
        return "'" + shown + "'";
    }
    int64_t integer(const char* where) {
        skip_blanks();
        const size_t start = pos_;
        const bool negative = pos_ < s_.size() && s_[pos_] == '-';
        if (negative) ++pos_;
        uint64_t v = 0;
        size_t digits = 0;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
            if (v > uint64_t(kTimelineMaxValue)) fail(fmt::format("{}: a number out of range (beyond 2^53)", where));
            v = v * 10 + uint64_t(s_[pos_++] - '0');
            ++digits;
        }
        if (digits == 0 || (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))) {
            pos_ = start;
            fail(fmt::format("{}: expected a whole number, found {}", where, found()));
        }
        return negative ? -int64_t(v) : int64_t(v);
    }
    [[noreturn]] void fail(const std::string& what) const {
        fail_user("{}: offset {}: {} (not a memory timeline as torch's export_memory_timeline writes it)", source_,
                  pos_, what);
    }

    std::string_view s_;
    const std::string& source_;
    size_t pos_ = 0;
};

std::string read_all(const std::string& path) {
    ByteSource source(path);
    std::string text;
    char buf[1 << 16];
    while (const size_t n = source.read(buf, sizeof buf)) {
        US_CHECK_INPUT(text.size() + n <= (size_t(1) << 32),
                       "{}: larger than 4 GiB uncompressed: not a memory timeline", path);
        text.append(buf, n);
    }
    return text;
}

bool has_timeline_name(const fs::path& p) {
    const std::string n = p.filename().string();
    auto ends = [&](std::string_view s) {
        return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    return n.find("memory_timeline") != std::string::npos && (ends(".json") || ends(".json.gz"));
}

}  // namespace

MemoryTimeline parse_memory_timeline(std::string_view json, const std::string& source) {
    return TimelineParser(json, source).parse();
}

MemoryTimeline load_memory_timeline(const std::string& path) {
    const std::string text = read_all(path);
    MemoryTimeline t = parse_memory_timeline(text, path);
    t.rank = rank_from_file_name(path);
    return t;
}

bool is_memory_timeline_file(const std::string& path, bool sniff) {
    if (has_timeline_name(path)) return true;
    if (!sniff) return false;
    try {  // the export is a list of lists; a Kineto trace is an object
        ByteSource source(path);
        char head[256];
        const size_t n = source.read(head, sizeof head);
        size_t i = 0, brackets = 0;
        for (; i < n && brackets < 2; ++i) {
            if (head[i] == '[')
                ++brackets;
            else if (head[i] != ' ' && head[i] != '\n' && head[i] != '\r' && head[i] != '\t')
                return false;
        }
        return brackets == 2;
    } catch (const UserError&) {
        return false;  // unreadable: the trace reader says what is wrong with it
    }
}

std::vector<std::string> find_memory_timelines(const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    for (const auto& p : paths) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
                 !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
                if (it->is_regular_file() && has_timeline_name(it->path())) out.push_back(it->path().string());
        } else if (fs::is_regular_file(p, ec) && is_memory_timeline_file(p, true)) {
            out.push_back(p);
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace us::prof
