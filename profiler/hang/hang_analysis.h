// What holds a hung job: the Flight Recorder dumps of its ranks aligned per process-group instance, every group's
// state (where its members stop agreeing), and one verdict — the rank, the group, the collective and the line of
// code — with its evidence. The method, and what it cannot tell, is docs/hangs.md's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/hang/dump_files.h"

namespace us::hang {

// How a group (and the job) stands. missing: some members entered a collective others never did; mismatch: all
// arrived but called different things; p2p_deadlock: sends and receives wait on each other in a cycle;
// inside_collective: everyone arrived and none left (not a desync: a link, the library); none: all agree and
// complete.
enum class HangKind : uint8_t { none, missing, mismatch, p2p_deadlock, inside_collective };
const char* hang_kind_name(HangKind k);

struct StackFrame {
    std::string name, file;
    int line = 0;
};

// One collective (or p2p operation) as one member recorded it.
struct CollectiveCall {
    int64_t seq_id = -1;
    bool p2p = false;
    std::string op;  // the profiling name, "nccl:all_reduce"
    std::vector<std::vector<int64_t>> input_sizes, output_sizes;
    std::vector<std::string> input_dtypes, output_dtypes;
    std::string state;  // scheduled, started, completed (retired entries read completed)
    int rank = -1;      // who recorded it
};

// One member's place in its group: the window of collectives its buffer still holds and how far it got.
struct MemberProgress {
    int rank = -1;
    int64_t first_seq = -1;       // the oldest collective its buffer holds (-1: none)
    int64_t last_entered = -1;    // the newest collective it entered
    int64_t last_completed = -1;  // the newest it completed
};

struct GroupState {
    std::string name, desc;
    std::vector<int> ranks;          // members, global ranks, in group-rank order where the dumps say it
    bool ranks_from_config = false;  // from pg_config (whole), else from which ranks recorded entries
    HangKind kind = HangKind::none;
    std::vector<int> culprit_ranks;
    std::vector<int> absent_ranks;                // members without a dump
    CollectiveCall collective;                    // where the members stop agreeing (seq_id -1: nowhere)
    CollectiveCall reference;                     // mismatch: what the others called
    bool tie = false;                             // mismatch with no majority: the culprits are both sides
    std::string detail;                           // who differs and how, in one sentence
    std::string cycle;                            // p2p_deadlock: who waits on whom ("rank 0 receives from 1, ...")
    double late_entry_s = 0;                      // inside_collective: its culprit entered this long after the first
    bool root = false;                            // a hang of its own, not a victim of another group's
    int held_by = -1;                             // a victim: the index of the group whose hang holds its culprits
    int64_t window_first = -1, window_last = -1;  // the collectives every member still holds
    int64_t entered_ns = -1;  // when the first member entered `collective` (its time_created), -1 unknown
    std::vector<MemberProgress> members;
};

struct Culprit {
    int rank = -1;
    std::string host;
    bool absent = false;               // no dump: a suspect for that alone
    CollectiveCall last_completed;     // its newest completed collective, any group
    std::string last_completed_group;  // that collective's group, as group_label names it ("group '0' (world)")
    std::vector<StackFrame> stack;     // the stack of its entry that matters (the last, or the mismatched one)
    std::string stack_of;              // that entry, in words: "all_reduce #5 of group 'dp:0' (dp)"
};

struct HangAnalysis {
    HangKind kind = HangKind::none;
    std::string verdict;  // one sentence
    std::vector<std::string> evidence;
    std::vector<int> culprit_ranks;
    std::vector<Culprit> culprits;
    std::string node;                         // the host, when the culprits are the ranks of one node
    int group = -1;                           // the root group in `groups`, -1 when none
    CollectiveCall collective;                // where the job stops, as the members that agree called it
    CollectiveCall culprit_call;              // mismatch: what the culprit called instead
    std::vector<StackFrame> stack;            // the first culprit's
    std::vector<StackFrame> reference_stack;  // mismatch: a member that called the other thing
    std::vector<GroupState> groups;
    // A job caught in motion (dumps taken on demand from a healthy job read like a hang): how long after the others
    // entered the root's collective the culprits began an operation they completed (< 0: none after, or unknown), and
    // how long the oldest unfinished operation had been open by the job's newest entry (< 0 unknown).
    double culprit_active_after_s = -1, longest_open_s = -1;
    std::vector<int> absent_ranks;        // ranks below the job's size with no dump
    std::vector<int> another_jobs_ranks;  // of absent_ranks, those whose file was left out as another job's
    int world = 0;                        // the job's size as the dumps say it
    std::vector<std::string> injected;    // faults the engine injected, per rank: labelled as such
    // Operations the recorder kept no entry for (gaps in a group's op_id: gloo's send and recv), and whose.
    std::vector<int> unrecorded_gap_ranks;
    int64_t unrecorded_ops = 0;
    bool unrecorded_under_gloo = false;  // the dumps are gloo's, which records no send or recv
    std::vector<std::string> left_out;   // files left out, and why (DumpSet::left_out)
    struct RankDump {
        int rank = -1;
        std::string host, source;
        size_t entries = 0;
    };
    std::vector<RankDump> ranks;
};

HangAnalysis analyze_hang(const DumpSet& set);

}  // namespace us::hang
