// A file written whole or not at all (common/core/output_file.h): the export, the predicted trace. The review found
// the rename replacing a symbolic link with a file and /dev/full with a regular file, and DIR.partial left behind.
#include <catch2/catch.hpp>

#include <sys/stat.h>

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
    // a chain of links: the file at its end is replaced, every link kept
    const std::string second = test::temp_path("out-link2.json");
    fs::remove(second);
    fs::create_symlink(link, second);
    {
        OutputFile file(second);
        CHECK(file.target() == fs::weakly_canonical(target).string());
        test::write_file(file.write_to(), "newer");
        file.commit();
    }
    CHECK((fs::is_symlink(second) && fs::is_symlink(link) && test::read_file(target) == "newer"));
    // devices and pipes, and links to them, are written in place through the name: never renamed over, never removed
    for (const std::string stream : {"/dev/null", "/dev/stdout"}) {
        OutputFile device(stream);
        CHECK(device.in_place());
        CHECK(device.write_to() == stream);
    }
    const std::string fifo = test::temp_path("out-fifo"), to_fifo = test::temp_path("out-to-fifo");
    fs::remove(fifo), fs::remove(to_fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    fs::create_symlink(fifo, to_fifo);
    {
        OutputFile through_link(to_fifo);
        CHECK(through_link.in_place());
        through_link.commit();
    }
    CHECK((fs::is_fifo(fifo) && fs::is_symlink(to_fifo)));
    CHECK(fs::is_character_file("/dev/null"));
    const std::string folder = test::temp_path("out-folder");
    fs::create_directories(folder);
    CHECK_THROWS_WITH(OutputFile(folder), Catch::Contains("it is a folder"));
    CHECK_THROWS_WITH(OutputFile("/nonexistent-folder/x.json"), Catch::Contains("does not exist"));
}
