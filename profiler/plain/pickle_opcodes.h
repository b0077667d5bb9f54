// The pickle opcodes the plain-data machine (pickle_reader.cpp) names in tables rather than in its code: those it
// refuses (classes, calls, persistent ids), protocol 0 and 1's text opcodes, and the strings and bytes it reads by
// the width of their length prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "profiler/plain/plain_data.h"

namespace us::plain {

// The opcodes that build objects from classes or calls: refused, by name.
inline constexpr std::pair<uint8_t, const char*> kRefusedOpcodes[] = {
    {'c', "GLOBAL"},     {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"}, {'b', "BUILD"},        {0x81, "NEWOBJ"},
    {0x92, "NEWOBJ_EX"}, {'i', "INST"},          {'o', "OBJ"},    {'P', "PERSID"},       {'Q', "BINPERSID"},
    {0x82, "EXT1"},      {0x83, "EXT2"},         {0x84, "EXT4"},  {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};

// Protocol 0 and 1's text opcodes: plain data, but never written by protocols 2 to 5.
inline constexpr std::pair<uint8_t, const char*> kTextOpcodes[] = {
    {'I', "INT"}, {'L', "LONG"}, {'F', "FLOAT"}, {'S', "STRING"}, {'V', "UNICODE"}, {'p', "PUT"}, {'g', "GET"}};

// The name `op` has in `table`, or nullptr.
template <size_t N>
constexpr const char* opcode_name(const std::pair<uint8_t, const char*> (&table)[N], uint8_t op) {
    for (const auto& [code, name] : table)
        if (code == op) return name;
    return nullptr;
}

// The opcodes that push a string or bytes: the width of their length prefix and what they hold.
struct TextOpcode {
    uint8_t op;
    int length_bytes;
    PlainKind kind;
    const char* name;
};
inline constexpr TextOpcode kSizedTextOpcodes[] = {
    {0x8c, 1, PlainKind::string, "SHORT_BINUNICODE"}, {'X', 4, PlainKind::string, "BINUNICODE"},
    {0x8d, 8, PlainKind::string, "BINUNICODE8"},      {'U', 1, PlainKind::string, "SHORT_BINSTRING"},
    {'T', 4, PlainKind::string, "BINSTRING"},         {'C', 1, PlainKind::bytes, "SHORT_BINBYTES"},
    {'B', 4, PlainKind::bytes, "BINBYTES"},           {0x8e, 8, PlainKind::bytes, "BINBYTES8"},
    {0x96, 8, PlainKind::bytes, "BYTEARRAY8"}};

}  // namespace us::plain
