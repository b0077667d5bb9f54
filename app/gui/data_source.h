// Where the GUI's data comes from, one at a time: a run it launched, runs attached from elsewhere (a listener), or
// a trace file (read on a worker thread: a large one takes seconds). Nothing here blocks the frame: the live run
// is pumped once per frame and the child is polled. Whoever derives data from the store (DerivedViews) must have
// finished reading it before a call that replaces the source.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/model/launch_settings.h"
#include "app/gui/message_log.h"
#include "app/launch/live_run.h"

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
    void close();                            // no source
    // Stops a launched run that is still going (its ranks end; the store keeps what arrived).
    void stop();
    // Starts reading a trace file; take_loaded() hands it over when read. Ignored while one is loading.
    void open_trace(const std::string& path);
    // The trace that finished loading (then the path it came from), or nullptr (a failure is logged).
    std::unique_ptr<prof::TraceStore> take_loaded(std::string& path);
    // Moves what arrived into the store; the run's messages go to the log. False when nothing changed.
    bool pump();

    Source kind() const { return m_kind; }
    const prof::TraceStore* store() const;
    const app::LiveRun* live() const { return m_live.get(); }
    bool running() const { return m_kind == Source::launched && m_live && !m_live->finished(); }
    bool loading() const { return m_loading.valid(); }
    const std::string& label() const { return m_label; }
    // The trace file behind the current data ("" when none).
    std::string trace_path() const;

private:
    MessageLog& m_log;
    size_t m_store_cap_bytes;
    Source m_kind = Source::none;
    std::string m_label;
    std::unique_ptr<app::LiveRun> m_live;
    std::unique_ptr<prof::TraceStore> m_file_store;
    std::string m_file_path;
    struct Loaded {
        std::unique_ptr<prof::TraceStore> store;  // null on failure
        std::string error;
        std::vector<std::string> warnings;
    };
    std::future<Loaded> m_loading;
    std::string m_loading_path;
};

}  // namespace us::gui
