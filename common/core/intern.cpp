#include "common/core/intern.h"

#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace us {

const char* intern(std::string_view text) {
    static std::mutex mutex;
    static std::deque<std::string> storage;  // deque: element addresses never move
    static std::unordered_map<std::string_view, const char*> index;
    std::lock_guard lock(mutex);
    if (auto it = index.find(text); it != index.end()) return it->second;
    const std::string& kept = storage.emplace_back(text);
    index.emplace(std::string_view(kept), kept.c_str());
    return kept.c_str();
}

}  // namespace us
