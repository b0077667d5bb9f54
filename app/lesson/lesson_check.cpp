// A lesson's check: its claims evaluated over its runs' reports (claim.cpp), plus one failed claim for each run whose
// report holds figures off their predictions that nothing explains.
#include <fmt/format.h>

#include <optional>

#include "app/lesson/lesson.h"

namespace us::lesson {
using nlohmann::json;

// A run whose report lists a figure off its prediction or formula by more than 10% with nothing to explain it
// (profiler/analysis/misses.h) fails the check too: the lesson's claims would be read off figures nobody can
// account for. Nothing is added for a run where everything is explained.
static std::optional<ClaimResult> unexplained_misses(const std::string& label, const json& report) {
    if (!report.is_object() || !report.contains("misses") || !report["misses"].is_array()) return std::nullopt;
    std::vector<std::string> lines;
    for (const json& m : report["misses"])
        if (m.value("explained", json()).is_null())
            lines.push_back(fmt::format("rank {} {}: measured {}, {} {}", m.value("rank", -1),
                                        m.value("what", std::string("?")), m.value("measured", 0.0),
                                        m.value("source", std::string("?")), m.value("predicted", 0.0)));
    if (lines.empty()) return std::nullopt;
    ClaimResult r;
    r.says = fmt::format("run {}: every figure within 10% of its prediction and formula, or explained", label);
    r.status = ClaimStatus::failed;
    r.measured.what = fmt::format("{}: unexplained misses", label);
    r.measured.values = {double(lines.size())};
    std::string joined;
    for (const auto& line : lines) joined += (joined.empty() ? "" : "; ") + line;
    r.measured.shown = fmt::format("{} ({})", lines.size(), joined);
    r.expected.source = FigureSource::constant;
    r.expected.values = {0};
    r.expected.shown = std::string("0");  // not the bare literal: GCC 12 misreads it (a false -Wrestrict)
    r.comparison = "==";
    r.difference = fmt::format("{} unexplained", lines.size());
    r.explanation = joined;
    return r;
}

LessonCheck check_lesson(const Lesson& lesson, const std::map<std::string, json>& reports) {
    LessonCheck check;
    for (const auto& c : lesson.claims) check.claims.push_back(evaluate_claim(c, reports));
    for (const auto& run : lesson.runs)
        if (const auto it = reports.find(run.label); it != reports.end())
            if (auto r = unexplained_misses(run.label, it->second)) check.claims.push_back(std::move(*r));
    return check;
}

}  // namespace us::lesson
