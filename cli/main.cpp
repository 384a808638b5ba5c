// The `lnorm` executable; everything it does is in run_cli.cpp (a library, so it can be fuzzed in-process).
#include "lnorm/run_cli.hpp"

int main(int argc, char** argv) { return lnorm::cli::run_cli(argc, argv); }
