// What holds a GPU's memory outside the tracked allocator, named where the engine can tell. The allocator sees
// every tensor, cache and workspace (the memory anatomy); the CUDA context, cuBLAS's handles, NCCL's communicator
// buffers and CUPTI's take device memory behind its back and show as the untracked band. Each is read as the
// device's memory in use less the allocator's reserved bytes, before and after it starts. The readings are
// device-wide: another process that allocates on the same GPU meanwhile (ranks sharing it start together) counts
// in the part it started during, which the report's label says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/transport/rank_metadata.h"

namespace us {

class Backend;

class DeviceFootprint {
public:
    // The device's memory in use less the allocator's reserved bytes; -1 where the device reading is unknown.
    static int64_t untracked(int64_t device_used, int64_t allocator_reserved);
    // The same now; -1 where the backend cannot say (CPU).
    static int64_t untracked_now(Backend& backend);
    // A part: what the untracked bytes grew by from `before` to `now` (a part that shrank, another process having
    // freed memory meanwhile, counts 0); nothing where either reading is unknown.
    void note(const std::string& name, int64_t before, int64_t now);
    // At the backend's start: all it holds untracked so far (the CUDA context, cuBLAS).
    void note_start(Backend& backend, const std::string& name) { note(name, 0, untracked_now(backend)); }
    // After a library started: what it took since `before` (untracked_now then).
    void note_since(Backend& backend, const std::string& name, int64_t before) {
        note(name, before, untracked_now(backend));
    }
    const std::vector<prof::DeviceMemoryPart>& parts() const { return m_parts; }

private:
    std::vector<prof::DeviceMemoryPart> m_parts;
};

// The process's: the backend's start, the communicators and the profiler each add their part.
DeviceFootprint& device_footprint();

}  // namespace us
