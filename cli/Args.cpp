#include "cli/Args.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace cleave {

int usageError(const std::string &message, const char *usage) {
  std::fflush(stdout);
  std::fprintf(stderr, "cleave: error: %s\n\n%s", message.c_str(), usage);
  return 1;
}

bool optionValue(int argc, char **argv, int &i, const char *name, const char **value) {
  size_t n = std::strlen(name);
  if (std::strncmp(argv[i], name, n) != 0)
    return false;
  if (argv[i][n] == '=') {
    *value = argv[i] + n + 1;
    return true;
  }
  if (argv[i][n] != '\0')
    return false;
  *value = i + 1 < argc ? argv[++i] : nullptr;
  return true;
}

bool parseInteger(const char *text, int64_t &out, int64_t min, int64_t max) {
  if (!text || !*text || std::strchr(" \t\n+", *text))
    return false;
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max)
    return false;
  out = value;
  return true;
}

std::string selfPath() {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, n) : std::string("cleave");
}

} // namespace cleave
