// The default training corpus: the committed assets/corpus/default.txt must be exactly what the generator
// produces (so a change to the grammar cannot silently leave a stale file), and the text must stay within the
// size, byte set and variety that docs/corpus.md promises.
#include "catch_compat.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/tools/corpus/corpus.h"

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> non_empty_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(line);
    return lines;
}

// The generated text is computed once: it is a few milliseconds, but four test cases use it.
const std::string& default_corpus() {
    static const std::string text = us::generate_default_corpus();
    return text;
}

}  // namespace

TEST_CASE("the committed corpus equals the generator's output", "[cpu][corpus]") {
    const std::string path = US_SOURCE_DIR "/assets/corpus/default.txt";
    const std::string committed = read_file(path);
    const std::string& generated = default_corpus();
    const auto diff = std::mismatch(committed.begin(), committed.end(), generated.begin(), generated.end());
    INFO(path << " differs from generate_default_corpus() (" << committed.size() << " vs " << generated.size()
              << " bytes, first difference at byte " << (diff.first - committed.begin())
              << "); regenerate it with: build/bin/make_corpus "
                 "assets/corpus/default.txt");
    // A boolean, not the strings: Catch would print both megabytes.
    const bool same = committed == generated;
    REQUIRE(same);
}

TEST_CASE("the corpus generator is deterministic", "[cpu][corpus]") {
    const std::string first = us::generate_default_corpus();
    const std::string second = us::generate_default_corpus();
    REQUIRE(first.size() == second.size());
    REQUIRE((first == second));
    // Another seed gives other text under the same grammar.
    const std::string other = us::generate_corpus(us::k_default_corpus_seed + 1, 1 << 16);
    REQUIRE(other.size() >= size_t(1 << 16));
    REQUIRE((other.substr(0, 4096) != first.substr(0, 4096)));
}

TEST_CASE("the corpus is 0.8 to 1.5 MiB of printable ASCII with Unix newlines", "[cpu][corpus]") {
    const std::string& text = default_corpus();
    CHECK(text.size() >= size_t(0.8 * (1 << 20)));
    CHECK(text.size() <= size_t(1.5 * (1 << 20)));
    size_t bad = 0;
    for (unsigned char c : text)
        if (!(c == '\n' || (c >= 32 && c <= 126))) ++bad;
    CHECK(bad == 0);
    REQUIRE(!text.empty());
    CHECK(text.back() == '\n');
    CHECK(text.find("\n\n\n") == std::string::npos);
    CHECK(text.find(" \n") == std::string::npos);
}

TEST_CASE("the corpus has enough variety not to be memorised line by line", "[cpu][corpus]") {
    const std::string& text = default_corpus();
    const std::vector<std::string> lines = non_empty_lines(text);
    REQUIRE(lines.size() > 5000);

    // Distinct lines: most paragraphs and dialogue turns are new.
    std::unordered_map<std::string, size_t> line_counts;
    for (const auto& line : lines) ++line_counts[line];
    size_t most_repeated = 0;
    for (const auto& [line, count] : line_counts) most_repeated = std::max(most_repeated, count);
    INFO(lines.size() << " lines, " << line_counts.size() << " distinct, the most frequent " << most_repeated
                      << " times");
    CHECK(line_counts.size() > lines.size() / 2);
    CHECK(most_repeated * 100 < lines.size());  // no line more than 1% of the time

    // Distinct words: a small vocabulary, but not a tiny one.
    std::set<std::string> words;
    std::string word;
    for (char c : text) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            word += c;
        } else if (!word.empty()) {
            words.insert(word);
            word.clear();
        }
    }
    INFO(words.size() << " distinct words");
    CHECK(words.size() > 300);
    CHECK(words.size() < 2000);

    // Every paragraph kind shows up.
    for (const char* marker : {"Chapter ", "could not find", "Where are you going?", "counted the", "came first",
                               "shopping list", "made a plan for the week", " is a ", " has a ", ": Hello, "})
        CHECK(text.find(marker) != std::string::npos);
}
