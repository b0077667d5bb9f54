#include "profiler/trace/text_output.h"

#include "common/core/check.h"

namespace us::prof {

TextOutput::TextOutput(const std::string& path, bool gz) : m_gz(gz) {
    if (gz)
        m_gzfile = gzopen(path.c_str(), "wb6");
    else
        m_file = std::fopen(path.c_str(), "wb");
    US_CHECK_INPUT(m_gzfile || m_file, "cannot create '{}' (is the folder writable?)", path);
}

void TextOutput::write(const std::string& s) {
    if (s.empty()) return;
    if (m_gz)
        m_ok &= gzwrite(m_gzfile, s.data(), unsigned(s.size())) == int(s.size());
    else
        m_ok &= std::fwrite(s.data(), 1, s.size(), m_file) == s.size();
}

bool TextOutput::close() {
    if (m_gzfile) m_ok &= gzclose(m_gzfile) == Z_OK;
    if (m_file) m_ok &= std::fclose(m_file) == 0;
    m_gzfile = nullptr, m_file = nullptr;
    return m_ok;
}

}  // namespace us::prof
