// The GUI's options, as `ultrascope [TRACE...] [GUI options] [training flags]` gives them (parsed by gui_args.cpp).
// Plain data: main.cpp's headless fallback (no display, or a build without the GUI) reads it too.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "app/launch/launch_options.h"
#include "app/report/report_options.h"

namespace us::gui {

struct GuiOptions {
    std::vector<std::string> open_trace;  // open this run instead of launching: a trace, or Kineto files/folders
    bool launch = true;                   // launch the default run at start (when no trace is opened)
    // The launched run's ranks (0: the default run's, app/launch/default_run.h) and where they run: -n, --hostfile,
    // --launcher, --stream-listen, --nodes, --inter-node-gbps (app/launch/launch_options.h; the launch panel's hosts).
    app::LaunchOptions run;
    std::vector<std::string> train_args;  // ultrascope-train flags of the launched run
    std::string listen;                   // [HOST:]PORT to listen on for runs started elsewhere (attach)
    std::string screenshot;               // write a PNG (and a .json of the views' regions) and exit
    std::string view = "all";             // with screenshot: one view alone (view_table.h), or all
    int fit_step = 0;                     // > 0: the time window shows this step once it is in
    bool exit_when_done = false;          // exit once the launched run has finished (with its result)
    int width = 1280, height = 800;
    float font_px = 0;  // --font-size: the UI font in pixels (0: 16 x the monitor's content scale)
    size_t store_cap_bytes = size_t(2) << 30;  // the trace store's memory cap (--store-cap-mib)
    app::ReportOptions report;     // the report's options the GUI takes (--microbatches; app/report/report_options.h)
    std::string lesson;            // --lesson NAME: open this workshop lesson and launch its first run
    bool lesson_all_runs = false;  // --lesson-runs all: then each later run in turn (the comparison)
    bool high_contrast = false;    // --high-contrast: the projector theme
    // --plan MODEL [--plan-cluster C] [--plan-gpus N]: open the Planner on that search
    std::string plan_model, plan_cluster = "h100-sxm";
    int plan_gpus = 64;
    bool plan_launch = false;  // --plan-launch: then launch the best layout this machine can run
    bool plan_show = false;    // --plan-show: then show the best fitting layout's predicted step in the views
    // --attach-job [--attach-agents HOST:PORT,... --attach-token T] [--capture-steps N]: open File > Attach to a
    // PyTorch job (no run launched) on this node's jobs or the agents', and capture N steps of the only job
    bool attach_job = false;
    std::string attach_agents, attach_token;
    int capture_steps = 0, capture_count = 1;  // --capture-count K: that many captures in a row
    double capture_timeout_s = 120;            // --capture-timeout S: as `ultrascope capture --timeout`
};

}  // namespace us::gui
