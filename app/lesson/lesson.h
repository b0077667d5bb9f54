// Workshop lessons: one idea of the Ultra-Scale Playbook shown on real ranks. A lesson is data
// (assets/lessons/NAME.json, docs/lessons.md): its text, the runs that show the idea (ranks + ultrascope-train
// flags), the views to open and the figures to outline, and the claim it makes, written in a small vocabulary of
// comparisons over the runs' reports (`ultrascope report TRACE --json`, docs/report-schema.md).
// This header is the whole API, shared by `ultrascope lesson` and the GUI's Lessons panel: nothing here prints;
// results come back as structs with their text already written.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/launch/emulated_nodes.h"

namespace us::lesson {

// ---------------------------------------------------------------------------------------------------------------
// The lesson file
// ---------------------------------------------------------------------------------------------------------------

// One run of a lesson: what `ultrascope run -n RANKS ARGS...` launches.
struct LessonRun {
    std::string label;              // how the text and the claims name the run ("fp32", "bf16"); unique
    std::string note;               // one line on what this run changes ("bf16 with fp32 master weights")
    int ranks = 1;                  // MPI ranks: the product dp x pp x tp x cp of its flags
    std::vector<std::string> args;  // ultrascope-train flags, e.g. {"--preset", "tiny", "--steps", "3"}
    app::NodeLinks nodes{0};        // count > 0: on nodes emulated on this machine (root; docs/nodes.md)
    // The run is meant to hang (an injected --hang-rank): it ends at its hang limit with its ranks' flight recorder
    // dumps, and that is its success; its report's `hang` says what held it. Finishing would be the failure.
    bool hangs = false;
};

// A planner evaluation shown next to the measured runs (`ultrascope plan`, docs/planner.md): the same model on a
// cluster the class does not have, nothing run. Claims name it by its label, like a run.
struct LessonPlan {
    std::string label;              // unique among the lesson's runs and plans
    std::string note;               // one line ("the same model on 64 H100s")
    std::string gpu = "h100-sxm";   // the cluster: a100-80gb | h100-sxm | h200 (assets/clusters)
    std::vector<std::string> args;  // ultrascope-train flags: the model (preset, shapes) and the layout (--dp 64 ...)
};

// A figure the GUI outlines: a report key shown in a view.
struct Highlight {
    std::string view;  // memory | timeline | overlap | training | compare | experts | ops
    std::string key;   // report path as in Operand::keys ("rank.memory_peak_bytes.activations")
    std::string run;   // the run whose figure it is; empty: every run of the lesson
    std::string note;  // why to look at it, one line in words (required; the GUI draws it over the view)
};

struct Lesson;
// The highlights that belong to the run of the lesson labelled `run_label` (those for every run, and those for this
// run); none when the run shown is not one of the lesson's (an empty label): a note drawn over another run's
// figures would point at what is not there.
std::vector<const Highlight*> highlights_of_run(const Lesson& lesson, const std::string& run_label);

// Where a figure comes from, as every figure in the product says (README: measured, predicted, formula, derived).
enum class FigureSource {
    measured,   // from the trace
    predicted,  // the engine's exact walk for the configuration
    formula,    // the textbook's figure (docs/formulas.md)
    derived,    // a combination of the above (MFU)
    setting,    // a setting of the run (config.*)
    constant,   // a number written in the lesson
    model,      // the planner's step-time model (docs/planner.md): a plan's times
};
const char* source_name(FigureSource source);  // "measured", "predicted", ...

// One side of a comparison: a number (or a word) read from a run's report, or a constant.
struct Operand {
    std::string run;  // the run's label; empty for a constant
    // Dotted paths into the run's report, summed. "rank.X" is X in each entry of "ranks" (then `ranks` picks
    // which); anything else is from the report's root ("pipeline.bubble_fraction", "throughput.step_s",
    // "config.pp", "predicted.params"). Numbers in the path index arrays ("experts.layers.0.imbalance_max").
    std::vector<std::string> keys;
    std::string ranks = "max";        // for rank.* keys: max | min | sum | mean | each (every rank) | a rank number
    double times = 1;                 // scale after summing (0.5: "half of"; 0.0625: "1/16 of")
    std::optional<double> value;      // a constant number (then run and keys are empty)
    std::optional<std::string> word;  // a constant word, for == on text keys ("forward")
};

enum class Comparison {
    less,           // <
    less_equal,     // <=
    greater,        // >
    greater_equal,  // >=
    approx,         // ~: |left - right| <= tolerance * |right|
    equal,          // ==: numbers exactly, or words
};
const char* comparison_symbol(Comparison op);  // "<", "<=", ">", ">=", "~", "=="

// A claim the lesson makes and the runs can refute: left OP right (with tolerance for ~).
// Where one side is per rank ("ranks": "each"), it must hold on every rank (pairwise when both are).
struct Claim {
    std::string says;  // the claim in words: "ZeRO-3 model states per rank ~ 16N/dp"
    Operand left;
    Comparison op = Comparison::less;
    Operand right;
    double tolerance = 0;  // approx only: relative to |right| (0.02 = within 2%)
    std::string why;       // the reason it should hold, one line (shown with the result)
    // What the claim needs of the machine, as a claim of its own (at most one; its own `when` empty): where it does
    // not hold, the claim is not checked here, and says why ("a core free beside each rank's compute": overlap
    // needs one). The claim's physics, not a way out of a failure: every lesson's claims hold where it holds.
    std::vector<Claim> when;
};

struct Lesson {
    std::string name;                   // file stem: the argument of `ultrascope lesson NAME`
    int order = 0;                      // position in the workshop (lists sort by it)
    std::string title;                  // "ZeRO-1, 2, 3"
    std::string section;                // the Playbook's section ("Data parallelism > ZeRO")
    std::string look_at;                // what to look at, a few sentences
    std::string formula;                // the formula that predicts it
    bool formula_gives_answer = false;  // shown with the answer, not before the question it would give away
    std::string question;               // the question to ask the class
    std::string answer;                 // shown on request (may be empty)
    std::vector<LessonRun> runs;        // 1 to 4 runs
    std::vector<LessonPlan> plans;      // 0 to 2 planner evaluations next to them
    std::vector<std::string> views;     // views to open, in order (memory | timeline | overlap | ...)
    std::vector<Highlight> highlights;  // figures to outline
    std::vector<Claim> claims;          // the check: all must hold
    bool slow = false;                  // its check takes over ~30 s: bench_lessons.py, not ctest
    std::string path;                   // the file it came from
};

// A file that could not be loaded: message names the file and the field and what to do.
struct LessonLoadError {
    std::string path;     // the file
    std::string message;  // "assets/lessons/zero.json: runs[1].ranks: expected a whole number from 1 to 8"
};

struct LessonSet {
    std::vector<Lesson> lessons;          // the good ones, sorted by order then name
    std::vector<LessonLoadError> errors;  // one per bad file (the others still load)
};

// assets/lessons of the source tree, or $ULTRASCOPE_ASSETS/lessons (as presets are found).
std::filesystem::path default_lessons_dir();
// Every *.json in dir. A missing directory is an error entry, not an exception.
LessonSet load_lessons(const std::filesystem::path& dir);
// One file; throws us::UserError naming the file and the field.
Lesson load_lesson_file(const std::filesystem::path& path);
// Parses a lesson from JSON; `name` and `where` (the file, for messages) are given. Throws us::UserError.
Lesson parse_lesson(const nlohmann::json& j, const std::string& name, const std::string& where);
// nullptr when absent.
const Lesson* find_lesson(const LessonSet& set, const std::string& name);

// ---------------------------------------------------------------------------------------------------------------
// Running a lesson's runs
// ---------------------------------------------------------------------------------------------------------------

// The planner's figures for `plan` (what `ultrascope plan --gpu GPU ARGS --json` prints); precision and attention
// are the flags' (the engine's defaults when absent), so a plan of a run's layout is that run. UserError on bad flags.
nlohmann::json evaluate_lesson_plan(const LessonPlan& plan);
// "ultrascope plan --gpu h100-sxm --preset small --dp 64 ..."
std::string plan_command_text(const LessonPlan& plan);

// The arguments of `ultrascope run` for this run: {"-n", "2", "--dp", "2", ...}.
std::vector<std::string> run_arguments(const LessonRun& run);
// The same as one line a teacher can paste: "ultrascope run -n 2 --dp 2 --preset tiny --steps 3".
std::string run_command_text(const LessonRun& run);

struct RunOptions {
    std::filesystem::path trace_dir = "runs";            // traces land here as lesson-NAME-LABEL.ustrace
    std::string train_binary;                            // empty: the ultrascope-train next to this program
    std::function<void(const std::string&)> on_message;  // progress lines (may be empty); called on this thread
    const std::atomic<bool>* stop = nullptr;             // set to stop the run early (the result is then not ok)
};

struct RunResult {
    std::string label;                  // the lesson run's label
    std::string command;                // run_command_text
    std::string trace_path;             // where the trace was written
    int exit_code = -1;                 // 0 when the run finished and no rank was lost
    double seconds = 0;                 // wall time of the run, measured
    nlohmann::json report;              // prof::report_json of the run (null when it produced nothing)
    std::vector<std::string> problems;  // why it failed (lost ranks, exit code), empty when ok
    bool ok() const { return exit_code == 0 && !report.is_null(); }
};

// Launches one run through mpirun (as `ultrascope run` does), waits for it, builds its report. Blocks; the
// launched ranks never outlive the call. Throws us::UserError on bad flags (before anything starts).
RunResult run_lesson_run(const Lesson& lesson, const LessonRun& run, const RunOptions& options);

// ---------------------------------------------------------------------------------------------------------------
// Checking a lesson's claims over the runs' reports
// ---------------------------------------------------------------------------------------------------------------

// One side of a claim, as evaluated.
struct OperandResult {
    std::string what;                              // "zero3: rank.memory_peak_bytes.params + ... (max over ranks)"
    FigureSource source = FigureSource::measured;  // where the number comes from (the first key's kind)
    std::vector<double> values;                    // numbers: one, or one per rank for "each" (empty for words)
    std::vector<std::string> words;  // text values (== on words): one, or one per rank (empty for numbers)
    std::string shown;               // the value(s) formatted with units: "1.50 MiB", "0.27", "2 ranks: 3.1 MiB, ..."
};

enum class ClaimStatus {
    held,      // the comparison holds (on every rank where per rank)
    failed,    // it does not
    invalid,   // could not be evaluated: a missing run, key or value (the lesson file's fault)
    not_here,  // its `when` does not hold on this machine: not checked (never counted as held)
};

struct ClaimResult {
    std::string says;  // Claim::says
    ClaimStatus status = ClaimStatus::invalid;
    OperandResult measured;   // the left side
    OperandResult expected;   // the right side
    std::string comparison;   // "<=", "~ within 2%"
    std::string difference;   // left against right: "-2.34% (rank 1)"; empty for words
    std::string explanation;  // a sentence: what was measured, what was expected, held or not and by how much
    int worst_rank = -1;      // per-rank claims: the rank furthest from holding (-1 otherwise)
};

struct LessonCheck {
    std::vector<ClaimResult> claims;  // in the lesson's order
    bool held() const;                // every claim held, or was not checked here (its `when` did not hold)
    bool invalid() const;             // some claim could not be evaluated
};

// reports: label -> report JSON (as RunResult::report or `ultrascope report --json`), and for plans the plan's JSON
// (evaluate_lesson_plan; its figures are predicted, formula, derived or model, never measured). Never throws on a
// report that lacks a key: that claim comes back invalid with the reason.
ClaimResult evaluate_claim(const Claim& claim, const std::map<std::string, nlohmann::json>& reports);

// A claim's run "A..B" reads the diff of runs A and B (`ultrascope diff --json`, docs/report-schema.md): the two
// labels, or nothing for a plain label.
std::optional<std::pair<std::string, std::string>> diff_pair(const std::string& run);
// Adds to `reports`, under "A..B", the diff of each pair the lesson's claims name whose traces (label -> path) are
// both there. Blocks while it reads the two traces (a lesson's runs: well under a second each).
void add_lesson_diffs(const Lesson& lesson, const std::map<std::string, std::string>& traces,
                      std::map<std::string, nlohmann::json>& reports);
LessonCheck check_lesson(const Lesson& lesson, const std::map<std::string, nlohmann::json>& reports);

}  // namespace us::lesson
