// Writes the default training corpus (tooling for the committed asset, not part of the engine, which only reads it):
//   build/bin/make_corpus assets/corpus/default.txt
// The file is written beside its destination and renamed over it, so a failure leaves the old one.
#include <cstdio>
#include <fstream>
#include <string>

#include "tests/tools/corpus/corpus.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_corpus OUT.txt   (the repository's copy is assets/corpus/default.txt)\n");
        return 2;
    }
    const std::string path = argv[1], tmp = path + ".tmp";
    const std::string text = us::generate_default_corpus();
    std::ofstream out(tmp, std::ios::binary);
    out.write(text.data(), std::streamsize(text.size()));
    out.close();
    if (out.fail() || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        std::fprintf(stderr, "make_corpus: cannot write '%s'\n", path.c_str());
        return 1;
    }
    std::printf("wrote %zu bytes to %s\n", text.size(), path.c_str());
    return 0;
}
