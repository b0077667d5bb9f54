// The report's options are declared once (app/report/report_options.h): `ultrascope report` hands them to its MPI
// worker unchanged (none dropped, as --rank and --microbatches once were), and the GUI takes the ones it uses.
#include <catch2/catch.hpp>

#include <algorithm>

#include "app/report/report_options.h"

using namespace us;

namespace {

app::ReportOptions parse(std::vector<std::string> args, app::ReportFlags which) {
    CLI::App cli;
    app::ReportOptions o;
    app::add_report_flags(cli, o, which);
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    cli.parse(args);
    return o;
}

}  // namespace

TEST_CASE("report options: the worker reads back every option the command was given", "[cpu][app][report]") {
    const app::ReportOptions given = parse({"--json", "--cluster", "machine.json", "--store-cap-mib", "300",
                                            "--microbatches", "8", "--rank", "3,7", "--threads", "2", "--no-cache"},
                                           app::ReportFlags::command);
    CHECK(given.ranks == std::vector<int>{3, 7});
    CHECK(given.store_cap_bytes() == size_t(300) << 20);
    const app::ReportOptions worker = parse(app::worker_args(given), app::ReportFlags::worker);
    CHECK(worker.json);
    CHECK(worker.cluster_file == "machine.json");
    CHECK(worker.store_cap_mib == 300);
    CHECK(worker.microbatches == 8);
    CHECK(worker.ranks == std::vector<int>{3, 7});
    CHECK(worker.threads == 2);
    CHECK(worker.no_cache);
    CHECK_FALSE(worker.digests_only);
    CHECK(parse(app::worker_args(parse({"--digests"}, app::ReportFlags::command)), app::ReportFlags::worker)
              .digests_only);
}

TEST_CASE("report options: the GUI takes the micro-batches, not the command's output or digest flags",
          "[cpu][app][report]") {
    CHECK(parse({"--microbatches", "4"}, app::ReportFlags::gui).microbatches == 4);
    CHECK_THROWS(parse({"--json"}, app::ReportFlags::gui));
    CHECK_THROWS(parse({"--rank", "1"}, app::ReportFlags::gui));
    CHECK_THROWS(parse({"--microbatches", "0"}, app::ReportFlags::command));  // a count, at least 1
}
