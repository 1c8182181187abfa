// dsv4 command-line entry point.
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"dsv4: DeepSeek-V4-Flash inference engine"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
