// A run opened from its digests (large_run.h).
#include "app/gui/state/large_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/core/check.h"
#include "profiler/import/run_files.h"

namespace us::gui {

bool LargeRun::wanted(const std::vector<std::string>& paths) {
    try {
        const prof::RunFiles files = prof::find_run_files(paths);
        return !files.ultrascope && files.files.size() > prof::kWholeRunRanks;
    } catch (const UserError&) {
        return false;  // the ordinary open says what is wrong
    }
}

void LargeRun::open(const std::vector<std::string>& paths, size_t store_cap_bytes) {
    close();
    m_open = true;
    m_label.clear();
    for (const auto& p : paths) m_label += (m_label.empty() ? "" : ", ") + p;
    m_files_total = prof::find_run_files(paths).files.size();
    m_files_done = 0;
    m_cancel = false;
    m_log.message(
        fmt::format("opening {} from its digests: {} rank files, more than the {} held whole; the Ranks view "
                    "shows every rank, and opens the ones you pick in the timeline",
                    m_label, m_files_total, prof::kWholeRunRanks));
    prof::DigestOptions options;
    options.store = prof::TraceStoreOptions{store_cap_bytes};
    options.files_done = &m_files_done;
    options.cancel = &m_cancel;
    m_job = std::async(std::launch::async, [paths, options] { return prof::digest_run(paths, options); });
}

void LargeRun::close() {
    if (m_job.valid()) {
        m_cancel = true;
        m_job.wait();
        m_job = {};
    }
    m_report.reset();
    m_open = false;
}

bool LargeRun::poll() {
    if (!m_job.valid() || m_job.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    try {
        prof::RunDigests run = m_job.get();
        for (const auto& w : run.warnings) m_log.message("warning: " + w);
        for (const auto& e : run.errors) m_log.fail(e);
        m_log.message(fmt::format("{}: {} ranks digested in {:.1f} s ({} from the cache), digests {:.1f} MB", m_label,
                                  run.ranks.size(), run.seconds, run.from_cache, double(run.digest_bytes) / 1e6));
        m_report = std::make_unique<const prof::DigestReport>(prof::digest_report(std::move(run)));
    } catch (const std::exception& e) {
        m_log.fail(fmt::format("cannot open {}: {}", m_label, e.what()));
        m_open = false;
    }
    return true;
}

std::vector<std::string> LargeRun::files_to_open(const std::vector<int>& ranks, bool with_peers) const {
    std::vector<std::string> out;
    if (!m_report) return out;
    std::set<int> wanted(ranks.begin(), ranks.end());
    if (with_peers) {
        // The ranks the chosen ones waited for: the straggler of each group they share with a chosen rank, and a
        // pipeline's neighbouring stages.
        for (const prof::Straggler& s : m_report->cross.blame.stragglers)
            if (s.stands_out) wanted.insert(s.rank);
        const std::set<int> chosen(ranks.begin(), ranks.end());
        // and the three ranks each chosen one waited for longest, from the matched waits
        std::map<int, std::map<int, int64_t>> waited_for;  // chosen rank -> rank waited for -> ns
        for (const prof::WaitEdge& e : m_report->cross.blame.edges)
            if (chosen.count(e.waiter)) waited_for[e.waiter][e.culprit] += e.wait_ns;
        for (const auto& [rank, peers] : waited_for) {
            std::vector<std::pair<int64_t, int>> by_wait;
            for (const auto& [peer, ns] : peers) by_wait.push_back({ns, peer});
            std::sort(by_wait.rbegin(), by_wait.rend());
            for (size_t i = 0; i < by_wait.size() && i < 3; ++i) wanted.insert(by_wait[i].second);
        }
        for (const prof::PipelineBlame& p : m_report->cross.blame.pipelines)
            for (size_t i = 0; i < p.ranks.size(); ++i)
                if (chosen.count(p.ranks[i])) {
                    if (i > 0) wanted.insert(p.ranks[i - 1]);
                    if (i + 1 < p.ranks.size()) wanted.insert(p.ranks[i + 1]);
                }
    }
    for (const prof::RankDigest& d : m_report->cross.digests)
        if (wanted.count(d.rank) && !d.file.empty()) out.push_back(d.file);
    return out;
}

}  // namespace us::gui
