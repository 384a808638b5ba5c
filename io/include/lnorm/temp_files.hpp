// Temporary output files that must not outlive the process: a signal handler (a crash, Ctrl-C, SIGTERM) removes
// them before the process ends, so an interrupted command leaves no `*.tmp.*` file beside its outputs. NpyWriter
// registers its temporary from creation until it is renamed into place or abandoned; the CLI's crash guard
// (cli/crash_guard.hpp) calls remove_registered_temps() from its handlers.
#pragma once

#include <string>

namespace lnorm::io {

// Up to kMaxTemps paths shorter than 4096 bytes at once; a path past either limit is not registered (-1), and
// then an interrupted run may leave it.
inline constexpr int kMaxTemps = 32;
int register_temp(const std::string& path);
void unregister_temp(int slot);  // slot < 0: nothing
// unlink(2) of every registered path, then rmdir(2) of each (a registered folder goes if empty): async-signal-safe
// (no allocation, no lock).
void remove_registered_temps() noexcept;

}  // namespace lnorm::io
