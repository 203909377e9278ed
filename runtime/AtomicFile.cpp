//===- AtomicFile.cpp - Files that appear complete or not at all ----------===//

#include "runtime/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace cleave::runtime {

Status writeFileAtomically(const std::string &path,
                           const std::function<Status(std::ostream &)> &write) {
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return CLEAVE_ERROR(path, ": cannot create (temporary file ", tmp,
                          "): ", std::strerror(errno));
    Status written = write(out);
    out.flush();
    if (!written.ok() || !out) {
      int err = errno;
      out.close();
      std::remove(tmp.c_str());
      if (!written.ok())
        return written;
      return CLEAVE_ERROR(path, ": write failed: ", std::strerror(err));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return CLEAVE_ERROR(path, ": cannot replace: ", std::strerror(err));
  }
  return {};
}

Status writeFileAtomically(const std::string &path, const std::string &text) {
  return writeFileAtomically(path, [&](std::ostream &out) {
    out << text;
    return Status();
  });
}

} // namespace cleave::runtime
