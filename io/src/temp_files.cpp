// lnorm/temp_files.hpp: a fixed table of paths, each slot claimed with an atomic flag, so that a signal handler can
// read it at any moment without a lock.
#include "lnorm/temp_files.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace lnorm::io {

namespace {

struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being written, 2 holds a path the handler may unlink
  char path[4096];
};
Slot g_slots[kMaxTemps];

}  // namespace

int register_temp(const std::string& path) {
  if (path.empty() || path.size() >= sizeof g_slots[0].path) return -1;
  for (int i = 0; i < kMaxTemps; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(2);  // published only once the path is whole
    return i;
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0 && slot < kMaxTemps) g_slots[slot].state.store(0);
}

void remove_registered_temps() noexcept {
  for (Slot& s : g_slots)
    if (s.state.load() == 2) ::unlink(s.path);
  // Then the folders (a command's fresh output folder), once the files in them are gone: rmdir removes only an empty
  // one, and fails harmlessly on a path unlink already removed.
  for (Slot& s : g_slots)
    if (s.state.load() == 2) ::rmdir(s.path);
}

}  // namespace lnorm::io
