// oneDNN bf16 matmul at the engine's shapes (onednn_cases.h).
#include "onednn_cases.h"

#include <chrono>
#include <exception>

#include <dnnl.hpp>
#include <omp.h>

#include "bench_util.h"
#include "numeric/bf16.h"

namespace dsv4::bench {

bool onednn_available() { return true; }

Result<std::vector<CaseResult>> run_onednn_cases(const std::vector<GemmShape>& shapes, const GemmSets& sets,
                                                 int threads) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  omp_set_num_threads(threads);
  std::vector<CaseResult> out;
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    for (const GemmShape& s : shapes) {
      WeightCopies wc = make_weight_copies(StorageForm::kBF16, s.out, s.in, sets.span_bytes);
      for (int T : sets.rows) {
        const dnnl::memory::desc src_md({T, s.in}, dt::bf16, tag::ab);
        const dnnl::memory::desc wei_md({s.in, s.out}, dt::bf16, tag::ba);
        const dnnl::memory::desc dst_md({T, s.out}, dt::bf16, tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), eng);
        const dnnl::matmul prim(pd);
        std::vector<bf16> x(static_cast<size_t>(T * s.in)), y(static_cast<size_t>(T * s.out));
        Rng rng{static_cast<uint64_t>(T)};
        for (bf16& v : x) v = bf16::from_float(rng.uniform());
        dnnl::memory src(src_md, eng, x.data()), dst(dst_md, eng, y.data());
        dnnl::memory wei(wei_md, eng, wc.data.data());
        std::vector<double> ms;
        for (int it = 0; it < (sets.repeats + 1) * wc.n; ++it) {
          wei.set_data_handle(wc.data.data() + (it % wc.n) * wc.data_bytes);
          const auto t0 = std::chrono::steady_clock::now();
          prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
          strm.wait();
          const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          if (it >= wc.n) ms.push_back(t);
        }
        out.push_back(timed_case("onednn-bf16", "gemm", s.label(), T, 1, threads, ms,
                                 matrix_cost(StorageForm::kBF16, s.out, s.in, T)));
      }
    }
  } catch (const std::exception& e) {
    return Status::errorf("oneDNN: {}", e.what());
  }
  return out;
}

}  // namespace dsv4::bench
