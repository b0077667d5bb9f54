// Where a file asked for at a path is written so that a failure leaves what was there (the export, the predicted
// trace, a capture's files): under a temporary name beside it, renamed over it once whole. A symbolic link is
// followed (the file it names is replaced, the link kept); a device or a pipe (/dev/stdout, a FIFO) is written in
// place, as there is nothing to keep and a rename would replace the device with a file; a folder is refused.
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
    // The whole file written: renamed over the target (UserError where that fails). Nothing to do in place.
    void commit();

private:
    std::string m_path, m_target, m_write_to;
    bool m_committed = false;
};

}  // namespace us
