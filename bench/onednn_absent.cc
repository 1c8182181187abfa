// Built when CMake found no oneDNN (libdnnl-dev): the oneDNN rows are skipped.
#include "onednn_cases.h"

namespace dsv4::bench {

bool onednn_available() { return false; }

Result<std::vector<CaseResult>> run_onednn_cases(const std::vector<GemmShape>&, const GemmSets&, int) {
  return Status::errorf("built without oneDNN (install libdnnl-dev and reconfigure)");
}

}  // namespace dsv4::bench
