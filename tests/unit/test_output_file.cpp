// A file written whole or not at all (common/core/output_file.h): the export, the predicted trace. The review found
// the rename replacing a symbolic link with a file and /dev/full with a regular file, and DIR.partial left behind.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "common/core/check.h"
#include "common/core/output_file.h"
#include "test_util.h"

using namespace us;
namespace fs = std::filesystem;

TEST_CASE("output file: written beside and renamed whole, a failure leaves what was there", "[cpu][core]") {
    const std::string path = test::temp_path("out-file.json");
    test::write_file(path, "old");
    {
        OutputFile file(path);
        CHECK(file.write_to() != path);
        test::write_file(file.write_to(), "half");
        // no commit: as an error thrown mid-write leaves it
    }
    CHECK(test::read_file(path) == "old");
    for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
        CHECK(e.path().filename().string().find("out-file.json.partial") == std::string::npos);
    {
        OutputFile file(path);
        test::write_file(file.write_to(), "new");
        file.commit();
    }
    CHECK(test::read_file(path) == "new");
}

TEST_CASE("output file: a link's file is replaced and the link kept, a device written in place, a folder refused",
          "[cpu][core]") {
    const std::string target = test::temp_path("out-target.json"), link = test::temp_path("out-link.json");
    test::write_file(target, "old");
    fs::remove(link);
    fs::create_symlink(fs::path(target).filename(), link);  // relative, as `ln -s target.json link.json` makes it
    {
        OutputFile file(link);
        test::write_file(file.write_to(), "new");
        file.commit();
    }
    CHECK(fs::is_symlink(link));
    CHECK(test::read_file(target) == "new");
    OutputFile device("/dev/null");
    CHECK(device.write_to() == "/dev/null");
    device.commit();
    CHECK(fs::is_character_file("/dev/null"));
    const std::string folder = test::temp_path("out-folder");
    fs::create_directories(folder);
    CHECK_THROWS_WITH(OutputFile(folder), Catch::Contains("it is a folder"));
    CHECK_THROWS_WITH(OutputFile("/nonexistent-folder/x.json"), Catch::Contains("does not exist"));
}
