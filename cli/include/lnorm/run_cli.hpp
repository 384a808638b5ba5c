// The whole `lnorm` command as a function: parses argv, runs the subcommand, prints its output and any
// error ("lnorm: ...", one line) and returns the exit code (0 ok, 1 over budget / failed, 2 bad input,
// 3 internal error). Never calls exit(). main.cpp and the CLI fuzz target call it.
#pragma once

namespace lnorm::cli {

int run_cli(int argc, char** argv);

}  // namespace lnorm::cli
