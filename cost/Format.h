//===- Format.h - Quantities for people: 1.2K, 3.4 GiB, 5.6 ms --*- C++ -*-===//
#pragma once

#include <cstdio>
#include <string>

namespace cleave::cost {

/// Decimal suffixes: 950, 1.2K, 3.4M, 145.6B, 1.0T, 2.5P (FLOPs, counts).
inline std::string humanCount(double value) {
  const char *suffixes[] = {"", "K", "M", "B", "T", "P", "E"};
  int i = 0;
  while (value >= 1000 && i < 6) {
    value /= 1000;
    ++i;
  }
  char text[32];
  if (i == 0)
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(value));
  else
    std::snprintf(text, sizeof text, "%.1f%s", value, suffixes[i]);
  return text;
}

/// Binary units: 512 B, 1.5 KiB, 68.0 MiB, 80.0 GiB.
inline std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  while (bytes >= 1024 && i < 5) {
    bytes /= 1024;
    ++i;
  }
  char text[32];
  if (i == 0)
    std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(text, sizeof text, "%.1f %s", bytes, units[i]);
  return text;
}

/// Seconds in the unit that reads best: 0.32 us, 12.3 us, 4.56 ms, 1.23 s.
inline std::string humanSeconds(double seconds) {
  char text[32];
  if (seconds < 1e-5)
    std::snprintf(text, sizeof text, "%.2f us", seconds * 1e6);
  else if (seconds < 1e-3)
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  else if (seconds < 1)
    std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

} // namespace cleave::cost
