// The key table of a Kineto event (kineto_keys.h).
#include "profiler/import/kineto_keys.h"

namespace us::prof {

// By length first: one or two comparisons a key rather than one for every key that is read.
ArgKey arg_key(std::string_view k) {
    switch (k.size()) {
        case 4:
            return k == "name" ? ArgKey::name : k == "Addr" ? ArgKey::memory_addr : ArgKey::other;
        case 5:
            return k == "bytes"   ? ArgKey::bytes
                   : k == "dtype" ? ArgKey::dtype
                   : k == "Bytes" ? ArgKey::memory_bytes
                                  : ArgKey::other;
        case 6:
            return k == "stream" ? ArgKey::stream : k == "device" ? ArgKey::device : ArgKey::other;
        case 8:
            return k == "Src Rank" ? ArgKey::src_rank : k == "Dst Rank" ? ArgKey::dst_rank : ArgKey::other;
        case 9:
            return k == "Device Id" ? ArgKey::mem_device : ArgKey::other;
        case 10:
            return k == "Input Dims"   ? ArgKey::input_dims
                   : k == "Input type" ? ArgKey::input_types
                   : k == "Group size" ? ArgKey::group_size
                                       : ArgKey::other;
        case 11:
            return k == "External id"   ? ArgKey::external_id
                   : k == "correlation" ? ArgKey::correlation
                   : k == "Device Type" ? ArgKey::mem_device_type
                                        : ArgKey::other;
        case 13:
            return k == "In msg nelems" ? ArgKey::in_nelems : ArgKey::other;
        case 14:
            return k == "Out msg nelems"   ? ArgKey::out_nelems
                   : k == "Total Reserved" ? ArgKey::total_reserved
                                           : ArgKey::other;
        case 15:
            return k == "Collective name"   ? ArgKey::collective
                   : k == "Concrete Inputs" ? ArgKey::concrete_inputs
                   : k == "Total Allocated" ? ArgKey::total_allocated
                                            : ArgKey::other;
        case 18:
            return k == "Process Group Name" ? ArgKey::pg_name : ArgKey::other;
        case 19:
            return k == "Process Group Ranks" ? ArgKey::pg_ranks : ArgKey::other;
        case 25:
            return k == "Process Group Description" ? ArgKey::pg_desc : ArgKey::other;
        default:
            return ArgKey::other;
    }
}

namespace {

int64_t* integer_arg(ArgKey key, KinetoEvent& e) {
    switch (key) {
        case ArgKey::external_id:
            return &e.external_id;
        case ArgKey::correlation:
            return &e.correlation;
        case ArgKey::stream:
            return &e.stream;
        case ArgKey::device:
            return &e.device;
        case ArgKey::bytes:
            return &e.bytes;
        case ArgKey::in_nelems:
            return &e.in_nelems;
        case ArgKey::out_nelems:
            return &e.out_nelems;
        case ArgKey::group_size:
            return &e.group_size;
        case ArgKey::src_rank:
            return &e.src_rank;
        case ArgKey::dst_rank:
            return &e.dst_rank;
        case ArgKey::mem_device:
            return &e.mem_device;
        case ArgKey::mem_device_type:
            return &e.mem_device_type;
        default:
            return nullptr;
    }
}

std::string_view* text_arg(ArgKey key, KinetoEvent& e) {
    switch (key) {
        case ArgKey::input_dims:
            return &e.input_dims;
        case ArgKey::input_types:
            return &e.input_types;
        case ArgKey::concrete_inputs:
            return &e.concrete_inputs;
        case ArgKey::memory_bytes:
            return &e.memory_bytes;
        case ArgKey::memory_addr:
            return &e.memory_addr;
        case ArgKey::stream:  // besides its integer: HTA reads a stream only when it is a number or decimal digits
            return &e.stream_text;
        default:
            return nullptr;
    }
}

double* number_arg(ArgKey key, KinetoEvent& e) {
    switch (key) {
        case ArgKey::total_allocated:
            return &e.total_allocated;
        case ArgKey::total_reserved:
            return &e.total_reserved;
        default:
            return nullptr;
    }
}

}  // namespace

std::string* string_arg(ArgKey key, KinetoEvent& e) {
    switch (key) {
        case ArgKey::collective:
            return &e.collective;
        case ArgKey::dtype:
            return &e.dtype;
        case ArgKey::pg_name:
            return &e.pg_name;
        case ArgKey::pg_desc:
            return &e.pg_desc;
        default:
            return nullptr;
    }
}

void read_arg_text(ArgKey key, std::string_view text, KinetoEvent& e) {
    if (int64_t* integer = integer_arg(key, e)) integer_from_text(text, *integer);
    if (std::string_view* view = text_arg(key, e)) *view = text;
    if (double* number = number_arg(key, e)) *number = number_from_text(text);
    if (key == ArgKey::pg_ranks) e.pg_ranks.assign(text);
}

EventKey event_key(std::string_view k) {
    switch (k.size()) {
        case 2:
            return k == "ph" ? EventKey::ph : k == "ts" ? EventKey::ts : EventKey::other;
        case 3:
            return k == "pid"   ? EventKey::pid
                   : k == "tid" ? EventKey::tid
                   : k == "cat" ? EventKey::cat
                   : k == "dur" ? EventKey::dur
                                : EventKey::other;
        case 4:
            return k == "name" ? EventKey::name : k == "args" ? EventKey::args : EventKey::other;
        default:
            return EventKey::other;
    }
}

}  // namespace us::prof
