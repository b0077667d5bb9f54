#include "app/gui/app_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "app/cli/default_run.h"
#include "engine/core/check.h"
#include "engine/train/cli.h"
#include "profiler/transport/protocol.h"
#include "profiler/transport/socket.h"

namespace us::gui {

// ---- LaunchSettings

std::vector<std::string> LaunchSettings::train_args() const {
    std::vector<std::string> a = {"--preset", preset};
    auto add = [&](const char* flag, auto value) { a.insert(a.end(), {flag, fmt::format("{}", value)}); };
    if (layers) add("--layers", layers);
    if (hidden) add("--hidden", hidden);
    if (heads) add("--heads", heads);
    if (seq) add("--seq", seq);
    if (batch) add("--batch", batch);
    if (steps) add("--steps", steps);
    add("--grad-accum", grad_accum);
    add("--dp", dp);
    if (pp > 1) {
        add("--pp", pp);
        add("--pp-schedule", pp_schedule);
        add("--pp-chunks", pp_chunks);
    }
    if (tp > 1) add("--tp", tp);
    if (sp) a.push_back("--sp");
    if (cp > 1) {
        add("--cp", cp);
        add("--cp-balance", cp_balance);
    }
    if (moe_experts > 0) {
        add("--moe-experts", moe_experts);
        add("--moe-topk", moe_topk);
        add("--moe-every", moe_every);
        add("--moe-capacity-factor", moe_capacity_factor);
        add("--moe-aux-loss-coef", moe_aux_loss_coef);
    }
    if (ep > 1) add("--ep", ep);
    add("--zero", zero);
    add("--recompute", recompute);
    if (attention != "naive") add("--attention", attention);
    add("--precision", precision);
    add("--bucket-mb", bucket_mb);
    if (!overlap) a.push_back("--no-overlap");
    if (!save_path.empty()) {
        a.insert(a.end(), {"--save", save_path});
        if (save_every > 0) add("--save-every", save_every);
    }
    if (!load_path.empty()) a.insert(a.end(), {"--load", load_path});
    a.insert(a.end(), extra_args.begin(), extra_args.end());
    return a;
}

TrainConfig LaunchSettings::resolve() const {
    const auto args = train_args();
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& s : args) argv.push_back(s.c_str());
    ParsedTrainArgs parsed = parse_train_args(int(argv.size()), argv.data());
    parsed.cmd.config.validate();
    validate_layout(parsed.cmd.config.parallel, parsed.cmd.config.parallel.world());
    return parsed.cmd.config;
}

std::string LaunchSettings::problem() const {
    try {
        resolve();
    } catch (const UserError& e) {
        return e.what();
    }
    return {};
}

LaunchSettings LaunchSettings::from_args(const std::vector<std::string>& args) {
    LaunchSettings s;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& k = args[i];
        if (k == "--no-overlap") {
            s.overlap = false;
            continue;
        }
        if (k == "--sp") {
            s.sp = true;
            continue;
        }
        const bool is_switch = k == "--fp32-grad-accum" || k == "--quiet";
        if (is_switch || i + 1 >= args.size() || k.rfind("--", 0) != 0) {
            s.extra_args.push_back(k);
            continue;
        }
        const std::string& v = args[++i];
        auto as_int = [&] { return std::atoi(v.c_str()); };
        if (k == "--preset") s.preset = v;
        else if (k == "--steps") s.steps = as_int();
        else if (k == "--dp") s.dp = as_int();
        else if (k == "--pp") s.pp = as_int();
        else if (k == "--tp") s.tp = as_int();
        else if (k == "--cp") s.cp = as_int();
        else if (k == "--cp-balance") s.cp_balance = v;
        else if (k == "--ep") s.ep = as_int();
        else if (k == "--moe-experts") s.moe_experts = as_int();
        else if (k == "--moe-topk") s.moe_topk = as_int();
        else if (k == "--moe-every") s.moe_every = as_int();
        else if (k == "--moe-capacity-factor") s.moe_capacity_factor = float(std::atof(v.c_str()));
        else if (k == "--moe-aux-loss-coef") s.moe_aux_loss_coef = float(std::atof(v.c_str()));
        else if (k == "--zero") s.zero = as_int();
        else if (k == "--grad-accum") s.grad_accum = as_int();
        else if (k == "--batch") s.batch = as_int();
        else if (k == "--layers") s.layers = as_int();
        else if (k == "--hidden") s.hidden = as_int();
        else if (k == "--heads") s.heads = as_int();
        else if (k == "--seq") s.seq = as_int();
        else if (k == "--precision") s.precision = v;
        else if (k == "--recompute") s.recompute = v;
        else if (k == "--attention") s.attention = v;
        else if (k == "--pp-schedule") s.pp_schedule = v;
        else if (k == "--pp-chunks") s.pp_chunks = as_int();
        else if (k == "--bucket-mb") s.bucket_mb = float(std::atof(v.c_str()));
        else if (k == "--save") s.save_path = v;
        else if (k == "--save-every") s.save_every = as_int();
        else if (k == "--load") s.load_path = v;
        else s.extra_args.insert(s.extra_args.end(), {k, v});
    }
    return s;
}

LaunchSettings LaunchSettings::from_config(const nlohmann::json& config) {
    // The run's resolved settings (ultrascope-train --print-config, as a trace's metadata keeps them): its preset,
    // then the flags that turn the preset into the run, written by the trainer's own flag table.
    TrainConfig run;
    apply_config_json(run, config, "the trace's settings");
    // Where and how it ran, not what: the threads and progress mode are this machine's, the device may differ.
    const TrainConfig defaults;
    run.threads = defaults.threads, run.device = defaults.device, run.parallel.comm_progress = defaults.parallel.comm_progress;
    // The flags are relative to what the panel launches when only the preset is set (its own defaults, e.g. dp 2,
    // resolved by the trainer's parser), so every field that differs from the panel's default is given.
    LaunchSettings blank;
    blank.preset = config.value("preset", std::string());
    std::vector<std::string> args = {"--preset", blank.preset};
    TrainConfig base;
    try {
        base = blank.resolve();
    } catch (const UserError&) {  // no such preset here: flags over the bare defaults, without it
        args.clear();
    }
    const auto flags = train_args_of(run, base);
    args.insert(args.end(), flags.begin(), flags.end());
    return from_args(args);
}

// ---- AppState

AppState::AppState(const GuiOptions& options) : m_options(options) {
    // Command-line training flags seed the panel where they map onto it; the rest travel as extra arguments.
    const app::DefaultRun run = app::default_run(options.ranks, options.train_args);
    settings = LaunchSettings::from_args(run.args);
    settings.launcher = options.launcher;
    settings.hostfile = options.hostfile;
    settings.stream_listen = options.stream_listen;
    if (!options.open_trace.empty()) open_trace(options.open_trace);
    else if (options.launch) launch();
    if (!options.listen.empty()) attach(options.listen);
}

AppState::~AppState() {
    if (m_loading.valid()) m_loading.wait();
    m_worker.wait();
}

void AppState::message(const std::string& text) {
    log.push_back(text);
    while (log.size() > 400) log.pop_front();
}

void AppState::fail(const std::string& text) {
    error = text;
    message("error: " + text);
}

const prof::TraceStore* AppState::store() const {
    switch (m_source) {
        case Source::launched:
        case Source::attached: return m_live ? &m_live->store() : nullptr;
        case Source::file: return m_file_store.get();
        default: return nullptr;
    }
}

bool AppState::running() const { return m_source == Source::launched && m_live && !m_live->finished(); }

std::optional<AppState::Checkpoint> AppState::last_checkpoint() const {
    if (m_source != Source::launched || !m_live || launched_settings.save_path.empty()) return std::nullopt;
    const auto latest = m_live->store().latest_counter("checkpoint_step");
    if (!latest) return std::nullopt;
    return Checkpoint{int(latest->second.value), launched_settings.save_path};
}

void AppState::resume_from_checkpoint() {
    const auto checkpoint = last_checkpoint();
    if (!checkpoint) return;
    settings = launched_settings;
    settings.load_path = checkpoint->path;  // the same --steps: the schedule continues where it stopped
    message(fmt::format("resuming from {} (step {})", checkpoint->path, checkpoint->step));
    launch();
}

void AppState::launch() {
    if (const std::string why = settings.problem(); !why.empty()) {
        fail("cannot launch: " + why);
        return;
    }
    stop();
    archive_run();
    app::LiveRunOptions o;
    o.launch.ranks = settings.ranks();
    o.store.max_bytes = m_options.store_cap_bytes;
    o.launch.launcher = settings.launcher;
    o.launch.hostfile = settings.hostfile;
    o.listen_host = settings.stream_listen;
    o.launch.train_args = settings.train_args();
    try {
        m_live = std::make_unique<app::LiveRun>(o);
    } catch (const UserError& e) {
        fail(e.what());
        m_live.reset();
        m_source = Source::none;
        return;
    }
    error.clear();
    m_source = Source::launched;
    m_archived = false;
    launched_settings = settings;
    ++m_run_counter;
    m_source_label = fmt::format("run {}: {} ({} rank{})", m_run_counter, describe_config(settings.resolve().to_json()),
                                 settings.ranks(), settings.ranks() > 1 ? "s" : "");
    message(fmt::format("launched {}; trace {}", m_source_label, m_live->trace_path()));
    follow = true;
    m_seen_version = UINT64_MAX;
    m_memory.clear();
    m_process.clear();
    m_report = prof::Report{};
    m_training.clear();
}

void AppState::stop() {
    // Every change of source (launch, attach, open, detach) starts here: a derived build may be reading the store
    // that is about to change or go.
    m_worker.wait();
    if (m_live && m_source == Source::launched && !m_live->finished()) {
        message("stopping " + m_source_label);
        m_live->stop();
        for (int i = 0; i < 100 && !m_live->finished(); ++i) m_live->pump();
    }
}

void AppState::attach(const std::string& listen) {
    stop();
    archive_run();
    app::LiveRunOptions o;
    o.attach_only = true;
    o.store.max_bytes = m_options.store_cap_bytes;
    try {
        if (listen.find(':') != std::string::npos) {
            const prof::Endpoint e = prof::parse_endpoint(listen);
            o.listen_host = e.host;
            o.listen_port = e.port;
        } else {
            o.listen_port = std::atoi(listen.c_str());
        }
        if (const char* t = std::getenv("ULTRASCOPE_TOKEN"); t && std::string(t).size() == prof::kTokenBytes) o.token = t;
        m_live = std::make_unique<app::LiveRun>(o);
    } catch (const UserError& e) {
        fail(e.what());
        return;
    }
    error.clear();
    m_source = Source::attached;
    m_archived = false;
    ++m_run_counter;
    m_source_label = fmt::format("attached on {}:{}", o.listen_host, m_live->port());
    message(fmt::format("listening on {}:{}; start ranks elsewhere with ULTRASCOPE_TOKEN={} and --connect {}:{}",
                        o.listen_host, m_live->port(), m_live->token(), o.listen_host, m_live->port()));
    m_seen_version = UINT64_MAX;
    m_memory.clear();
    m_process.clear();
}

void AppState::detach() {
    if (m_source != Source::attached) return;
    stop();
    archive_run();
    m_live.reset();
    m_source = Source::none;
}

void AppState::open_trace(const std::string& path) {
    if (m_loading.valid()) return;
    m_loading_path = path;
    message("opening " + path);
    // Off the frame loop: a large trace takes seconds to read.
    const prof::TraceStoreOptions store_options{m_options.store_cap_bytes};
    m_loading = std::async(std::launch::async, [path, store_options]() -> std::pair<std::unique_ptr<prof::TraceStore>, std::string> {
        auto store = std::make_unique<prof::TraceStore>(store_options);
        try {
            for (const auto& w : prof::load_trace(path, *store)) (void)w;
        } catch (const UserError& e) {
            return {nullptr, e.what()};
        } catch (const std::exception& e) {
            return {nullptr, std::string("cannot read the trace: ") + e.what()};
        }
        return {std::move(store), std::string()};
    });
}

void AppState::adopt(std::unique_ptr<prof::TraceStore> store, const std::string& label) {
    stop();
    archive_run();
    m_live.reset();
    m_file_store = std::move(store);
    m_source = Source::file;
    // The launch panel now shows the opened run's settings: Relaunch reproduces it.
    if (const auto& meta = m_file_store->run_metadata(); meta.contains("config") && meta["config"].is_object()) {
        const LaunchSettings where = settings;
        try {
            settings = LaunchSettings::from_config(meta["config"]);
            settings.launcher = where.launcher;
            settings.hostfile = where.hostfile;
            settings.stream_listen = where.stream_listen;
        } catch (const std::exception& e) {
            settings = where;
            message(std::string("the trace's settings could not be read into the launch panel: ") + e.what());
        }
    }
    m_archived = false;
    m_source_label = "trace " + label;
    error.clear();
    message(fmt::format("opened {}: {} spans from {} rank(s)", label, m_file_store->span_count(),
                        m_file_store->ranks().size()));
    m_seen_version = UINT64_MAX;
    m_memory.clear();
    m_process.clear();
    follow = false;
    refresh_derived(true);
    fit_all();
}

void AppState::archive_run() {
    // A run's figures go to the comparison when it ends or is replaced, once.
    const prof::TraceStore* s = store();
    if (m_archived || !s || s->rank_count() == 0) return;
    refresh_derived(true);
    const double loss = m_training.empty() ? 0.0 : m_training.back().loss;
    runs.push_back(summarize_run(m_report, m_source_label, m_live ? m_live->trace_path() : m_loading_path, loss));
    m_archived = true;
}

void AppState::update() {
    if (m_loading.valid() && m_loading.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        auto [store, why] = m_loading.get();
        if (!store) fail(why);
        else adopt(std::move(store), m_loading_path);
    }
    if (m_worker.busy()) refresh_derived(false);  // installs a finished build
    // The store stays as it is while a build reads it; what arrives meanwhile waits in the listener.
    if (m_live && !m_worker.busy()) {
        m_live->pump();
        for (auto& m : m_live->take_messages()) message(m);
        if (m_source == Source::launched && m_live->finished() && !m_archived) {
            const int code = m_live->result_code();
            if (code != 0) {
                std::string lost;
                for (const auto& l : m_live->lost_ranks()) lost += "; " + l;
                fail(fmt::format("the run failed (exit code {}){}", m_live->exit_code().value_or(-1), lost));
            } else {
                message("run finished: " + m_source_label);
            }
            refresh_derived(true);
            archive_run();
        }
    }
    refresh_derived(false);
    // Auto-relaunch: once the settings have differed from the running ones and stayed put for 0.8 s.
    if (!(settings == m_pending)) {
        m_pending = settings;
        m_pending_since = std::chrono::steady_clock::now();
    }
    if (auto_relaunch && m_source != Source::file && m_source != Source::attached && !(settings == launched_settings) &&
        std::chrono::steady_clock::now() - m_pending_since > std::chrono::milliseconds(800) && settings.problem().empty())
        launch();
}

void AppState::refresh_derived(bool force) {
    const prof::TraceStore* s = store();
    if (!s) return;
    if (force) {
        m_worker.wait();
        install(build_derived(*s));
        return;
    }
    if (m_worker.busy()) {
        try {
            if (auto d = m_worker.take()) install(std::move(*d));
        } catch (const std::exception& e) {
            fail(std::string("cannot analyse the trace: ") + e.what());
        }
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (s->version() == m_seen_version || now - m_last_refresh < std::chrono::milliseconds(250)) return;
    m_last_refresh = now;
    m_worker.start(*s);
}

void AppState::install(DerivedData&& d) {
    const prof::TraceStore* s = store();
    m_seen_version = d.store_version;
    ++m_data_version;
    m_report = std::move(d.report);
    m_training = std::move(d.training);
    m_memory = std::move(d.memory);
    m_process = std::move(d.process);
    if (follow && s && s->rank_count() > 0) {
        // Keep the last three steps (or everything, early on) in view.
        const int64_t end = s->end_time();
        int64_t begin = s->origin();
        for (const auto& r : m_report.ranks)
            if (r.steps.size() > 3) begin = std::max(begin, r.steps[r.steps.size() - 3].begin);
        view_t0 = begin;
        view_t1 = std::max(end, begin + 1);
    }
}

const std::vector<prof::MemorySample>& AppState::memory_timeline(int rank) {
    static const std::vector<prof::MemorySample> empty;
    auto it = m_memory.find(rank);
    return it == m_memory.end() ? empty : it->second;
}

const std::vector<prof::ProcessSample>& AppState::process_timeline(int rank) {
    static const std::vector<prof::ProcessSample> empty;
    auto it = m_process.find(rank);
    return it == m_process.end() ? empty : it->second;
}

const PipelineDiagram& AppState::theory_diagram() {
    if (m_theory.version != m_data_version) {
        m_theory.version = m_data_version;
        m_theory.diagram = gui::theory_diagram(m_report.predict_input);
    }
    return m_theory.diagram;
}

const PipelineDiagram& AppState::measured_diagram(int step) {
    // Steps finish in order, so the last step every stage of replica 0 has finished bounds the ones to show.
    int complete = INT32_MAX;
    for (const auto& r : m_report.ranks)
        if (r.coords.value("dp", 0) == 0) complete = std::min(complete, r.steps.empty() ? 0 : r.steps.back().step);
    if (complete == INT32_MAX) complete = 0;
    if (step <= 0 || step > complete) step = complete;
    const prof::TraceStore* s = store();
    if (m_measured.version != m_data_version || m_measured.step != step) {
        m_measured.version = m_data_version;
        m_measured.step = step;
        m_measured.diagram = s && step > 0 ? gui::measured_diagram(*s, m_report, step) : PipelineDiagram{};
    }
    return m_measured.diagram;
}

const std::vector<Gap>& AppState::idle_gaps(int rank, int64_t min_ns) {
    static const std::vector<Gap> empty;
    const prof::TraceStore* s = store();
    if (!s || !s->rank(rank)) return empty;
    int64_t bucket = 1;
    while (bucket * 2 <= min_ns) bucket *= 2;
    GapCache& c = m_gaps[rank];
    if (c.version != m_data_version || c.min_ns != bucket) {
        const prof::RankTrace& rt = *s->rank(rank);
        const prof::LaneTrack& lane = rt.lanes[size_t(rt.work_lane())];
        c.gaps = gui::idle_gaps(lane, lane.first_begin(), lane.last_end(), bucket);
        c.version = m_data_version;
        c.min_ns = bucket;
    }
    return c.gaps;
}

void AppState::fit_all() {
    const prof::TraceStore* s = store();
    if (!s) return;
    view_t0 = s->origin();
    view_t1 = std::max(s->end_time(), view_t0 + 1);
    follow = false;
}

void AppState::fit_step(int step) {
    int64_t b = INT64_MAX, e = 0;
    for (const auto& r : m_report.ranks)
        for (const auto& st : r.steps)
            if (st.step == step) {
                b = std::min(b, st.begin);
                e = std::max(e, st.end);
            }
    if (e <= b) return;
    const int64_t margin = (e - b) / 50;
    view_t0 = b - margin;
    view_t1 = e + margin;
    follow = false;
}

int AppState::step_at(int64_t t) const {
    for (const auto& r : m_report.ranks)
        for (const auto& st : r.steps)
            if (t >= st.begin && t < st.end) return st.step;
    return 0;
}

void AppState::zoom(double factor, int64_t around) {
    const int64_t span = view_t1 - view_t0;
    const int64_t new_span = std::max<int64_t>(1000, int64_t(double(span) * factor));
    const double rel = span > 0 ? double(around - view_t0) / double(span) : 0.5;
    view_t0 = around - int64_t(rel * double(new_span));
    view_t1 = view_t0 + new_span;
    follow = false;
}

void AppState::pan(int64_t dt) {
    view_t0 += dt;
    view_t1 += dt;
    follow = false;
}

int AppState::exit_code() const {
    if (!error.empty() && m_source != Source::launched) return 2;
    if (m_live && m_source == Source::launched) return m_live->finished() ? m_live->result_code() : 1;
    return error.empty() ? 0 : 1;
}

}  // namespace us::gui
