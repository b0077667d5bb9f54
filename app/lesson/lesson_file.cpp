// Reading lesson files (assets/lessons/NAME.json): every field is checked, and a bad one is reported with the file
// and the field's path ("runs[1].ranks") and what was expected, so a teacher editing a lesson sees what to fix.
// The runs' flags are checked with the trainer's own parser, so a lesson that lists fine also launches.
#include <algorithm>
#include <fstream>
#include <set>

#include "app/gui/model/view_table.h"
#include "app/lesson/lesson.h"
#include "common/core/check.h"
#include "common/settings/cli.h"
#include "common/settings/config.h"

namespace us::lesson {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMaxRanks = 8;    // a laptop's lesson; the machine has a few cores
constexpr size_t kMaxRuns = 4;  // two pairs at most: a lesson compares one change, or two

// Field access with the file and the field's path in every message.
class Fields {
public:
    Fields(const json& j, std::string where, std::string path)
        : m_j(j), m_where(std::move(where)), m_path(std::move(path)) {
        US_CHECK_INPUT(j.is_object(), "{}: {}: expected a JSON object", m_where, label());
    }
    std::string field(const std::string& key) const { return m_path.empty() ? key : m_path + "." + key; }
    std::string label() const { return m_path.empty() ? "the top level" : m_path; }
    const std::string& where() const { return m_where; }
    bool has(const std::string& key) const { return m_j.contains(key); }
    const json& at(const std::string& key) const { return m_j.at(key); }

    // Unknown keys are errors: a typo ("claim" for "claims") must not silently drop a field.
    void only(const std::set<std::string>& known) const {
        for (const auto& [key, value] : m_j.items()) {
            (void)value;
            if (known.count(key)) continue;
            std::string names;
            for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
            fail_user("{}: {}: unknown field (known: {})", m_where, field(key), names);
        }
    }
    std::string text(const std::string& key, bool required = true) const {
        if (!has(key)) {
            US_CHECK_INPUT(!required, "{}: {}: missing (a string)", m_where, field(key));
            return "";
        }
        const json& v = at(key);
        US_CHECK_INPUT(v.is_string(), "{}: {}: expected a string, got {}", m_where, field(key), v.dump());
        const std::string s = v.get<std::string>();
        US_CHECK_INPUT(!required || !s.empty(), "{}: {}: must not be empty", m_where, field(key));
        return s;
    }
    double number(const std::string& key, double fallback) const {
        if (!has(key)) return fallback;
        const json& v = at(key);
        US_CHECK_INPUT(v.is_number(), "{}: {}: expected a number, got {}", m_where, field(key), v.dump());
        return v.get<double>();
    }
    int whole(const std::string& key, int fallback, int lo, int hi) const {
        if (!has(key)) return fallback;
        const json& v = at(key);
        US_CHECK_INPUT(v.is_number_integer() && v.get<long long>() >= lo && v.get<long long>() <= hi,
                       "{}: {}: expected a whole number from {} to {}, got {}", m_where, field(key), lo, hi, v.dump());
        return v.get<int>();
    }
    bool boolean(const std::string& key, bool fallback) const {
        if (!has(key)) return fallback;
        const json& v = at(key);
        US_CHECK_INPUT(v.is_boolean(), "{}: {}: expected true or false, got {}", m_where, field(key), v.dump());
        return v.get<bool>();
    }
    const json& array(const std::string& key, size_t min_size, size_t max_size) const {
        US_CHECK_INPUT(has(key), "{}: {}: missing (a list)", m_where, field(key));
        const json& v = at(key);
        US_CHECK_INPUT(v.is_array(), "{}: {}: expected a list, got {}", m_where, field(key), v.dump());
        US_CHECK_INPUT(v.size() >= min_size && v.size() <= max_size, "{}: {}: expected {} to {} entries, got {}",
                       m_where, field(key), min_size, max_size, v.size());
        return v;
    }

private:
    const json& m_j;
    std::string m_where, m_path;
};

std::string indexed(const std::string& key, size_t i) { return key + "[" + std::to_string(i) + "]"; }

// The flags must parse with the trainer's parser and need exactly `ranks` ranks, or the run would not launch.
void check_run_flags(const LessonRun& run, const std::string& where, const std::string& field) {
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& a : run.args) argv.push_back(a.c_str());
    try {
        ParsedTrainArgs parsed = parse_train_args(int(argv.size()), argv.data());
        US_CHECK_INPUT(!parsed.help_requested, "--help is not a run setting");
        TrainConfig& cfg = parsed.cmd.config;
        cfg.validate();
        US_CHECK_INPUT(!run.hangs || (cfg.hang_rank >= 0 && cfg.hang_timeout > 0),
                       "the run is meant to hang (\"hangs\": true): give it an injected hang and a short limit "
                       "(--hang-rank R --hang-at-step S --hang-kind KIND --hang-timeout 3)");
        US_CHECK_INPUT(
            run.hangs || cfg.hang_rank < 0,
            "an injected hang (--hang-rank) stops the run: mark it \"hangs\": true so the lesson expects it");
        US_CHECK_INPUT(cfg.parallel.world() == run.ranks,
                       "ranks is {} but the layout dp {} x pp {} x tp {} x cp {} needs {}", run.ranks, cfg.parallel.dp,
                       cfg.parallel.pp, cfg.parallel.tp, cfg.parallel.cp, cfg.parallel.world());
    } catch (const UserError& e) {
        fail_user("{}: {}: {}", where, field, e.what());
    }
}

LessonRun parse_run(const json& j, const std::string& where, const std::string& path) {
    Fields f(j, where, path);
    f.only({"label", "note", "ranks", "args", "nodes", "hangs"});
    LessonRun run;
    run.label = f.text("label");
    US_CHECK_INPUT(run.label.find_first_of(" /\\") == std::string::npos,
                   "{}: {}: '{}' must be one word (it names the run's trace file)", where, f.field("label"), run.label);
    run.note = f.text("note", false);
    run.ranks = f.whole("ranks", 1, 1, kMaxRanks);
    for (const auto& a : f.array("args", 0, 64)) {
        US_CHECK_INPUT(a.is_string(), "{}: {}: expected strings (ultrascope-train flags), got {}", where,
                       f.field("args"), a.dump());
        run.args.push_back(a.get<std::string>());
    }
    run.hangs = f.boolean("hangs", false);
    check_run_flags(run, where, f.field("args"));
    if (f.has("nodes")) {  // {"count": N, "inter_node_gbps": G, "placement": "block" | "cyclic"}
        Fields n(f.at("nodes"), where, f.field("nodes"));
        n.only({"count", "inter_node_gbps", "placement"});
        run.nodes.count = n.whole("count", 2, 2, 64);
        run.nodes.inter_node_gbps = n.number("inter_node_gbps", 0);
        US_CHECK_INPUT(run.nodes.inter_node_gbps >= 0, "{}: {}: must not be negative", where,
                       n.field("inter_node_gbps"));
        run.nodes.placement = n.has("placement") ? n.text("placement") : "block";
        US_CHECK_INPUT(run.nodes.placement == "block" || run.nodes.placement == "cyclic",
                       "{}: {}: placement is block or cyclic, got '{}'", where, n.field("placement"),
                       run.nodes.placement);
        US_CHECK_INPUT(run.ranks % run.nodes.count == 0, "{}: {}: {} ranks do not split over {} nodes", where,
                       f.field("nodes"), run.ranks, run.nodes.count);
    }
    return run;
}

// A plan is checked by evaluating it (a pure function): a layout the planner cannot place fails here.
LessonPlan parse_plan(const json& j, const std::string& where, const std::string& path) {
    Fields f(j, where, path);
    f.only({"label", "note", "gpu", "args"});
    LessonPlan plan;
    plan.label = f.text("label");
    plan.note = f.text("note", false);
    if (f.has("gpu")) plan.gpu = f.text("gpu");
    for (const auto& a : f.array("args", 1, 64)) {
        US_CHECK_INPUT(a.is_string(), "{}: {}: expected strings (ultrascope-train flags), got {}", where,
                       f.field("args"), a.dump());
        plan.args.push_back(a.get<std::string>());
    }
    try {
        evaluate_lesson_plan(plan);
    } catch (const UserError& e) {
        fail_user("{}: {}: {}", where, f.field("args"), e.what());
    }
    return plan;
}

Operand parse_operand(const json& j, const std::string& where, const std::string& path,
                      const std::set<std::string>& labels) {
    Fields f(j, where, path);
    f.only({"run", "key", "keys", "ranks", "times", "value", "word"});
    Operand o;
    if (f.has("value") || f.has("word")) {
        US_CHECK_INPUT(!f.has("run") && !f.has("key") && !f.has("keys"),
                       "{}: {}: a constant (value or word) takes no run or key", where, path);
        US_CHECK_INPUT(!(f.has("value") && f.has("word")), "{}: {}: either value or word, not both", where, path);
        if (f.has("value"))
            o.value = f.number("value", 0);
        else
            o.word = f.text("word");
        return o;
    }
    o.run = f.text("run");
    if (const auto pair = diff_pair(o.run)) {  // "A..B": the diff of two runs (lesson_diff.cpp)
        US_CHECK_INPUT(labels.count(pair->first) && labels.count(pair->second) && pair->first != pair->second,
                       "{}: {}: '{}' names the diff of two runs: both labels must be the lesson's runs, and differ",
                       where, f.field("run"), o.run);
    } else {
        US_CHECK_INPUT(labels.count(o.run), "{}: {}: no run is labelled '{}'", where, f.field("run"), o.run);
    }
    US_CHECK_INPUT(f.has("key") != f.has("keys"), "{}: {}: give key (a report path) or keys (a list, summed)", where,
                   path);
    if (f.has("key"))
        o.keys.push_back(f.text("key"));
    else
        for (const auto& k : f.array("keys", 1, 16)) {
            US_CHECK_INPUT(k.is_string() && !k.get<std::string>().empty(), "{}: {}: expected report paths, got {}",
                           where, f.field("keys"), k.dump());
            o.keys.push_back(k.get<std::string>());
        }
    if (f.has("ranks")) {
        const json& r = f.at("ranks");
        const bool ok =
            (r.is_number_integer() && r.get<int>() >= 0) ||
            (r.is_string() && std::set<std::string>{"max", "min", "sum", "mean", "each"}.count(r.get<std::string>()));
        US_CHECK_INPUT(ok, "{}: {}: expected max, min, sum, mean, each or a rank number, got {}", where,
                       f.field("ranks"), r.dump());
        o.ranks = r.is_string() ? r.get<std::string>() : std::to_string(r.get<int>());
    }
    o.times = f.number("times", 1);
    return o;
}

Comparison parse_comparison(const std::string& op, const std::string& where, const std::string& field) {
    if (op == "<") return Comparison::less;
    if (op == "<=") return Comparison::less_equal;
    if (op == ">") return Comparison::greater;
    if (op == ">=") return Comparison::greater_equal;
    if (op == "~") return Comparison::approx;
    if (op == "==") return Comparison::equal;
    fail_user("{}: {}: unknown comparison '{}' (expected <, <=, >, >=, ~ or ==)", where, field, op);
}

Claim parse_claim(const json& j, const std::string& where, const std::string& path,
                  const std::set<std::string>& labels) {
    Fields f(j, where, path);
    f.only({"says", "left", "op", "right", "tolerance", "why", "when"});
    Claim c;
    c.says = f.text("says");
    c.why = f.text("why", false);
    US_CHECK_INPUT(f.has("left") && f.has("right"), "{}: {}: a claim needs left and right", where, path);
    c.left = parse_operand(f.at("left"), where, f.field("left"), labels);
    c.right = parse_operand(f.at("right"), where, f.field("right"), labels);
    c.op = parse_comparison(f.text("op"), where, f.field("op"));
    c.tolerance = f.number("tolerance", 0);
    US_CHECK_INPUT(c.tolerance >= 0 && c.tolerance < 1, "{}: {}: expected a fraction from 0 to 1 (0.02 = 2%)", where,
                   f.field("tolerance"));
    US_CHECK_INPUT(c.op == Comparison::approx || !f.has("tolerance"),
                   "{}: {}: only ~ takes a tolerance (write the margin into the right side with times)", where,
                   f.field("tolerance"));
    US_CHECK_INPUT(!c.left.run.empty() || !c.right.run.empty(),
                   "{}: {}: both sides are constants: a claim must read a run's report to be able to fail", where,
                   path);
    US_CHECK_INPUT(c.op == Comparison::equal || (!c.left.word && !c.right.word),
                   "{}: {}: a word can only be compared with ==", where, f.field("op"));
    if (f.has("when")) {
        c.when.push_back(parse_claim(f.at("when"), where, f.field("when"), labels));
        US_CHECK_INPUT(c.when.front().when.empty(), "{}: {}: a claim's when has no when of its own", where,
                       f.field("when"));
    }
    return c;
}

}  // namespace

fs::path default_lessons_dir() { return fs::path(assets_dir()) / "lessons"; }

Lesson parse_lesson(const json& j, const std::string& name, const std::string& where) {
    Fields f(j, where, "");
    f.only({"order", "title", "section", "look_at", "formula", "formula_gives_answer", "question", "answer", "slow",
            "runs", "plans", "views", "highlights", "claims"});
    Lesson l;
    l.name = name;
    l.path = where;
    l.order = f.whole("order", 0, 0, 1000);
    l.title = f.text("title");
    l.section = f.text("section");
    l.look_at = f.text("look_at");
    l.formula = f.text("formula");
    l.formula_gives_answer = f.boolean("formula_gives_answer", false);
    l.question = f.text("question");
    l.answer = f.text("answer", false);
    l.slow = f.boolean("slow", false);
    US_CHECK_INPUT(!l.formula_gives_answer || !l.answer.empty(),
                   "{}: formula_gives_answer: the formula is shown with the answer, and there is no answer", where);

    std::set<std::string> labels;
    const json& runs = f.array("runs", 1, kMaxRuns);
    for (size_t i = 0; i < runs.size(); ++i) {
        l.runs.push_back(parse_run(runs[i], where, indexed("runs", i)));
        US_CHECK_INPUT(labels.insert(l.runs.back().label).second, "{}: {}.label: '{}' is used by another run", where,
                       indexed("runs", i), l.runs.back().label);
    }
    if (f.has("plans")) {
        const json& plans = f.array("plans", 0, 2);
        for (size_t i = 0; i < plans.size(); ++i) {
            l.plans.push_back(parse_plan(plans[i], where, indexed("plans", i)));
            US_CHECK_INPUT(labels.insert(l.plans.back().label).second,
                           "{}: {}.label: '{}' is used by another run or plan", where, indexed("plans", i),
                           l.plans.back().label);
        }
    }
    // the views of the GUI's layout (app/gui/model/view_table.h): those a lesson can bring forward and outline
    std::string layout_views;
    size_t layout_view_count = 0;
    for (const gui::ViewName& v : gui::kViewNames)
        if (gui::lesson_region_of(v.id)) layout_views += std::string(layout_view_count++ ? ", " : "") + v.id;
    for (const auto& v : f.array("views", 1, layout_view_count)) {
        const bool known = v.is_string() && gui::lesson_region_of(v.get<std::string>());
        US_CHECK_INPUT(known, "{}: views: unknown view {} (expected one of {})", where, v.dump(), layout_views);
        l.views.push_back(v.get<std::string>());
    }
    if (f.has("highlights")) {
        const json& hs = f.array("highlights", 0, 16);
        for (size_t i = 0; i < hs.size(); ++i) {
            const std::string path = indexed("highlights", i);
            Fields h(hs[i], where, path);
            h.only({"view", "key", "run", "note"});
            Highlight hl{h.text("view"), h.text("key"), h.text("run", false), h.text("note")};
            // the GUI draws the note over the view: words for the reader, never the report key itself
            US_CHECK_INPUT(hl.note.find(hl.key) == std::string::npos,
                           "{}: {}.note: write what to look at in words, not the report key '{}'", where, path, hl.key);
            US_CHECK_INPUT(std::count(l.views.begin(), l.views.end(), hl.view),
                           "{}: {}.view: '{}' is not among the lesson's views", where, path, hl.view);
            US_CHECK_INPUT(hl.run.empty() || labels.count(hl.run), "{}: {}.run: no run is labelled '{}'", where, path,
                           hl.run);
            l.highlights.push_back(hl);
        }
    }
    const json& claims = f.array("claims", 1, 16);
    for (size_t i = 0; i < claims.size(); ++i)
        l.claims.push_back(parse_claim(claims[i], where, indexed("claims", i), labels));
    return l;
}

Lesson load_lesson_file(const fs::path& path) {
    const std::string where = path.string();
    std::ifstream in(path);
    US_CHECK_INPUT(in.good(), "{}: cannot be read", where);
    json j;
    try {
        j = json::parse(in);
    } catch (const json::exception& e) {
        fail_user("{}: not valid JSON: {}", where, e.what());
    }
    return parse_lesson(j, path.stem().string(), where);
}

LessonSet load_lessons(const fs::path& dir) {
    LessonSet set;
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".json") files.push_back(e.path());
    if (ec) {
        set.errors.push_back({dir.string(), dir.string() + ": cannot list the lessons directory: " + ec.message()});
        return set;
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
        try {
            set.lessons.push_back(load_lesson_file(file));
        } catch (const UserError& e) {
            set.errors.push_back({file.string(), e.what()});
        }
    }
    std::stable_sort(set.lessons.begin(), set.lessons.end(),
                     [](const Lesson& a, const Lesson& b) { return a.order < b.order; });
    return set;
}

const Lesson* find_lesson(const LessonSet& set, const std::string& name) {
    for (const auto& l : set.lessons)
        if (l.name == name) return &l;
    return nullptr;
}

}  // namespace us::lesson
