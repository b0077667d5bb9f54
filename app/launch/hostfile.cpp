#include "app/launch/hostfile.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/core/check.h"

namespace us::app {

std::vector<HostEntry> read_hostfile(const std::string& path) {
    std::ifstream in(path);
    US_CHECK_INPUT(in.good(), "cannot read hostfile '{}': it must list one host per line, e.g. 'node1 slots=4'", path);
    std::vector<HostEntry> hosts;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        HostEntry h;
        if (!(words >> h.name)) continue;  // blank or comment
        std::string word;
        while (words >> word) {
            const size_t eq = word.find('=');
            const std::string key = word.substr(0, eq);
            int value = 0;
            if (eq != std::string::npos) {
                try {
                    value = std::stoi(word.substr(eq + 1));
                } catch (const std::exception&) {
                    value = 0;
                }
            }
            US_CHECK_INPUT((key == "slots" || key == "max_slots") && value > 0,
                           "hostfile '{}' line {}: '{}' is not slots=N or max_slots=N (a line is 'HOST [slots=N]')",
                           path, number, word);
            if (key == "slots") h.slots = value;
        }
        hosts.push_back(h);
    }
    US_CHECK_INPUT(!hosts.empty(), "hostfile '{}' lists no host: write one per line, e.g. 'node1 slots=4'", path);
    return hosts;
}

bool is_local_host(const std::string& name) {
    if (name == "localhost" || name == "::1" || name.rfind("127.", 0) == 0) return true;
    char self[256] = {};
    ::gethostname(self, sizeof self - 1);
    const std::string me = self;
    return name == me || (name.find('.') != std::string::npos && name.substr(0, name.find('.')) == me) ||
           (me.find('.') != std::string::npos && me.substr(0, me.find('.')) == name);
}

}  // namespace us::app
