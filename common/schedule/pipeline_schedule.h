// Pipeline schedules as data: for each stage, the ordered actions of one training step. The executor runs them;
// the analysis and the GUI simulate the same lists to draw the theoretical schedule beside the measured one.
//   afab         all forwards, then all backwards (GPipe; Huang et al. 2019)
//   1f1b         warm-up forwards, then one forward / one backward, then cool-down backwards (PipeDream-Flush;
//                Narayanan et al. 2021): the bubble of AFAB with at most pp micro-batches of activations in flight
//   interleaved  1F1B over V model chunks per rank (Megatron-LM's interleaved schedule; Narayanan et al. 2021)
//   zb1          zero-bubble ZB-H1 (Qi et al. 2023): backward split into B (input gradients) and W (weight
//                gradients); later stages start their W passes later, filling the tail bubble at 1F1B's peak
//                memory (pp micro-batches in flight, now on every stage)
// Virtual stage k = chunk * pp + stage holds the k-th slice of the layers; micro-batches run 0..m-1 on a chunk.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/core/enum_names.h"

namespace us {

// The schedules, named once: --pp-schedule's values and the JSON's "pp_schedule" are these names.
enum class PipelineSchedule { afab, one_f_one_b, interleaved, zb1 };
inline constexpr EnumTable<PipelineSchedule, 4> kPipelineSchedules = {{
    {PipelineSchedule::afab, "afab", "all forwards, then all backwards (GPipe)"},
    {PipelineSchedule::one_f_one_b, "1f1b", "one forward, one backward; at most pp micro-batches in flight"},
    {PipelineSchedule::interleaved, "interleaved", "1F1B over several chunks per rank"},
    {PipelineSchedule::zb1, "zb1", "zero-bubble ZB-H1, weight gradients fill the bubbles"},
}};
std::string_view schedule_name(PipelineSchedule s);
// UserError "unknown --pp-schedule 'x': expected afab, 1f1b, interleaved or zb1".
PipelineSchedule parse_pipeline_schedule(std::string_view text);

enum class PipeOp : unsigned char { forward, backward, backward_input, backward_weight };

struct PipeAction {
    PipeOp op;
    int micro_batch;
    int chunk;
    bool operator==(const PipeAction&) const = default;
};

struct PipelineShape {
    int pp = 1;
    int micro_batches = 1;  // m
    int chunks = 1;         // V (virtual stages per rank)
};

using Schedule = std::vector<std::vector<PipeAction>>;  // [stage][i]

// UserError naming the problem when `schedule` cannot run `shape` (chunks without interleaving, m < pp for
// interleaved ...).
Schedule make_schedule(PipelineSchedule schedule, const PipelineShape& shape);
void validate_schedule_shape(PipelineSchedule schedule, const PipelineShape& shape);

// The action's name in traces and the GUI: F3, B3, W3 (with ".c1" for chunk 1 when there are several).
std::string action_label(const PipeAction& a, int chunks);

// Runs the schedule on an idealised machine: each action takes its cost (forward 1, backward 2, or B 1 and W 1)
// and starts when its stage is free and its inputs are ready (no communication time).
struct TimedAction {
    PipeAction action;
    int stage;
    double start, end;
};
struct Simulation {
    std::vector<TimedAction> actions;
    double makespan = 0;
    std::vector<double> bubble;             // per stage: idle in [0, makespan] / busy
    std::vector<int> max_in_flight;         // per stage: micro-batches whose activations are held at once
    std::vector<int> max_chunks_in_flight;  // per stage: the same in (micro-batch, chunk) units
};
// UserError if the schedule deadlocks (an action waits for one that never comes before it).
Simulation simulate_schedule(const Schedule& schedule, const PipelineShape& shape, double forward_cost = 1.0,
                             double backward_cost = 2.0);

}  // namespace us
