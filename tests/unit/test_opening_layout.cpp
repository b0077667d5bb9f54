// The layout the window opens on, chosen by what is open (app/gui/model/opening_layout.h): a trace of several ranks
// from elsewhere opens on the Ranks view beside the timeline with the launch settings folded, a run of the engine
// opens as the table of views puts it; one table says so, for every view.
#include <string>

#include "app/gui/model/opening_layout.h"
#include "app/gui/model/view_table.h"
#include "test_util.h"

using namespace us::gui;

namespace {

Place place_of(Opened opened, const char* id) { return place_in(opening_layout(opened), *find_view_name(id)); }

}  // namespace

TEST_CASE("a trace of several ranks from elsewhere is a multi-rank trace, a run of the engine is not",
          "[cpu][viewmodel]") {
    CHECK(opened_kind({.imported = true, .ranks = 16}) == Opened::multi_rank_trace);
    CHECK(opened_kind({.imported = true, .ranks = 2}) == Opened::multi_rank_trace);
    CHECK(opened_kind({.from_digests = true}) == Opened::multi_rank_trace);     // a large run, any framework's
    CHECK(opened_kind({.imported = true, .ranks = 1}) == Opened::engine_run);   // one rank: nothing to compare
    CHECK(opened_kind({.imported = false, .ranks = 4}) == Opened::engine_run);  // launched, attached, .ustrace
    CHECK(opened_kind({}) == Opened::engine_run);                               // nothing yet: today's layout
}

TEST_CASE("a multi-rank trace opens on the Ranks view with the launch settings folded, an engine run as before",
          "[cpu][viewmodel]") {
    const OpeningLayout& engine = opening_layout(Opened::engine_run);
    CHECK_FALSE(engine.launch_folded);
    for (const ViewName& v : kViewNames) CHECK(place_in(engine, v) == v.place);  // the table of views, unchanged

    const OpeningLayout& multi = opening_layout(Opened::multi_rank_trace);
    CHECK(multi.launch_folded);
    CHECK(place_of(Opened::multi_rank_trace, "ranks") == Place::bottom_left);
    CHECK(place_of(Opened::multi_rank_trace, "memory") == Place::tab);
    for (const ViewName& v : kViewNames)
        if (std::string(v.id) != "ranks" && std::string(v.id) != "memory") CHECK(place_in(multi, v) == v.place);
}

TEST_CASE("every opening layout puts one view beside the timeline and gives each tab a label", "[cpu][viewmodel]") {
    for (const OpeningLayout& layout : kOpeningLayouts) {
        INFO(layout.beside_timeline);
        REQUIRE(find_view_name(layout.beside_timeline) != nullptr);
        int beside = 0;
        for (const ViewName& v : kViewNames) {
            beside += place_in(layout, v) == Place::bottom_left;
            if (place_in(layout, v) == Place::tab) CHECK(std::string(v.tab) != "");
        }
        CHECK(beside == 1);
    }
}

TEST_CASE("a hung job's dumps open on the Hang view beside the timeline, whatever else is open", "[cpu][viewmodel]") {
    CHECK(opened_kind({.hang = true}) == Opened::hung_job);  // `ultrascope DUMPS`
    // a live run that hung (an engine run), or dumps opened over a PyTorch trace: the hang comes first
    CHECK(opened_kind({.imported = false, .ranks = 4, .hang = true}) == Opened::hung_job);
    CHECK(opened_kind({.imported = true, .ranks = 16, .from_digests = true, .hang = true}) == Opened::hung_job);
    const OpeningLayout& hung = opening_layout(Opened::hung_job);
    CHECK(std::string(hung.name) == "hung_job");
    CHECK(hung.launch_folded);  // the settings are for a run to launch, not the dumps shown
    CHECK(place_of(Opened::hung_job, "hang") == Place::bottom_left);
    CHECK(place_of(Opened::hung_job, "memory") == Place::tab);
    CHECK(place_of(Opened::hung_job, "timeline") == Place::top);
    // elsewhere the Hang view is a tab of its own
    CHECK(place_of(Opened::engine_run, "hang") == Place::tab);
    CHECK(place_of(Opened::multi_rank_trace, "hang") == Place::tab);
    CHECK(std::string(find_view_name("hang")->tab) == "Hang");
}
