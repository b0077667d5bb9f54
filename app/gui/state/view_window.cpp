#include "app/gui/state/view_window.h"

#include <algorithm>

namespace us::gui {

void ViewWindow::fit_all(const prof::TraceStore& store) {
    t0 = store.origin();
    t1 = std::max(store.end_time(), t0 + 1);
    follow = false;
}

void ViewWindow::fit_step(const prof::Report& report, int step) {
    int64_t b = INT64_MAX, e = 0;
    for (const auto& r : report.ranks)
        for (const auto& st : r.steps)
            if (st.step == step) {
                b = std::min(b, st.begin);
                e = std::max(e, st.end);
            }
    if (e <= b) return;
    const int64_t margin = (e - b) / 50;
    t0 = b - margin;
    t1 = e + margin;
    follow = false;
}

void ViewWindow::show_latest(const prof::TraceStore& store, const prof::Report& report) {
    if (store.rank_count() == 0) return;
    const int64_t end = store.end_time();
    int64_t begin = store.origin();
    for (const auto& r : report.ranks)
        if (r.steps.size() > 3) begin = std::max(begin, r.steps[r.steps.size() - 3].begin);
    t0 = begin;
    t1 = std::max(end, begin + 1);
}

void ViewWindow::zoom(double factor, int64_t around) {
    const int64_t span = t1 - t0;
    const int64_t new_span = std::max<int64_t>(1000, int64_t(double(span) * factor));
    const double rel = span > 0 ? double(around - t0) / double(span) : 0.5;
    t0 = around - int64_t(rel * double(new_span));
    t1 = t0 + new_span;
    follow = false;
}

void ViewWindow::pan(int64_t dt) {
    t0 += dt;
    t1 += dt;
    follow = false;
}

int step_at(const prof::Report& report, int64_t t) {
    for (const auto& r : report.ranks)
        for (const auto& st : r.steps)
            if (t >= st.begin && t < st.end) return st.step;
    return 0;
}

}  // namespace us::gui
