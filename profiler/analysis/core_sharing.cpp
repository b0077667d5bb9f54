#include "profiler/analysis/core_sharing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>

namespace us::prof {

namespace {

constexpr int kMostCpus = 1 << 16;  // a list naming a CPU beyond this is not a machine's (Linux's own limit is 8192)

std::optional<int> parse_cpu(std::string_view s) {
    int v = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v >= kMostCpus) return std::nullopt;
    return v;
}

// "0-3" and "7" as ranks of ranks: "ranks 0-3", "ranks 0, 2".
std::string ranks_words(const std::vector<int>& ranks) {
    if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
    const bool consecutive = ranks.back() - ranks.front() + 1 == int(ranks.size());
    return consecutive ? fmt::format("ranks {}-{}", ranks.front(), ranks.back())
                       : fmt::format("ranks {}", fmt::join(ranks, ", "));
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view list) {
    std::vector<int> cpus;
    while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        const size_t dash = item.find('-');
        const auto first = parse_cpu(item.substr(0, dash));
        const auto last = dash == std::string_view::npos ? first : parse_cpu(item.substr(dash + 1));
        if (!first || !last || *last < *first) return {};
        for (int c = *first; c <= *last; ++c) cpus.push_back(c);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

std::vector<CoreSharing> core_sharing(const std::vector<RankDigest>& digests) {
    struct Machine {
        CoreSharing sharing;
        std::set<int> cpus;
    };
    std::map<std::string, Machine> machines;
    for (const RankDigest& d : digests) {
        if (d.machine.empty() || d.threads <= 0) continue;
        const std::vector<int> cpus = parse_cpu_list(d.cpus);
        if (cpus.empty()) continue;
        Machine& m = machines[d.machine];
        m.sharing.ranks.push_back(d.rank);
        if (std::find(m.sharing.hosts.begin(), m.sharing.hosts.end(), d.host) == m.sharing.hosts.end())
            m.sharing.hosts.push_back(d.host);
        m.sharing.threads += d.threads;
        m.cpus.insert(cpus.begin(), cpus.end());
    }
    std::vector<CoreSharing> out;
    for (auto& [id, m] : machines) {
        m.sharing.cores = int(m.cpus.size());
        std::sort(m.sharing.ranks.begin(), m.sharing.ranks.end());
        out.push_back(std::move(m.sharing));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.ranks.front() < b.ranks.front(); });
    return out;
}

const CoreSharing* most_oversubscribed(const std::vector<CoreSharing>& machines) {
    const CoreSharing* most = nullptr;
    for (const CoreSharing& m : machines)
        if (m.oversubscribed() && (!most || double(m.threads) / m.cores > double(most->threads) / most->cores))
            most = &m;
    return most;
}

std::string oversubscribed_words(const std::vector<CoreSharing>& machines) {
    const CoreSharing* m = most_oversubscribed(machines);
    if (!m) return "";
    return fmt::format("this run's own {} compute threads share {} core{} ({})", m->threads, m->cores,
                       m->cores == 1 ? "" : "s", ranks_words(m->ranks));
}

nlohmann::json core_sharing_json(const std::vector<CoreSharing>& machines) {
    nlohmann::json out = nlohmann::json::array();
    for (const CoreSharing& m : machines)
        out.push_back({{"ranks", m.ranks},
                       {"hosts", m.hosts},
                       {"threads", m.threads},
                       {"cores", m.cores},
                       {"oversubscribed", m.oversubscribed()}});
    return out;
}

}  // namespace us::prof
