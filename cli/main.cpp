// The `lnorm` executable; everything it does is in run_cli.cpp (a library, so it can be fuzzed in-process). Here,
// what only a process of its own may do: signal handlers (crash_guard.hpp) and forking for plugins
// (plugin_child.hpp).
#include "crash_guard.hpp"
#include "lnorm/run_cli.hpp"
#include "plugin_child.hpp"

int main(int argc, char** argv) {
  lnorm::cli::install_crash_guard();
  if (const auto parent_status = lnorm::cli::run_plugins_in_child(argc, argv)) return *parent_status;
  return lnorm::cli::run_cli(argc, argv);
}
