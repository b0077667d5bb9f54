// The GUI's messages: a bounded log of what happened, and the one error the user must see (a banner until
// dismissed).
#pragma once

#include <deque>
#include <string>

namespace us::gui {

struct MessageLog {
    std::deque<std::string> lines;  // oldest first, at most kMaxLines
    std::string error;              // shown as a banner; "" when none

    static constexpr size_t kMaxLines = 400;
    void message(const std::string& text) {
        lines.push_back(text);
        while (lines.size() > kMaxLines) lines.pop_front();
    }
    void fail(const std::string& text) {
        error = text;
        message("error: " + text);
    }
};

}  // namespace us::gui
