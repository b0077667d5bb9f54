// The parallel layout (parallel_layout.h): the names of context parallelism's choices, the rules the layout alone
// must keep, and its one-line description.
#include "common/settings/parallel_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "common/core/check.h"

namespace us {

std::string_view cp_balance_name(CpBalance b) { return enum_name(kCpBalances, b); }
CpBalance parse_cp_balance(std::string_view text) { return parse_enum(kCpBalances, text, "--cp-balance"); }
std::string_view cp_comm_name(CpComm c) { return enum_name(kCpComms, c); }
CpComm parse_cp_comm(std::string_view text) { return parse_enum(kCpComms, text, "--cp-comm"); }

int ParallelLayout::virtual_chunks() const {
    return pp_schedule == PipelineSchedule::interleaved ? std::max(1, pp_chunks) : 1;
}

void ParallelLayout::check() const {
    for (auto [name, v] : {std::pair{"dp", dp}, {"pp", pp}, {"tp", tp}, {"cp", cp}, {"ep", ep}})
        US_CHECK_INPUT(v >= 1, "--{} must be at least 1 (got {})", name, v);
    // Tensor and sequence parallelism: sequence parallelism splits the tp group's positions.
    US_CHECK_INPUT(!sp || tp > 1,
                   "--sp (sequence parallelism) works inside a tensor-parallel group: add --tp 2 "
                   "or more, or drop --sp");
    // Expert parallelism shares the data-parallel ranks (as Megatron and torchtitan do).
    US_CHECK_INPUT(dp % ep == 0,
                   "--ep {} must divide --dp {}: expert-parallel ranks are carved out of the data-parallel ones (each "
                   "group of ep dp ranks holds all the experts once); use --dp {} or a multiple",
                   ep, dp, ep);
    US_CHECK_INPUT(zero >= 0 && zero <= 3, "unknown --zero stage {}: expected 0, 1, 2 or 3", zero);
    US_CHECK_INPUT(pp_chunks >= 1, "--pp-chunks must be at least 1 (got {})", pp_chunks);
    US_CHECK_INPUT(bucket_mb > 0, "--bucket-mb must be positive (got {})", bucket_mb);
    US_CHECK_INPUT(pp == 1 || zero <= 1,
                   "--zero {} with --pp {}: pipelines compose with ZeRO-0 and ZeRO-1 only (use --zero 1)", zero, pp);
}

void ParallelLayout::check_world(int world_size) const {
    US_CHECK_INPUT(world() == world_size,
                   "the layout dp {} x pp {} x tp {} x cp {} needs {} ranks but {} were started: start mpirun -n {} "
                   "(or change the degrees; --ep shares the dp ranks)",
                   dp, pp, tp, cp, world(), world_size, world());
}

std::string ParallelLayout::describe() const {
    std::string s = fmt::format("dp {} tp {}{} pp {}", dp, tp, sp ? " (sp)" : "", pp);
    if (pp > 1)
        s += fmt::format(" {}{}", schedule_name(pp_schedule), pp_chunks > 1 ? fmt::format(" x{}", pp_chunks) : "");
    if (cp > 1) s += fmt::format(" cp {}{}", cp, cp_comm == CpComm::allgather ? " (all-gather)" : "");
    if (ep > 1) s += fmt::format(" ep {}", ep);
    return s + fmt::format(", ZeRO-{}", zero);
}

}  // namespace us
