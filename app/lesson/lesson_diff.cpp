// A lesson's claims over two of its runs ("run": "zero-1..zero-3"): the diff of their traces (ultrascope diff,
// docs/diff.md) joins the reports under that name, so that a claim reads a cause ("by_cause_s.exposed_comm.dp") as
// it reads any report figure.
#include <set>

#include "app/lesson/lesson.h"
#include "app/report/run_diff_report.h"
#include "common/core/check.h"

namespace us::lesson {

std::optional<std::pair<std::string, std::string>> diff_pair(const std::string& run) {
    const size_t at = run.find("..");
    if (at == std::string::npos || at == 0 || at + 2 >= run.size()) return std::nullopt;
    return std::make_pair(run.substr(0, at), run.substr(at + 2));
}

void add_lesson_diffs(const Lesson& lesson, const std::map<std::string, std::string>& traces,
                      std::map<std::string, nlohmann::json>& reports) {
    std::set<std::string> named;
    for (const Claim& c : lesson.claims)
        for (const Operand* o : {&c.left, &c.right})
            if (diff_pair(o->run)) named.insert(o->run);
    for (const std::string& name : named) {
        const auto [a, b] = *diff_pair(name);
        const auto ta = traces.find(a), tb = traces.find(b);
        if (ta == traces.end() || tb == traces.end()) continue;  // a run missing: its claims come back invalid
        try {
            reports[name] = app::diff_traces_json(ta->second, tb->second);
        } catch (const UserError&) {
            reports.erase(name);  // no steady step (a run that failed early): invalid, with "has no report"
        }
    }
}

}  // namespace us::lesson
