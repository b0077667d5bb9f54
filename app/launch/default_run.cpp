#include "app/launch/default_run.h"

#include <algorithm>
#include <cstdlib>

namespace us::app {

namespace {
bool has(const std::vector<std::string>& args, const char* flag) {
    return std::find(args.begin(), args.end(), flag) != args.end();
}

int value_of(const std::vector<std::string>& args, const char* flag, int fallback) {
    auto it = std::find(args.begin(), args.end(), flag);
    return it != args.end() && it + 1 != args.end() ? std::atoi((it + 1)->c_str()) : fallback;
}
}  // namespace

DefaultRun default_run(int ranks, const std::vector<std::string>& train_args) {
    DefaultRun run;
    if (!has(train_args, "--preset")) run.args.insert(run.args.end(), {"--preset", "small"});
    bool layout = false;
    for (const char* f : {"--dp", "--pp", "--tp", "--cp", "--ep"}) layout |= has(train_args, f);
    if (!layout && ranks == 0) {
        run.args.insert(run.args.end(), {"--dp", "2", "--pp", "2"});
        if (!has(train_args, "--grad-accum")) run.args.insert(run.args.end(), {"--grad-accum", "4"});
        // 4 micro-batches on 2 replicas make 4x the preset's batch per step: 60 steps (about a minute on two
        // cores) see as many tokens as its 200
        if (!has(train_args, "--steps")) run.args.insert(run.args.end(), {"--steps", "60"});
    } else if (!layout) {
        run.args.insert(run.args.end(), {"--dp", std::to_string(ranks)});
    }
    run.args.insert(run.args.end(), train_args.begin(), train_args.end());
    run.ranks = ranks;
    if (run.ranks == 0) {  // the product of the layout's degrees
        run.ranks = 1;
        // --ep shares the dp ranks: it is not a factor of the world
        for (const char* f : {"--dp", "--pp", "--tp", "--cp"}) run.ranks *= std::max(1, value_of(run.args, f, 1));
    }
    return run;
}

}  // namespace us::app
