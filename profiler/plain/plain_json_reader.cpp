// JSON into plain data through nlohmann's SAX interface (plain_json_reader.h): no document tree, no recursion; the
// open arrays and objects are an explicit stack.
#include "profiler/plain/plain_json_reader.h"

#include <nlohmann/json.hpp>

#include "common/core/check.h"

namespace us::plain {
namespace {

class PlainJsonBuilder : public nlohmann::json_sax<nlohmann::json> {
public:
    PlainJsonBuilder(PlainData& data, const std::string& source, size_t max_depth)
        : data_(data), source_(source), max_depth_(max_depth) {}
    std::string error;

    bool null() override { return put(data_.add_none()); }
    bool boolean(bool b) override { return put(data_.add_bool(b)); }
    bool number_integer(number_integer_t i) override { return put(data_.add_int(i)); }
    bool number_unsigned(number_unsigned_t u) override {
        return put(u <= uint64_t(INT64_MAX) ? data_.add_int(int64_t(u)) : data_.add_float(double(u)));
    }
    bool number_float(number_float_t d, const string_t&) override { return put(data_.add_float(d)); }
    bool string(string_t& s) override { return put(data_.add_text(PlainKind::string, s)); }
    bool binary(binary_t&) override { return fail("binary values are not JSON"); }
    bool key(string_t& s) override { return put(data_.add_text(PlainKind::string, s)); }
    bool start_object(std::size_t) override { return open(PlainKind::dict); }
    bool start_array(std::size_t) override { return open(PlainKind::list); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
        return fail(ex.what());
    }

private:
    PlainData& data_;
    const std::string& source_;
    size_t max_depth_;
    std::vector<std::pair<ValueId, size_t>> open_;  // open containers and where their items start in `items_`
    std::vector<ValueId> items_;

    bool fail(const std::string& what) {
        error = what;
        return false;
    }
    bool put(ValueId v) {
        if (open_.empty())
            data_.root = v;
        else
            items_.push_back(v);
        return true;
    }
    bool open(PlainKind kind) {
        if (open_.size() >= max_depth_) return fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
        const ValueId c = data_.add_container(kind);
        open_.emplace_back(c, items_.size());
        return true;
    }
    bool close() {
        const auto [c, start] = open_.back();
        open_.pop_back();
        data_.append(c, std::span<const ValueId>(items_.data() + start, items_.size() - start));
        items_.resize(start);
        return put(c);
    }
};

}  // namespace

PlainData read_plain_json(std::string_view bytes, const std::string& source, size_t max_depth) {
    PlainData data;
    PlainJsonBuilder builder(data, source, max_depth);
    const bool ok = nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &builder);
    US_CHECK_INPUT(ok && builder.error.empty() && data.root != no_value, "{}: not valid JSON: {}", source,
                   builder.error.empty() ? "no value" : builder.error);
    data.finish();
    return data;
}

}  // namespace us::plain
