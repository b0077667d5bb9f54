// evaluate_layouts (evaluate_layouts.h): the groups handed out to threads one at a time, the results in place.
#include "app/plan/evaluate_layouts.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>

#include "common/core/check.h"
#include "profiler/predict/shared_work.h"

namespace us::plan {

namespace {

// Where each group begins (and, last, the end): a new group wherever tp, cp or pp changes.
std::vector<size_t> group_starts(const std::vector<predict::Layout>& layouts) {
    std::vector<size_t> starts;
    for (size_t i = 0; i < layouts.size(); ++i) {
        const ParallelLayout &p = layouts[i].parallel, *q = i > 0 ? &layouts[i - 1].parallel : nullptr;
        if (!q || p.tp != q->tp || p.cp != q->cp || p.pp != q->pp) starts.push_back(i);
    }
    starts.push_back(layouts.size());
    return starts;
}

}  // namespace

std::vector<EvaluatedLayout> evaluate_layouts(const predict::ModelDesc& m, const predict::ClusterDesc& c, int64_t gpus,
                                              const std::vector<predict::Layout>& layouts, const EvaluateThreads& how) {
    std::vector<EvaluatedLayout> out(layouts.size());
    std::vector<std::exception_ptr> errors(layouts.size());
    const std::vector<size_t> starts = group_starts(layouts);
    const size_t groups = starts.size() - 1;
    // One layout: refused by the rules, evaluated, or its error kept for when every thread has stopped.
    auto one = [&](size_t i, predict::SharedWork* shared) {
        try {
            try {
                predict::check_layout(m, c, layouts[i], gpus);
            } catch (const UserError&) {
                out[i].refused = true;
                return;
            }
            out[i].result = predict::evaluate(m, c, layouts[i], shared);
        } catch (...) {
            errors[i] = std::current_exception();
        }
    };
    std::atomic<size_t> next_group{0};
    auto work = [&] {
        predict::SharedWork shared;
        for (size_t g; (g = next_group.fetch_add(1)) < groups;) {
            shared.forget();  // a group's costs are not the last one's: keep (nearly) only its own
            for (size_t i = starts[g]; i < starts[g + 1]; ++i) one(i, how.share_work ? &shared : nullptr);
        }
    };
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const size_t n = std::min(groups, how.threads > 0 ? size_t(how.threads) : cores);
    if (n <= 1) {
        work();
    } else {
        std::vector<std::thread> threads;
        try {
            for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
        } catch (const std::system_error&) {  // no thread to be had: those started and this one do it all
        }
        work();  // this thread is one of them
        for (std::thread& t : threads) t.join();
    }
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    return out;
}

}  // namespace us::plan
