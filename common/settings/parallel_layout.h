// How a run spreads over ranks: the parallel degrees, ZeRO, the pipeline schedule, context parallelism's cut and
// transfers, and the gradient buckets. One type for the engine's settings (TrainConfig::parallel), the predictions
// (predict::PredictInput), the planner's layouts (predict::Layout), the GUI and the CLI; its flags and JSON keys are
// the settings table's (settings_schema.cpp). Rank order is the engine's (engine/parallel/grid.cpp): tp innermost,
// then cp, then pp, dp outermost; ep groups are consecutive dp ranks.
#pragma once

#include <string>
#include <string_view>

#include "common/core/enum_names.h"
#include "common/schedule/pipeline_schedule.h"

namespace us {

// How context parallelism cuts the sequence (--cp-balance) and moves keys and values (--cp-comm).
enum class CpBalance { zigzag, contiguous };
inline constexpr EnumTable<CpBalance, 2> kCpBalances = {{
    {CpBalance::zigzag, "zigzag", "2 cp chunks, rank r holds r and 2cp-1-r: equal causal work on every rank"},
    {CpBalance::contiguous, "contiguous", "rank r holds chunk r: the last rank's queries see every key (imbalanced)"},
}};
enum class CpComm { ring, allgather };
inline constexpr EnumTable<CpComm, 2> kCpComms = {{
    {CpComm::ring, "ring",
     "each key/value block passed on while the block in hand is computed (hidden behind attention)"},
    {CpComm::allgather, "allgather",
     "every rank's keys and values gathered before attention and their gradients reduce-scattered\nafter it "
     "(exposed; Llama 3's choice: simple, and small beside the attention of long sequences)"},
}};
std::string_view cp_balance_name(CpBalance b);
CpBalance parse_cp_balance(std::string_view text);  // UserError naming the choices
std::string_view cp_comm_name(CpComm c);
CpComm parse_cp_comm(std::string_view text);  // UserError naming the choices

struct ParallelLayout {
    int dp = 1, pp = 1, tp = 1, cp = 1;
    int ep = 1;       // expert parallelism: carved out of the dp ranks (ep divides dp), not a factor of the world
    bool sp = false;  // sequence parallelism inside the tensor-parallel group (needs tp > 1)
    int zero = 0;     // ZeRO stage 0..3
    PipelineSchedule pp_schedule = PipelineSchedule::one_f_one_b;
    int pp_chunks = 1;  // virtual chunks per rank (interleaved)
    CpBalance cp_balance = CpBalance::zigzag;
    CpComm cp_comm = CpComm::ring;
    double bucket_mb = 1.0;  // gradient bucket size (MiB)
    bool overlap = true;     // false: all-reduce after backward (--no-overlap)

    int world() const { return dp * pp * tp * cp; }
    // Model chunks per rank the schedule runs: pp_chunks when interleaved, else 1.
    int virtual_chunks() const;
    // Throws UserError naming the first rule the layout alone breaks (degrees, sp without tp, ep not dividing dp,
    // the ZeRO stage, ZeRO-2/3 with pipelines, ...); the rules that also need the model or the batch are
    // settings_rules.cpp's.
    void check() const;
    // Refuses a layout before any work starts: the world size against the product of the degrees.
    void check_world(int world_size) const;
    // "dp 2 tp 2 (sp) pp 2 interleaved x2 cp 2 (all-gather) ep 2, ZeRO-1"
    std::string describe() const;
    bool operator==(const ParallelLayout&) const = default;
};

}  // namespace us
