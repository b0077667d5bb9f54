// A setting's enum with its names in one table: each value's name (its flag value and JSON string, as traces and
// config files spell it) and a help line. Naming, parsing, the list of choices and the message for an unknown name
// all read the table, so a new value is one line in it.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/core/check.h"

namespace us {

template <typename E>
struct EnumName {
    E value;
    std::string_view name;
    std::string_view help;
};

template <typename E, size_t N>
using EnumTable = std::array<EnumName<E>, N>;

template <typename E, size_t N>
constexpr std::string_view enum_name(const EnumTable<E, N>& table, E value) {
    for (const EnumName<E>& e : table)
        if (e.value == value) return e.name;
    return "?";
}

template <typename E, size_t N>
std::vector<std::string_view> enum_names(const EnumTable<E, N>& table) {
    std::vector<std::string_view> names;
    for (const EnumName<E>& e : table) names.push_back(e.name);
    return names;
}

// "a | b | c": the names joined by `separator`.
template <typename E, size_t N>
std::string enum_names_text(const EnumTable<E, N>& table, std::string_view separator) {
    std::string s;
    for (size_t i = 0; i < N; ++i) s += std::string(i == 0 ? "" : separator) + std::string(table[i].name);
    return s;
}

// "a, b, c or d": the choices as the messages list them.
template <typename E, size_t N>
std::string enum_choices_text(const EnumTable<E, N>& table) {
    std::string s;
    for (size_t i = 0; i < N; ++i)
        s += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
    return s;
}

// The value named `text`; UserError "unknown --flag 'text': expected a, b or c" otherwise.
template <typename E, size_t N>
E parse_enum(const EnumTable<E, N>& table, std::string_view text, std::string_view flag) {
    for (const EnumName<E>& e : table)
        if (e.name == text) return e.value;
    fail_user("unknown {} '{}': expected {}", flag, text, enum_choices_text(table));
}

}  // namespace us
