// dsv4 logits [--model DIR] --tokens 1,2,3|@FILE --out FILE.npy [--mtp | --dspark [--gamma G]]
//             [--chunk N] [--decode]
//             [--numerics demo|reference|float] [--decisions-out FILE.json]
//             [--decisions-in FILE.json] [--threads N] [--isa I] [--tp T [--dp D] [--ep E]]:
// (under mpirun: rank 0 owns the sequence and writes the file, the others share its seams)
// teacher-forced logits of one token sequence as float32 .npy [n, vocab] (--mtp: the
// MTP head's [n-1, vocab]; --dspark: the DSpark drafter's [n-1, G, vocab], Level B so far) and
// optionally every discrete decision as JSON
// (oracle/teacher_forced.h); --decisions-in forces the decisions a FILE lists (the JSON
// --decisions-out writes; model/decisions.h). The interface is the contract for external
// conformance checks: keep it stable. Prints a one-line summary to stderr.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "io/file_util.h"
#include "io/npy.h"
#include "ranks.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "oracle/teacher_forced.h"

namespace dsv4::cli {
namespace {

constexpr uint64_t kMaxDecisionFileBytes = uint64_t{1} << 32;  // 4 GiB of JSON
struct LogitsArgs {
  std::string model;
  std::string tokens;
  std::string out;
  bool mtp = false;
  bool dspark = false;
  int32_t gamma = 0;  // 0: the checkpoint's dspark_block_size
  int32_t chunk = 0;
  bool decode = false;
  std::string numerics = "demo";
  std::string decisions_out;
  std::string decisions_in;
  int32_t threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  std::string isa = "auto";
  RankFlags ranks;
};

// Writes text through a temporary file and rename, so `path` is either old or complete.
Status write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::errorf("cannot open {} for writing", tmp);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::errorf("cannot write {}", path);
  }
  return Status();
}

int run_logits(const LogitsArgs& a) {
  Result<std::unique_ptr<RankSession>> ranks = RankSession::start(a.ranks);
  if (!ranks.ok()) return fail(ranks.status());
  RankSession& rs = **ranks;
  if (Status st = select_isa(a.isa); !st.ok()) return fail(st);
  Result<std::vector<int32_t>> tokens = parse_token_list_option("--tokens", a.tokens);
  if (!tokens.ok()) return fail(tokens.status());
  Result<Numerics> numerics = parse_numerics(a.numerics);
  if (!numerics.ok()) return fail(numerics.status().with_context("--numerics"));
  if (rs.world_size() > 1 && numerics.value() != Numerics::kDemo)
    return fail(Status::errorf("--numerics {} runs in one process (only the engine's demo numerics run on ranks)",
                               a.numerics));
  Result<std::string> dir = rs.model_dir(a.model);
  if (!dir.ok()) return fail(dir.status());

  const auto t0 = std::chrono::steady_clock::now();
  // Read on every rank (on every host): a failure on any rank fails all of them.
  Result<ModelConfig> cfg = load_config(dir.value());
  Result<SafetensorsSet> files =
      cfg.ok() ? SafetensorsSet::open_dir(dir.value()) : Result<SafetensorsSet>(cfg.status());
  Result<Weights> w = files.ok() ? load_weights(files.value(), cfg.value(), nullptr, rs.load_options(cfg.value()))
                                 : Result<Weights>(files.status());
  if (!w.ok() && files.ok()) w = w.status().with_context(dir.value());
  if (Status st = rs.agree(w.status()); !st.ok()) return fail(st);
  if (Status st = rs.bind(cfg.value()); !st.ok()) return fail(st);
  DecisionTable forced;
  if (!a.decisions_in.empty()) {
    Result<std::vector<uint8_t>> bytes = read_file(a.decisions_in, kMaxDecisionFileBytes);
    if (!bytes.ok()) return fail(bytes.status().with_context("--decisions-in"));
    Result<std::vector<Decision>> parsed =
        decisions_from_json(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
    if (!parsed.ok()) return fail(parsed.status().with_context(a.decisions_in));
    Result<DecisionTable> table = DecisionTable::create(cfg.value(), std::move(*parsed));
    if (!table.ok()) return fail(table.status().with_context(a.decisions_in));
    forced = std::move(*table);
  }
  const auto t1 = std::chrono::steady_clock::now();

  TeacherForcedOptions opt;
  opt.mtp = a.mtp;
  if (a.gamma != 0 && !a.dspark) return fail(Status::error("--gamma needs --dspark"));
  if (a.dspark) {
    if (!cfg->dspark) return fail(Status::errorf("--dspark: {} has no DSpark drafter (config.json has no dspark_* fields)", dir.value()));
    opt.dspark_gamma = a.gamma != 0 ? a.gamma : static_cast<int32_t>(cfg->dspark->block_size);
  }
  opt.chunk = a.chunk;
  opt.decode = a.decode;
  opt.numerics = numerics.value();
  opt.collect_decisions = !a.decisions_out.empty();
  opt.forced = a.decisions_in.empty() ? nullptr : &forced;
  opt.n_threads = a.threads;
  opt.ranks = rs.groups();
  Result<TeacherForcedOutput> r = teacher_forced_logits(cfg.value(), w.value(), tokens.value(), opt);
  if (!r.ok()) return fail(r.status());
  const auto t2 = std::chrono::steady_clock::now();
  if (!rs.primary()) return 0;  // rank 0 owns the sequence and writes the files

  const TeacherForcedOutput& o = r.value();
  Status st = o.gamma > 0 ? write_npy_f32(a.out, o.logits.data(), {o.rows, o.gamma, o.vocab})
                          : write_npy_f32(a.out, o.logits.data(), {o.rows, o.vocab});
  if (!st.ok()) return fail(st);
  if (!a.decisions_out.empty()) {
    st = write_text_file(a.decisions_out, decisions_to_json(o.decisions));
    if (!st.ok()) return fail(st);
  }
  const std::string feed = a.numerics == "float" ? "whole sequence"
                           : a.decode           ? "decode steps"
                           : a.chunk > 0        ? "prefill chunks of " + std::to_string(a.chunk)
                                                : "whole-prompt prefill";
  const std::string shape = o.gamma > 0 ? fmt::format("{}, {}, {}", o.rows, o.gamma, o.vocab)
                                        : fmt::format("{}, {}", o.rows, o.vocab);
  std::fprintf(stderr, "dsv4 logits: %s [%s] float32 -> %s (%s numerics, %s, threads %d, ranks %d); "
               "load %.3f s, forward %.3f s",
               a.dspark ? "dspark" : a.mtp ? "mtp" : "main", shape.c_str(),
               a.out.c_str(), a.numerics.c_str(), feed.c_str(), a.threads, rs.world_size(),
               std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
  if (!a.decisions_in.empty()) std::fprintf(stderr, "; %zu decisions forced", forced.size());
  if (!a.decisions_out.empty())
    std::fprintf(stderr, "; %zu decisions -> %s", o.decisions.size(), a.decisions_out.c_str());
  std::fprintf(stderr, "\n");
  return 0;
}
}  // namespace

Command add_logits(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* sub = app.add_subcommand(
      "logits", "Teacher-forced logits of a token sequence as float32 .npy [n, vocab] "
                "(--mtp: the MTP head's [n-1, vocab])");
  sub->add_option("--model", args->model, kModelHelp);
  sub->add_option("--tokens", args->tokens,
                  "Comma-separated token ids, e.g. 1,2,3, or @FILE (ids separated by commas and/or whitespace)")
      ->required();
  sub->add_option("--out", args->out, "Output .npy file (float32, C order)")->required();
  sub->add_flag("--mtp", args->mtp,
                "MTP head's logits: row i from the final hidden state at position i and token i+1");
  sub->add_flag("--dspark", args->dspark,
                "DSpark drafter's logits [n-1, G, vocab]: for anchor a, the Markov-corrected logits of "
                "the G block rows after positions 0..a with anchor token a+1 (--numerics float)");
  sub->add_option("--gamma", args->gamma,
                  "Drafts per round with --dspark, 1..64 (default: the checkpoint's dspark_block_size)");
  sub->add_option("--chunk", args->chunk, "Prefill in chunks of N rows (0: whole prompt)")
      ->capture_default_str();
  sub->add_flag("--decode", args->decode,
                "First token as a one-token prompt, every later token as its own decode step");
  sub->add_option("--numerics", args->numerics,
                  "demo (Level A engine, the default), reference (the Level-A whole-model reference: "
                  "single-threaded reference kernels, plain caches) or float (Level B: dequantized "
                  "weights, fp32 activations)")
      ->check(CLI::IsMember({"demo", "reference", "float"}))
      ->capture_default_str();
  sub->add_option("--decisions-out", args->decisions_out,
                  "Write every routed-expert and indexer decision as JSON to this file");
  sub->add_option("--decisions-in", args->decisions_in,
                  "Force the routed experts and indexer picks this JSON file lists (the format "
                  "--decisions-out writes); decisions not listed are made as usual");
  sub->add_option("--threads", args->threads, "Worker threads (demo numerics)")->capture_default_str();
  sub->add_option("--isa", args->isa, kIsaHelp)->capture_default_str();
  add_rank_options(sub, &args->ranks);
  return {sub, [args]() { return run_logits(*args); }};
}

}  // namespace dsv4::cli
