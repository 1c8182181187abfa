// Test main for tests/parallel (test_parallel, test_ranks): MPI when started by mpirun (every rank runs every test and
// exits non-zero if any of its checks failed), else one rank.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <memory>

#include "parallel/communicator.h"

namespace dsv4 {
namespace {
std::unique_ptr<Communicator> g_comm;
}
Communicator& comm() { return *g_comm; }
}  // namespace dsv4

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dsv4::launched_by_mpirun()) {
    auto c = dsv4::make_mpi_communicator();
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.message().c_str());
      return 1;
    }
    dsv4::g_comm = std::move(*c);
    // Each rank writes its own test checkpoints (no two processes write one directory).
    if (const char* tmp = std::getenv("DSV4_TEST_TMP"); tmp != nullptr && *tmp) {
      const std::string mine = std::string(tmp) + "/rank" + std::to_string(dsv4::g_comm->rank());
      setenv("DSV4_TEST_TMP", mine.c_str(), 1);
    }
  } else {
    dsv4::g_comm = dsv4::make_single_communicator();
  }
  if (dsv4::g_comm->rank() != 0)  // one rank prints; all ranks check
    ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  const int rc = RUN_ALL_TESTS();
  dsv4::g_comm.reset();
  return rc;
}
