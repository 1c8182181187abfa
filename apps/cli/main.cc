// dsv4 command-line entry point: registers every subcommand (one file each,
// cmd_<name>.cc), parses argv and runs the chosen one. Usage errors and
// failures print a message to stderr and exit with code 1.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "parallel/communicator.h"

int main(int argc, char** argv) {
  CLI::App app{"dsv4: DeepSeek-V4-Flash inference engine"};
  app.require_subcommand(1);

  const std::vector<dsv4::cli::Command> commands = {
      dsv4::cli::add_make_tiny(app),
      dsv4::cli::add_inspect(app),
      dsv4::cli::add_logits(app),
      dsv4::cli::add_generate(app),
      dsv4::cli::add_plan(app),
      dsv4::cli::add_tokenize(app),
      dsv4::cli::add_chat(app),
      dsv4::cli::add_serve(app),
      dsv4::cli::add_bench(app),
      dsv4::cli::add_check_schema(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }
  int code = 1;
  try {
    for (const dsv4::cli::Command& c : commands)
      if (c.sub->parsed()) code = c.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4: error: %s\n", e.what());
    code = 1;
  }
  // A failed rank of an mpirun job leaves without MPI_Finalize (which would wait for ranks
  // that may still be in a collective): mpirun sees the exit code and ends the job. First it
  // waits (at most 2 s) for the other ranks to fail too, so rank 0's message gets out.
  if (code != 0 && dsv4::launched_by_mpirun()) {
    std::fflush(stdout);
    std::fflush(stderr);
    dsv4::wait_for_ranks_at_exit(2.0);
    std::_Exit(code);
  }
  return code;
}
