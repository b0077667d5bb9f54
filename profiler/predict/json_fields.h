// Reading description files (models, clusters, machine files) with messages that name the file and the field: every
// key must be known, every value of the expected type and range. Throws us::UserError (exit code 2 in the commands).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace us::predict {

class JsonFields {
public:
    // `where` names the file (or object inside it) in messages; `known` lists every key the object may have.
    JsonFields(const nlohmann::json& j, std::string where, std::initializer_list<const char*> known);

    bool has(const char* key) const;
    std::string text(const char* key, const std::string& fallback) const;
    std::string required_text(const char* key) const;
    int64_t integer(const char* key, int64_t fallback, int64_t min = 0) const;  // >= min
    int64_t required_integer(const char* key, int64_t min = 1) const;
    double number(const char* key, double fallback, double min = 0) const;    // >= min
    double required_number(const char* key, double min_exclusive = 0) const;  // > min_exclusive
    bool boolean(const char* key, bool fallback) const;
    const nlohmann::json& object(const char* key) const;  // required, an object
    const nlohmann::json& raw(const char* key) const;
    const std::string& where() const { return m_where; }

private:
    const nlohmann::json& m_j;
    std::string m_where;
};

// Parses a JSON file; UserError naming the file when it cannot be read or is not JSON.
nlohmann::json read_json_file(const std::string& path);

}  // namespace us::predict
