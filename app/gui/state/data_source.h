// Where the GUI's data comes from, one at a time: a run it launched, runs attached from elsewhere (a listener), or
// a trace: an Ultrascope file, or PyTorch profiler files read a rank at a time on worker threads
// (prof::ProgressiveLoad), shown from the first rank on while the others arrive. Nothing here blocks the frame: the
// live run is pumped once per frame, the child is polled, finished ranks are merged between frames. Whoever derives
// data from the store (DerivedViews) must have finished reading it before a call that replaces the source.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/model/launch_settings.h"
#include "app/gui/state/message_log.h"
#include "app/launch/live_run.h"
#include "profiler/import/progressive_load.h"

namespace us::gui {

enum class Source { none, launched, attached, file };

class DataSource {
public:
    DataSource(MessageLog& log, size_t store_cap_bytes) : m_log(log), m_store_cap_bytes(store_cap_bytes) {}
    ~DataSource();

    // Each replaces the current source and says so in the log; on failure the log has the reason and the
    // return is false (a failed launch leaves no source).
    bool launch(const LaunchSettings& settings, const std::string& label);
    bool attach(const std::string& listen);  // [HOST:]PORT; ULTRASCOPE_TOKEN, when set, is the token to expect
    // A loaded trace (`path` its file), or one made here (a planner's prediction: no file, `path` empty). A trace
    // whose ranks say "predicted" is labelled so, wherever it came from.
    void adopt(std::unique_ptr<prof::TraceStore> store, const std::string& label, const std::string& path);
    void close();  // no source
    // Stops a launched run that is still going (its ranks end; the store keeps what arrived).
    void stop();
    // Starts reading a run (an Ultrascope trace, PyTorch profiler files or their folders); take_loaded() hands
    // over its store once its first ranks are read, pump_load() adds the others. A load under way is cancelled.
    void open_trace(const std::vector<std::string>& paths, const std::string& label = {});  // label: else the paths
    // The store of the run being opened, once its first ranks are read (then `label` names the run); else
    // nullptr. A run of which no file could be read ends here, its errors logged.
    std::unique_ptr<prof::TraceStore> take_loaded(std::string& label);
    // Merges the ranks read since the last call into the shown store (only while it is the loading run's, and only
    // while nothing else reads it: not during a derived build). True when this call ended the load: then its
    // warnings and errors (one per file that failed; the ranks read stay shown) are in the log.
    bool pump_load();
    // Stops a load under way (the window closes, another source is chosen); the ranks already shown stay.
    void cancel_load();
    // How far the load under way is, if one is.
    std::optional<prof::LoadProgress> load_progress() const;
    // Moves what arrived into the store; the run's messages go to the log. False when nothing changed.
    bool pump();

    Source kind() const { return m_kind; }
    const prof::TraceStore* store() const;
    const app::LiveRun* live() const { return m_live.get(); }
    bool running() const { return m_kind == Source::launched && m_live && !m_live->finished(); }
    bool loading() const { return m_load != nullptr; }
    const std::string& label() const { return m_label; }
    // The trace file behind the current data ("" when none).
    std::string trace_path() const;
    // The [memory] events of a PyTorch run's ranks, as its reader kept them (rank_file.h), once the whole run is
    // read (null before, and for other sources): what the memory view infers categories from.
    std::shared_ptr<const std::vector<prof::KinetoMemoryEvents>> memory_events() const { return m_memory_done; }

private:
    MessageLog& m_log;
    size_t m_store_cap_bytes;
    Source m_kind = Source::none;
    std::string m_label;
    std::unique_ptr<app::LiveRun> m_live;
    std::unique_ptr<prof::TraceStore> m_file_store;
    std::string m_file_path;
    void log_load_messages();

    std::unique_ptr<prof::ProgressiveLoad> m_load;
    std::string m_load_label;                        // the paths opened, for the log and the title
    const prof::TraceStore* m_load_store = nullptr;  // the store handed out by take_loaded, while it loads
    std::vector<prof::KinetoMemoryEvents> m_memory;  // the load's so far
    std::shared_ptr<const std::vector<prof::KinetoMemoryEvents>> m_memory_done;  // published when it ends
    void take_memory_events();
};

}  // namespace us::gui
