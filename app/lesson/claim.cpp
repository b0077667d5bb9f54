// Evaluating a lesson's claims over its runs' reports. An operand reads dotted paths in a report (per rank for
// "rank.X"), sums them, picks a rank or aggregates, and scales; the comparison then holds or not, on every rank
// where a side is per rank. Each result says in words what was measured, what was expected and by how much it held
// or failed, with each figure's kind (measured, predicted, formula, ...) taken from its key, as the report names them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "app/lesson/lesson.h"
#include "common/core/format.h"

namespace us::lesson {
using nlohmann::json;

bool LessonCheck::held() const {
    return std::all_of(claims.begin(), claims.end(), [](const ClaimResult& c) {
        return c.status == ClaimStatus::held || c.status == ClaimStatus::not_here;
    });
}

bool LessonCheck::invalid() const {
    return std::any_of(claims.begin(), claims.end(),
                       [](const ClaimResult& c) { return c.status == ClaimStatus::invalid; });
}

namespace {

// A claim that cannot be evaluated: the message says which run, key or rank was missing.
struct Invalid {
    std::string why;
};

// The report's own naming says where a figure comes from (docs/report-schema.md).
FigureSource source_of_key(const std::string& key) {
    if (key.rfind("config.", 0) == 0) return FigureSource::setting;
    if (key.find("formula") != std::string::npos) return FigureSource::formula;
    if (key.find("predicted") != std::string::npos) return FigureSource::predicted;
    if (key.find("derived") != std::string::npos) return FigureSource::derived;
    return FigureSource::measured;
}

// A plan's JSON (`ultrascope plan --json`) holds no measurement: memory is the engine's walk, times the planner's
// model, tokens/s and MFU derived from them.
bool is_plan(const json& j) { return j.is_object() && j.contains("memory_kind") && j.contains("layout"); }

FigureSource source_of_plan_key(const std::string& key) {
    if (key.find("formula") != std::string::npos) return FigureSource::formula;
    if (key.find("mfu") != std::string::npos || key.find("tokens_per_s") != std::string::npos)
        return FigureSource::derived;
    if (key.find("time") != std::string::npos) return FigureSource::model;
    return FigureSource::predicted;
}

enum class Unit { bytes, seconds, plain };

Unit unit_of_key(const std::string& key) {
    const std::string last = key.substr(key.find_last_of('.') == std::string::npos ? 0 : key.find_last_of('.') + 1);
    if (key.find("bytes") != std::string::npos) return Unit::bytes;
    if (last.size() > 2 && last.compare(last.size() - 2, 2, "_s") == 0) return Unit::seconds;
    if (key.find("_s.") != std::string::npos) return Unit::seconds;  // comm_by_group_s.dp
    return Unit::plain;
}

std::string format_value(double v, Unit unit) {
    switch (unit) {
        case Unit::bytes:
            return format_bytes(int64_t(std::llround(v)));
        case Unit::seconds:
            return v < 1 ? fmt::format("{:.1f} ms", v * 1e3) : fmt::format("{:.3f} s", v);
        case Unit::plain:
            return fmt::format("{:.4g}", v);
    }
    return "";
}

// The value at a dotted path ("memory_peak_bytes.params", "layers.0.share"), or nullptr.
const json* at_path(const json& root, const std::string& path) {
    const json* node = &root;
    std::stringstream parts(path);
    std::string part;
    while (std::getline(parts, part, '.')) {
        if (node->is_object()) {
            auto it = node->find(part);
            if (it == node->end()) return nullptr;
            node = &*it;
        } else if (node->is_array() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
            const size_t i = std::stoul(part);
            if (i >= node->size()) return nullptr;
            node = &(*node)[i];
        } else
            return nullptr;
    }
    return node;
}

// One key read from one report: a value per rank (for rank.* keys) or one value.
struct KeyValues {
    bool per_rank = false;
    std::vector<double> numbers;
    std::vector<std::string> words;
};

KeyValues read_key(const json& report, const std::string& run, const std::string& key) {
    KeyValues out;
    std::vector<const json*> roots;
    std::string path = key;
    if (key.rfind("rank.", 0) == 0) {
        out.per_rank = true;
        path = key.substr(5);
        const json* ranks = at_path(report, "ranks");
        if (!ranks || !ranks->is_array() || ranks->empty())
            throw Invalid{fmt::format("run '{}' has no ranks in its report", run)};
        for (const auto& r : *ranks) roots.push_back(&r);
    } else
        roots.push_back(&report);
    for (size_t i = 0; i < roots.size(); ++i) {
        const json* v = at_path(*roots[i], path);
        const std::string where = out.per_rank ? fmt::format("run '{}' rank {}", run, i) : fmt::format("run '{}'", run);
        if (!v) throw Invalid{fmt::format("{}: the report has no '{}'", where, path)};
        if (v->is_null())
            throw Invalid{fmt::format("{}: '{}' is null in the report (not measured or not modelled)", where, path)};
        if (v->is_string())
            out.words.push_back(v->get<std::string>());
        else if (v->is_number() || v->is_boolean())
            out.numbers.push_back(v->is_boolean() ? double(v->get<bool>()) : v->get<double>());
        else
            throw Invalid{fmt::format("{}: '{}' is not a number or a word ({})", where, path, v->dump().substr(0, 60))};
    }
    if (!out.words.empty() && !out.numbers.empty())
        throw Invalid{fmt::format("run '{}': '{}' mixes words and numbers", run, key)};
    return out;
}

// "rank.memory_peak_bytes.{params + grads}" for keys sharing everything up to their last part.
std::string join_keys(const Operand& o) {
    const std::string& first = o.keys.front();
    const size_t dot = first.find_last_of('.');
    const std::string prefix = dot == std::string::npos ? "" : first.substr(0, dot + 1);
    bool shared = o.keys.size() > 1 && !prefix.empty();
    for (const auto& k : o.keys) shared &= k.rfind(prefix, 0) == 0 && k.find('.', prefix.size()) == std::string::npos;
    std::string s;
    for (const auto& k : o.keys) s += (s.empty() ? "" : " + ") + (shared ? k.substr(prefix.size()) : k);
    return shared ? prefix + "{" + s + "}" : s;
}

// The unit both sides are shown in: the first side whose key says (bytes, seconds); "predicted.params x 16"
// compared with bytes is bytes.
Unit claim_unit(const Claim& c) {
    for (const Operand* o : {&c.left, &c.right})
        if (!o->keys.empty() && unit_of_key(o->keys.front()) != Unit::plain) return unit_of_key(o->keys.front());
    return Unit::plain;
}

// A constant side: a number or a word, shown as written.
OperandResult constant_operand(const Operand& o, Unit unit, std::vector<int>& rank_index) {
    OperandResult r;
    r.source = FigureSource::constant;
    if (o.value) {
        r.values = {*o.value};
        r.shown = format_value(*o.value, unit);
    } else {
        r.words = {*o.word};
        r.shown = "'" + *o.word + "'";
    }
    r.what = "constant";
    rank_index = {-1};
    return r;
}

// An operand's keys read from its report and summed per rank (a key of the report's root adds to every rank).
struct SummedKeys {
    std::vector<double> sums;        // per rank (one for the root), empty of meaning for words
    std::vector<std::string> texts;  // words: the one key's, per rank
    size_t ranks = 1;
    bool per_rank = false, words = false;
};

// Step one: read every key and add them up; words cannot be summed.
SummedKeys sum_keys(const Operand& o, const json& report) {
    SummedKeys s;
    std::vector<KeyValues> keys;
    for (const auto& k : o.keys) {
        keys.push_back(read_key(report, o.run, k));
        if (keys.back().per_rank)
            s.ranks = std::max(s.ranks, std::max(keys.back().numbers.size(), keys.back().words.size()));
        s.per_rank |= keys.back().per_rank;
        s.words |= !keys.back().words.empty();
    }
    if (s.words && o.keys.size() > 1)
        throw Invalid{fmt::format("run '{}': words cannot be summed ({})", o.run, join_keys(o))};
    s.sums.assign(s.ranks, 0.0);
    s.texts = s.words ? keys.front().words : std::vector<std::string>{};
    if (!s.words)
        for (const auto& kv : keys)
            for (size_t i = 0; i < s.ranks; ++i) s.sums[i] += kv.per_rank ? kv.numbers[i] : kv.numbers[0];
    return s;
}

// Step two: the ranks taken, every one ("each"), one by its number, or one value aggregated over them (max, min,
// sum, mean). Returns how, in words (empty for a value of the report's root).
std::string pick_ranks(const Operand& o, SummedKeys& s, std::vector<int>& rank_index) {
    const size_t ranks = s.ranks;
    if (!s.per_rank) {
        rank_index = {-1};
        return "";
    }
    if (o.ranks == "each") {
        for (size_t i = 0; i < ranks; ++i) rank_index.push_back(int(i));
        return "each rank";
    }
    if (std::isdigit(static_cast<unsigned char>(o.ranks[0]))) {
        const size_t i = std::stoul(o.ranks);
        if (i >= ranks) throw Invalid{fmt::format("run '{}' has {} rank(s); rank {} does not exist", o.run, ranks, i)};
        s.sums = {s.sums[i]};
        if (s.words) s.texts = {s.texts[i]};
        rank_index = {int(i)};
        return "rank " + o.ranks;
    }
    if (s.words)
        throw Invalid{fmt::format("run '{}': '{}' is a word: take ranks 'each' or a rank number, not {}", o.run,
                                  join_keys(o), o.ranks)};
    std::vector<double>& sums = s.sums;
    double v = 0;
    int at = -1;
    if (o.ranks == "max") at = int(std::max_element(sums.begin(), sums.end()) - sums.begin());
    if (o.ranks == "min") at = int(std::min_element(sums.begin(), sums.end()) - sums.begin());
    if (at >= 0) v = sums[size_t(at)];
    for (double x : sums) v += o.ranks == "sum" || o.ranks == "mean" ? x : 0;
    if (o.ranks == "mean") v /= double(ranks);
    sums = {v};
    rank_index = {at};
    return ranks == 1                               ? "rank 0"
           : (o.ranks == "max" || o.ranks == "min") ? fmt::format("{} over {} ranks (rank {})", o.ranks, ranks, at)
                                                    : fmt::format("{} over {} ranks", o.ranks, ranks);
}

// Step three: what was read, in words, and its value or values as shown (per rank when there are several).
void describe_operand(const Operand& o, const SummedKeys& s, const std::string& how, Unit unit,
                      const std::vector<int>& rank_index, OperandResult& r) {
    r.what = fmt::format("{}: {}", o.run, join_keys(o));
    if (o.times != 1) r.what += fmt::format(" x {:.4g}", o.times);
    if (!how.empty()) r.what += ", " + how;
    r.what += fmt::format(" [{}]", source_name(r.source));
    if (s.words) {
        const std::vector<std::string>& texts = s.texts;
        r.words = texts;
        for (size_t i = 0; i < texts.size(); ++i)
            r.shown += (r.shown.empty() ? "" : ", ") +
                       (texts.size() > 1 ? fmt::format("rank {} '{}'", rank_index[i], texts[i]) : "'" + texts[i] + "'");
    } else {
        const std::vector<double>& sums = s.sums;
        r.values = sums;
        std::string shown;
        for (size_t i = 0; i < sums.size(); ++i)
            shown += (shown.empty() ? "" : ", ") +
                     (sums.size() > 1 ? fmt::format("rank {} {}", rank_index[i], format_value(sums[i], unit))
                                      : format_value(sums[i], unit));
        r.shown = shown;
    }
}

// Reads, sums, picks or aggregates, scales. `rank_index` gets each value's rank (-1 for one value of many ranks).
OperandResult evaluate_operand(const Operand& o, const std::map<std::string, json>& reports, Unit unit,
                               std::vector<int>& rank_index) {
    rank_index.clear();
    if (o.value || o.word) return constant_operand(o, unit, rank_index);
    auto it = reports.find(o.run);
    if (it == reports.end() || it->second.is_null()) throw Invalid{fmt::format("run '{}' has no report", o.run)};
    const json& report = it->second;
    OperandResult r;
    r.source = is_plan(report) ? source_of_plan_key(o.keys.front()) : source_of_key(o.keys.front());
    SummedKeys s = sum_keys(o, report);
    const std::string how = pick_ranks(o, s, rank_index);
    for (double& x : s.sums) x *= o.times;
    describe_operand(o, s, how, unit, rank_index, r);
    return r;
}

// Whether l OP r holds, and its slack relative to |r|: how far from failing when it holds (>= 0), how far past it
// when it fails (< 0). For ~, the slack is what is left of the tolerance.
struct Verdict {
    bool held = false;
    double slack = 0;
};

Verdict compare(double l, double r, Comparison op, double tolerance) {
    const double scale = r != 0 ? std::abs(r) : 1.0;
    const double above = (l - r) / scale;  // > 0: left is larger
    switch (op) {
        case Comparison::less:
            return {l < r, -above};
        case Comparison::less_equal:
            return {l <= r, -above};
        case Comparison::greater:
            return {l > r, above};
        case Comparison::greater_equal:
            return {l >= r, above};
        case Comparison::approx:
            return {std::abs(l - r) <= tolerance * std::abs(r), tolerance - std::abs(above)};
        case Comparison::equal:
            return {l == r, -std::abs(above)};
    }
    return {};
}

}  // namespace

ClaimResult evaluate_claim(const Claim& claim, const std::map<std::string, json>& reports) {
    if (!claim.when.empty()) {  // what it needs of the machine first: where that fails, it is not checked here
        const ClaimResult needs = evaluate_claim(claim.when.front(), reports);
        if (needs.status != ClaimStatus::held) {
            ClaimResult out = needs;
            out.says = claim.says;
            if (needs.status == ClaimStatus::failed) {
                out.status = ClaimStatus::not_here;
                out.explanation = fmt::format(
                    "{}: not checked on this machine: it needs {}, and here {} = {} ({} {} "
                    "= {} does not hold).",
                    claim.says, claim.when.front().says, needs.measured.what, needs.measured.shown, needs.comparison,
                    needs.expected.what, needs.expected.shown);
            }
            return out;
        }
    }
    ClaimResult out;
    out.says = claim.says;
    out.comparison = comparison_symbol(claim.op);
    if (claim.op == Comparison::approx) out.comparison += fmt::format(" within {:.3g}%", claim.tolerance * 100);
    std::vector<int> left_ranks, right_ranks;
    try {
        const Unit unit = claim_unit(claim);
        out.measured = evaluate_operand(claim.left, reports, unit, left_ranks);
        out.expected = evaluate_operand(claim.right, reports, unit, right_ranks);
        const bool words = !out.measured.words.empty() || !out.expected.words.empty();
        if (words && (out.measured.words.empty() || out.expected.words.empty()))
            throw Invalid{"a word is compared with a number"};
        const std::vector<std::string>& lw = out.measured.words;
        const std::vector<std::string>& rw = out.expected.words;
        const size_t nl = words ? lw.size() : out.measured.values.size();
        const size_t nr = words ? rw.size() : out.expected.values.size();
        if (nl > 1 && nr > 1 && nl != nr)
            throw Invalid{fmt::format("per-rank sides of different sizes ({} and {} ranks)", nl, nr)};
        if (words && claim.op != Comparison::equal) throw Invalid{"words can only be compared with =="};

        // Every pair must hold; remember the one closest to failing (or furthest past it).
        const size_t n = std::max(nl, nr);
        bool all_held = true;
        double worst = 1e300;
        size_t worst_i = 0;
        for (size_t i = 0; i < n; ++i) {
            Verdict v;
            if (words)
                v = {lw[nl > 1 ? i : 0] == rw[nr > 1 ? i : 0], 0};
            else
                v = compare(out.measured.values[nl > 1 ? i : 0], out.expected.values[nr > 1 ? i : 0], claim.op,
                            claim.tolerance);
            // The worst pair: the first that fails, or (all holding) the one with the least slack.
            const bool worse = all_held ? (!v.held || v.slack < worst) : (!v.held && v.slack < worst);
            if (worse) worst = v.slack, worst_i = i;
            all_held &= v.held;
        }
        out.status = all_held ? ClaimStatus::held : ClaimStatus::failed;
        const int lrank = left_ranks[nl > 1 ? worst_i : 0], rrank = right_ranks[nr > 1 ? worst_i : 0];
        out.worst_rank = n > 1 ? (lrank >= 0 ? lrank : rrank) : -1;

        if (!words) {
            const double l = out.measured.values[nl > 1 ? worst_i : 0], r = out.expected.values[nr > 1 ? worst_i : 0];
            if (r != 0)
                out.difference = fmt::format("{:+.2f}%", (l - r) / std::abs(r) * 100);
            else
                out.difference = fmt::format("{:+.4g}", l - r);
        }
        if (n > 1) out.difference += (out.difference.empty() ? "" : " ") + fmt::format("(rank {})", out.worst_rank);
        out.explanation =
            fmt::format("{}: measured {} = {}; expected {} {} = {}; left against right {}: {}.", claim.says,
                        out.measured.what, out.measured.shown, out.comparison, out.expected.what, out.expected.shown,
                        out.difference, out.status == ClaimStatus::held ? "holds" : "does NOT hold");
        if (!claim.why.empty()) out.explanation += " Why: " + claim.why;
    } catch (const Invalid& e) {
        out.status = ClaimStatus::invalid;
        out.explanation = fmt::format("{}: cannot be evaluated: {}.", claim.says, e.why);
    }
    return out;
}

}  // namespace us::lesson
