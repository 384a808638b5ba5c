// `--plugin PATH.so`: users' own kernels, loaded through the C ABI of lnorm/plugin.h and appended to
// the one registry (after the built-in kernels) as "<plugin>:<kernel>". Every command that takes
// kernels adds the flag with one call: add_plugin_flag(cmd).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lnorm/kernel.hpp"

namespace lnorm::cli {

// Adds `--plugin PATH.so` (repeatable) to cmd. Each file is loaded while the command line is parsed,
// so by the time the command's callback runs its kernels are in registry() and --kernel finds them.
void add_plugin_flag(CLI::App* cmd);

// dlopens the file, checks its ABI version and kernels, and appends them to the registry. Throws
// InputError "--plugin PATH: ..." (exit 2) naming what is wrong: dlerror, a missing entry symbol, an
// ABI version other than ours (both versions named), a bad or duplicate name.
void load_plugin(const std::string& path);

// --kernel values of verify and report: names, "all" (every kernel in the registry) and "plugins"
// (every kernel the --plugin files brought; lnorm_add_accuracy_test's default). Throws InputError
// for an unknown name, or "plugins" without a --plugin.
std::vector<const KernelInfo*> kernels_flag(const std::vector<std::string>& values);

// The file a kernel was loaded from, or nullptr for one of lnorm's own kernels.
const std::string* plugin_path_of(const KernelInfo& kernel);
// The loaded plugins' files, once each; and `inputs` with them appended: a command's outputs may not be one of them
// (check_outputs: `bench --plugin k.so --json k.so` would have overwritten the library).
std::vector<std::string> plugin_paths();
std::vector<std::string> with_plugin_paths(std::vector<std::string> inputs);

}  // namespace lnorm::cli
