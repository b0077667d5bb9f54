#include "profiler/predict/json_fields.h"

#include <fstream>
#include <sstream>

#include "common/core/check.h"

namespace us::predict {

JsonFields::JsonFields(const nlohmann::json& j, std::string where, std::initializer_list<const char*> known)
    : m_j(j), m_where(std::move(where)) {
    US_CHECK_INPUT(j.is_object(), "{}: expected a JSON object", m_where);
    for (const auto& [key, value] : j.items()) {
        bool ok = false;
        std::string list;
        for (const char* k : known) {
            ok = ok || key == k;
            list += (list.empty() ? "" : ", ") + std::string(k);
        }
        US_CHECK_INPUT(ok, "{}: unknown field '{}' (known fields: {})", m_where, key, list);
    }
}

bool JsonFields::has(const char* key) const { return m_j.contains(key) && !m_j[key].is_null(); }

const nlohmann::json& JsonFields::raw(const char* key) const { return m_j.at(key); }

std::string JsonFields::text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    US_CHECK_INPUT(m_j[key].is_string(), "{}: field '{}' must be a string (got {})", m_where, key, m_j[key].dump());
    return m_j[key].get<std::string>();
}

std::string JsonFields::required_text(const char* key) const {
    US_CHECK_INPUT(has(key), "{}: missing field '{}' (a string)", m_where, key);
    return text(key, "");
}

int64_t JsonFields::integer(const char* key, int64_t fallback, int64_t min) const {
    if (!has(key)) return fallback;
    const auto& v = m_j[key];
    US_CHECK_INPUT(
        v.is_number_integer() || (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>()))),
        "{}: field '{}' must be a whole number (got {})", m_where, key, v.dump());
    const int64_t x = v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
    US_CHECK_INPUT(x >= min, "{}: field '{}' must be at least {} (got {})", m_where, key, min, x);
    return x;
}

int64_t JsonFields::required_integer(const char* key, int64_t min) const {
    US_CHECK_INPUT(has(key), "{}: missing field '{}' (a whole number)", m_where, key);
    return integer(key, 0, min);
}

double JsonFields::number(const char* key, double fallback, double min) const {
    if (!has(key)) return fallback;
    US_CHECK_INPUT(m_j[key].is_number(), "{}: field '{}' must be a number (got {})", m_where, key, m_j[key].dump());
    const double x = m_j[key].get<double>();
    US_CHECK_INPUT(x >= min, "{}: field '{}' must be at least {} (got {})", m_where, key, min, x);
    return x;
}

double JsonFields::required_number(const char* key, double min_exclusive) const {
    US_CHECK_INPUT(has(key), "{}: missing field '{}' (a number)", m_where, key);
    US_CHECK_INPUT(m_j[key].is_number(), "{}: field '{}' must be a number (got {})", m_where, key, m_j[key].dump());
    const double x = m_j[key].get<double>();
    US_CHECK_INPUT(x > min_exclusive, "{}: field '{}' must be greater than {} (got {})", m_where, key, min_exclusive,
                   x);
    return x;
}

bool JsonFields::boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    US_CHECK_INPUT(m_j[key].is_boolean(), "{}: field '{}' must be true or false (got {})", m_where, key,
                   m_j[key].dump());
    return m_j[key].get<bool>();
}

const nlohmann::json& JsonFields::object(const char* key) const {
    US_CHECK_INPUT(has(key) && m_j[key].is_object(), "{}: missing field '{}' (an object)", m_where, key);
    return m_j[key];
}

nlohmann::json read_json_file(const std::string& path) {
    std::ifstream in(path);
    US_CHECK_INPUT(in.good(), "cannot read '{}': check the path", path);
    std::stringstream text;
    text << in.rdbuf();
    try {
        return nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
        fail_user("'{}' is not valid JSON: {}", path, e.what());
    }
}

}  // namespace us::predict
