// The pieces that keep launches from hanging silently and clean up after killed ones (app/launch/progress_deadline.h,
// process_tree.h, stale_runs.h): a deadline that expires without progress and says so, a pace that sizes the next
// one, a process tree found and ended whole, and a killed command's temporary files told from a live one's.
#include <filesystem>

#include "app/launch/process_tree.h"
#include "app/launch/progress_deadline.h"
#include "app/launch/stale_runs.h"
#include "test_util.h"

using namespace us::app;
namespace fs = std::filesystem;

TEST_CASE("a progress deadline expires after its seconds without progress and names what stalled", "[cpu][deadline]") {
    ProgressDeadline d("the collective benchmark", 0.2);
    CHECK_FALSE(d.expired());
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    d.progress("'all_reduce 4096'");
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    CHECK_FALSE(d.expired());  // progress restarted its clock
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    CHECK(d.expired());
    CHECK(d.longest_wait_seconds() >= 0.25);
    const std::string m = d.stalled_message("Try again.");
    INFO(m);
    CHECK(m.rfind("the collective benchmark made no progress for 0 s (its deadline: 0.2 s): nothing since ", 0) == 0);
    CHECK(m.find("; its last sign of progress: 'all_reduce 4096'. Ended it and every process it started. Try again.") !=
          std::string::npos);
    ProgressDeadline silent("a launch", 1);
    CHECK(silent.stalled_message("").find(", when it started.") != std::string::npos);
}

TEST_CASE("a launch pace: a fixed deadline, else a floor or ten times the longest wait seen", "[cpu][deadline]") {
    LaunchPace pace;
    CHECK(pace.deadline_seconds() == 120);
    pace.longest_wait_seconds = 30;
    CHECK(pace.deadline_seconds() == 300);
    pace.fixed_seconds = 5;
    CHECK(pace.deadline_seconds() == 5);
    CHECK(last_line_of("a\nstep 3/6 loss 4.1\n\n") == "'step 3/6 loss 4.1'");
    CHECK(last_line_of("\n \n").empty());
    CHECK(last_line_of(std::string(200, 'x')).size() == 82);
}

TEST_CASE("a process tree is found whole and ended together, identities survive id reuse", "[cpu][deadline]") {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::execl("/bin/sh", "sh", "-c", "sleep 100 & sleep 101 & wait", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    std::vector<ProcessId> tree;
    for (int i = 0; i < 100 && tree.size() < 3; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        tree = process_tree(child);
    }
    REQUIRE(tree.size() == 3);  // the shell and its two sleeps, parents first
    CHECK(tree[0].pid == child);
    CHECK(still_running(tree[1]));
    CHECK_FALSE(still_running({tree[1].pid, tree[1].start + 1}));  // another process with the same id
    CHECK(parse_owner_tag(owner_tag(tree[1])) == tree[1]);
    CHECK(parse_owner_tag("12x").pid == 0);
    CHECK(kill_processes(tree) == 3);
    ::waitpid(child, nullptr, 0);
    for (int i = 0; i < 100 && (still_running(tree[1]) || still_running(tree[2])); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const ProcessId& p : tree) CHECK_FALSE(still_running(p));
}

TEST_CASE("a killed command's temporary files are removed, a running one's kept", "[cpu][deadline]") {
    const pid_t gone = ::fork();  // an id whose process has ended
    REQUIRE(gone >= 0);
    if (gone == 0) ::_exit(0);
    ::waitpid(gone, nullptr, 0);
    const fs::path dir = us::test::temp_path("stale-temporary");
    fs::remove_all(dir);
    fs::create_directories(dir / ("ultrascope-calibrate-" + std::to_string(gone)));
    us::test::write_file((dir / ("ultrascope-calibrate-" + std::to_string(gone) + "-nodes-0.ustrace.r0")).string(),
                         "x");
    fs::create_directories(dir / ("ultrascope-calibrate-" + std::to_string(::getpid())));
    fs::create_directories(dir / "ultrascope-calibrate-notanumber");
    const std::vector<std::string> lines = remove_stale_temporary(dir, "ultrascope-calibrate-");
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("killed run (pid " + std::to_string(gone) + ", no longer running)") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / ("ultrascope-calibrate-" + std::to_string(gone))));
    CHECK(fs::exists(dir / ("ultrascope-calibrate-" + std::to_string(::getpid()))));
    CHECK(fs::exists(dir / "ultrascope-calibrate-notanumber"));
}
