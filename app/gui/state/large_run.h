// A run of more rank files than the GUI holds whole (prof::kWholeRunRanks): its files are digested on worker threads
// (profiler/runs/run_digests.h; the digests cached beside the traces make a second open fast), the Ranks view shows
// every rank from the digests, and only the ranks a user opens (with the peers they waited for) are read whole
// into the timeline. Nothing here blocks the frame.
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/gui/state/message_log.h"
#include "profiler/runs/digest_report.h"

namespace us::gui {

class LargeRun {
public:
    explicit LargeRun(MessageLog& log) : m_log(log) {}
    ~LargeRun() { close(); }

    // True when `paths` name a run to open from digests (Kineto files beyond kWholeRunRanks).
    static bool wanted(const std::vector<std::string>& paths);
    void open(const std::vector<std::string>& paths, size_t store_cap_bytes);
    void close();  // another source replaces it; a digest job under way stops at its next file
    // Once per frame: installs the finished digests (true on the frame they arrive).
    bool poll();

    bool active() const { return m_open; }  // opened, digesting or digested
    bool digesting() const { return m_job.valid(); }
    size_t files_done() const { return m_files_done.load(); }
    size_t files_total() const { return m_files_total; }
    const prof::DigestReport* report() const { return m_report.get(); }
    const std::string& label() const { return m_label; }

    // The files of `ranks`, and with `with_peers` those of the named straggler, the three ranks each waited for
    // longest and its pipeline neighbours, for the timeline.
    std::vector<std::string> files_to_open(const std::vector<int>& ranks, bool with_peers) const;

private:
    MessageLog& m_log;
    bool m_open = false;
    std::string m_label;
    size_t m_files_total = 0;
    std::atomic<size_t> m_files_done{0};
    std::atomic<bool> m_cancel{false};
    std::future<prof::RunDigests> m_job;
    std::unique_ptr<const prof::DigestReport> m_report;
};

}  // namespace us::gui
