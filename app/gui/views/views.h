// The views, one file each, and the panels of the left column: what the frame (platform/frame_layout.cpp) draws
// where the table of views (model/view_table.h) puts them. Each draws into the current ImGui window from AppState
// and its view-models; a view includes no other view (what several draw is in widgets/).
#pragma once

#include "app/gui/state/app_state.h"

namespace us::gui {

void draw_launch_panel(AppState& app);   // launch_panel.cpp: the source, settings, launch/stop/relaunch, messages
void draw_lessons_panel(AppState& app);  // lessons_panel.cpp: a workshop lesson, its runs and its checked claims
void draw_memory_view(AppState& app);    // memory.cpp: memory anatomy
void draw_timeline_view(AppState& app);  // timeline.cpp: rank timelines
void draw_overlap_view(AppState& app);   // overlap.cpp: compute / overlapped / exposed / idle per rank
void draw_training_view(AppState& app);  // training.cpp: loss, tokens/s, step time, MFU
void draw_compare_view(AppState& app);   // compare.cpp: runs of the session side by side
void draw_experts_view(AppState& app);   // experts.cpp: router load per MoE layer, expert time per rank
void draw_ops_view(AppState& app);       // ops.cpp: where a rank's compute goes, op by op
void draw_ranks_view(AppState& app);     // ranks.cpp: who holds the run back, every rank by step
void draw_hang_view(AppState& app);      // hang.cpp: what holds a hung job, from its Flight Recorder dumps
void draw_planner_view(AppState& app);   // planner.cpp: layouts of a model on a cluster, predicted
void draw_snapshot_view(AppState& app);  // snapshot.cpp: a PyTorch memory snapshot, per rank and device
void draw_attach_view(AppState& app);    // attach.cpp: a running PyTorch job's ranks, captured N steps at a time

}  // namespace us::gui
