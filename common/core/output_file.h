// Where a file asked for at a path is written so that a failure leaves what was there (the export, the predicted
// trace, the machine file): under a temporary name beside it, renamed over it once whole. Symbolic links are
// followed (the file at the end of the chain is replaced, the links kept); a device or a pipe (/dev/stdout, a FIFO,
// or a link to one) is written in place, as there is nothing to keep and a rename would replace the device with a
// file; a folder is refused.
#pragma once

#include <string>

namespace us {

class OutputFile {
public:
    // UserError naming `path` where it is a folder, or its folder does not exist.
    explicit OutputFile(const std::string& path);
    // Removes the temporary file unless commit() renamed it.
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    const std::string& write_to() const { return m_write_to; }  // what to open and write
    const std::string& path() const { return m_path; }          // the name asked for, for messages
    const std::string& target() const { return m_target; }      // the file replaced (links followed)
    bool in_place() const { return m_write_to == m_target; }    // a device or a pipe: written through its name
    // The whole file written: renamed over the target (UserError where that fails). Nothing to do in place.
    void commit();

private:
    std::string m_path, m_target, m_write_to;
    bool m_committed = false;
};

}  // namespace us
