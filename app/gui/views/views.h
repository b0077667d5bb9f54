// The views, one file each. Each draws into the current ImGui window from AppState and its view-models.
#pragma once

#include <nlohmann/json.hpp>

#include "app/gui/state/app_state.h"

namespace us::gui {

void draw_launch_panel(AppState& app);   // view_launch.cpp: settings, validation, launch/stop/relaunch, attach
void draw_memory_view(AppState& app);    // view_memory.cpp: memory anatomy
void draw_timeline_view(AppState& app);  // view_timeline.cpp: rank timelines
void draw_overlap_view(AppState& app);   // view_overlap.cpp: compute / overlapped / exposed / idle per rank
// view_overlap.cpp: a group's name in its table, with the nodes it spans ("dp (across 2 nodes)"): the collectives
// that crossed the inter-node link.
std::string overlap_group_label(const prof::RankReport& r, int group);
void draw_training_view(AppState& app);  // view_training.cpp: loss, tokens/s, step time, MFU
void draw_compare_view(AppState& app);   // view_compare.cpp: runs of the session side by side
void draw_experts_view(AppState& app);   // view_experts.cpp: router load per MoE layer, expert time per rank
void draw_ops_view(AppState& app);       // view_ops.cpp: where a rank's compute goes, op by op
void draw_ranks_view(AppState& app);     // view_ranks.cpp: who holds the run back, every rank by step
void draw_lessons_panel(AppState& app);  // view_lessons.cpp: a workshop lesson, its runs and its checked claims
void draw_planner_view(AppState& app);
void draw_snapshot_view(AppState& app);
// view_imported_memory.cpp: the memory view of an imported PyTorch trace ([memory] events and their categories)
void draw_imported_memory(AppState& app, const prof::RankTrace& rank);
// view_memory_categories.cpp: the memory profiler's categories over time beside an imported trace (measured)
void draw_memory_categories(AppState& app, const prof::RankTrace& rank);
bool memory_categories_loading();  // still reading them (a screenshot waits)
// What it read, as report --json's "memory_categories" (null before it read anything), for the tests.
nlohmann::json memory_categories_facts();  // view_snapshot.cpp: a PyTorch memory snapshot, per rank and device    //
                                           // view_planner.cpp: layouts of a model on a cluster, predicted
// view_schedule.cpp: the pipeline schedule, predicted above measured (step: see AppState::measured_diagram);
// false without a pipeline.
bool draw_pipeline_schedule(AppState& app, int step);
// One schedule diagram (stages, F/B/W boxes, each stage's bubble), `width` pixels wide.
void draw_pipeline_diagram(const PipelineDiagram& d, int chunks, float width);

// Shared drawing helpers (view_plot.cpp).
// provenance: "measured", "predicted", "formula" or "derived", shown beside the title and in the readout.
void draw_line_plot(const char* title, const float* xs, const float* ys, int n, ImU32 color, const char* unit,
                    float height, const char* provenance = "measured", const char* provenance_help = nullptr);
std::string format_duration_ns(double ns);

}  // namespace us::gui
