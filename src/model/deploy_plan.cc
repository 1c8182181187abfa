#include "model/deploy_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "base/check.h"
#include "model/cache_bytes.h"

namespace dsv4 {

// ------------------------------------------------------------------------------------------
// Seams

namespace {
int64_t sum(std::span<const int64_t> v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}
int64_t group_size(std::span<const int64_t> rows, int r) {
  DSV4_CHECK(r >= 0 && r < static_cast<int>(rows.size()));
  return static_cast<int64_t>(rows.size());
}
int64_t dispatch_row_bytes(const ModelConfig& cfg) { return cfg.hidden_size * 2 + cfg.num_experts_per_tok * 8; }
int64_t combine_row_bytes(const ModelConfig& cfg) { return cfg.hidden_size * 2; }
}  // namespace

int64_t attn_a2a_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r) {
  const int64_t g = group_size(rows, r);
  return rows[r] * (g - 1) * cfg.num_attention_heads * cfg.head_dim * 2 / g;
}

int64_t o_reduce_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r) {
  const int64_t g = group_size(rows, r);
  return (sum(rows) - rows[r]) * (cfg.o_groups / g) * cfg.hidden_size * 4;
}

int64_t head_gather_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r) {
  const int64_t g = group_size(rows, r);
  return rows[r] * cfg.hidden_size * 2 * (g - 1);
}

int64_t head_logits_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r) {
  const int64_t g = group_size(rows, r);
  return (sum(rows) - rows[r]) * (cfg.vocab_size / g) * 4;
}

int64_t moe_counts_bytes(int ep) { return int64_t{ep - 1} * 16; }

MoeRouting count_routing(std::span<const int32_t> expert_ids, int n_experts_per_tok, int n_experts, int ep) {
  DSV4_CHECK(n_experts_per_tok > 0 && ep > 0 && n_experts % ep == 0);
  DSV4_CHECK(expert_ids.size() % static_cast<size_t>(n_experts_per_tok) == 0);
  const int per_rank = n_experts / ep;
  MoeRouting m{std::vector<int64_t>(ep, 0), std::vector<int64_t>(ep, 0)};
  std::vector<char> touched(ep);
  for (size_t row = 0; row < expert_ids.size(); row += n_experts_per_tok) {
    std::fill(touched.begin(), touched.end(), 0);
    for (int k = 0; k < n_experts_per_tok; ++k) {
      const int32_t x = expert_ids[row + k];
      DSV4_CHECK(x >= 0 && x < n_experts);
      bool repeat = false;  // a hash row may repeat an id: one route
      for (int j = 0; j < k; ++j) repeat = repeat || expert_ids[row + j] == x;
      if (repeat) continue;
      const int d = x / per_rank;
      ++m.routes_to[d];
      touched[d] = 1;
    }
    for (int d = 0; d < ep; ++d) m.rows_to[d] += touched[d];
  }
  return m;
}

int64_t moe_dispatch_bytes(const ModelConfig& cfg, const MoeRouting& routing, int r) {
  DSV4_CHECK(r >= 0 && r < static_cast<int>(routing.rows_to.size()));
  return (sum(routing.rows_to) - routing.rows_to[r]) * dispatch_row_bytes(cfg);
}

int64_t moe_combine_bytes(const ModelConfig& cfg, std::span<const MoeRouting> group, int r) {
  DSV4_CHECK(r >= 0 && r < static_cast<int>(group.size()));
  int64_t routes = 0;
  for (int d = 0; d < static_cast<int>(group.size()); ++d)
    if (d != r) routes += group[d].routes_to[r];
  return routes * combine_row_bytes(cfg);
}

// ------------------------------------------------------------------------------------------
// Planned MoE traffic

double touch_probability(int n_experts, int ep, int n_experts_per_tok) {
  // C(E − E/P, K) / C(E, K) = Π_{i<K} (E − E/P − i) / (E − i): no route lands on the rank.
  const int outside = n_experts - n_experts / ep;
  double miss = 1;
  for (int i = 0; i < n_experts_per_tok; ++i) miss *= std::max(0, outside - i) / static_cast<double>(n_experts - i);
  return 1 - miss;
}

int64_t moe_dispatch_bytes(const ModelConfig& cfg, std::span<const int64_t> ep_rows, int r, RoutingCase c) {
  const int p = static_cast<int>(group_size(ep_rows, r));
  if (p == 1) return 0;
  const int k = cfg.num_experts_per_tok;
  if (c == RoutingCase::kWorst) return ep_rows[r] * std::min(k, p - 1) * dispatch_row_bytes(cfg);
  const double rows = static_cast<double>(ep_rows[r]) * (p - 1) * touch_probability(cfg.n_routed_experts, p, k);
  return std::llround(rows * static_cast<double>(dispatch_row_bytes(cfg)));
}

int64_t moe_combine_bytes(const ModelConfig& cfg, std::span<const int64_t> ep_rows, int r, RoutingCase c) {
  const int p = static_cast<int>(group_size(ep_rows, r));
  if (p == 1) return 0;
  // Routes a peer row sends to one given rank: K/P uniform, K/(P−1) with every route remote.
  const double per_row = static_cast<double>(cfg.num_experts_per_tok) / (c == RoutingCase::kWorst ? p - 1 : p);
  const double routes = static_cast<double>(sum(ep_rows) - ep_rows[r]) * per_row;
  return std::llround(routes * static_cast<double>(combine_row_bytes(cfg)));
}

// ------------------------------------------------------------------------------------------
// One rank's step

int64_t StepCollectiveBytes::total() const {
  return attn_a2a + o_reduce + moe_counts + moe_dispatch + moe_combine + head_gather + head_logits;
}

StepCollectiveBytes& StepCollectiveBytes::operator+=(const StepCollectiveBytes& o) {
  attn_a2a += o.attn_a2a;
  o_reduce += o.o_reduce;
  moe_counts += o.moe_counts;
  moe_dispatch += o.moe_dispatch;
  moe_combine += o.moe_combine;
  head_gather += o.head_gather;
  head_logits += o.head_logits;
  return *this;
}

StepCollectiveBytes operator*(int64_t n, const StepCollectiveBytes& b) {
  return {n * b.attn_a2a,     n * b.o_reduce,    n * b.moe_counts, n * b.moe_dispatch,
          n * b.moe_combine, n * b.head_gather, n * b.head_logits};
}

StepCollectiveBytes block_collective_bytes(const ModelConfig& cfg, const Topology& t,
                                           std::span<const int64_t> tp_rows, std::span<const int64_t> ep_rows,
                                           RoutingCase c) {
  DSV4_CHECK(static_cast<int>(tp_rows.size()) == t.tp && static_cast<int>(ep_rows.size()) == t.ep);
  StepCollectiveBytes b;
  if (t.tp > 1) {
    b.attn_a2a = attn_a2a_bytes(cfg, tp_rows, t.tp_rank());
    b.o_reduce = o_reduce_bytes(cfg, tp_rows, t.tp_rank());
  }
  if (t.ep > 1) {
    b.moe_counts = moe_counts_bytes(t.ep);
    b.moe_dispatch = moe_dispatch_bytes(cfg, ep_rows, t.ep_rank(), c);
    b.moe_combine = moe_combine_bytes(cfg, ep_rows, t.ep_rank(), c);
  }
  return b;
}

StepCollectiveBytes head_collective_bytes(const ModelConfig& cfg, const Topology& t,
                                          std::span<const int64_t> tp_rows) {
  DSV4_CHECK(static_cast<int>(tp_rows.size()) == t.tp);
  StepCollectiveBytes b;
  if (t.tp > 1) {
    b.head_gather = head_gather_bytes(cfg, tp_rows, t.tp_rank());
    b.head_logits = head_logits_bytes(cfg, tp_rows, t.tp_rank());
  }
  return b;
}

// ------------------------------------------------------------------------------------------
// Caches

SequenceCacheBytes sequence_cache_bytes(const ModelConfig& cfg, int64_t context) {
  SequenceCacheBytes s;
  for (const CacheFamilyBytes& f : cache_bytes_per_token(cfg)) {
    if (f.per_token)
      s.growing += f.row_bytes * f.layers * (context / f.ratio);
    else
      s.ring += f.row_bytes * f.layers * cfg.sliding_window;
  }
  return s;
}

// ------------------------------------------------------------------------------------------
// The whole plan

namespace {

// Rows of each rank of rank t.rank's TP and EP groups in the main and the MTP forward.
struct GroupRows {
  std::vector<int64_t> tp_main, tp_mtp, ep_main, ep_mtp;
};

int64_t requests_of(const PlanOptions& opt, int tp_rank) { return share_of(opt.batch, tp_rank, opt.tp).size(); }

GroupRows group_rows(const Topology& t, const PlanOptions& opt) {
  const int64_t rows_per_request = opt.mtp ? 2 : 1;
  GroupRows g;
  for (int q = 0; q < t.tp; ++q) {
    g.tp_main.push_back(rows_per_request * requests_of(opt, q));
    g.tp_mtp.push_back(requests_of(opt, q));
  }
  for (int d = 0; d < t.ep; ++d) {
    const int tp_rank = (t.ep_group() * t.ep + d) % t.tp;
    g.ep_main.push_back(rows_per_request * requests_of(opt, tp_rank));
    g.ep_mtp.push_back(requests_of(opt, tp_rank));
  }
  return g;
}

StepCollectiveBytes step_bytes(const ModelConfig& cfg, const Topology& t, const GroupRows& g, bool mtp,
                               RoutingCase c) {
  StepCollectiveBytes s = int64_t{cfg.num_hidden_layers} * block_collective_bytes(cfg, t, g.tp_main, g.ep_main, c);
  s += head_collective_bytes(cfg, t, g.tp_main);
  if (mtp) {
    s += block_collective_bytes(cfg, t, g.tp_mtp, g.ep_mtp, c);
    s += head_collective_bytes(cfg, t, g.tp_mtp);
  }
  return s;
}

constexpr int64_t kMaxWorld = 65536;

Status check_options(const ModelConfig& cfg, const PlanOptions& opt) {
  if (opt.batch < 1) return Status::errorf("--batch {} must be at least 1", opt.batch);
  if (opt.context < 1) return Status::errorf("--context {} must be at least 1", opt.context);
  if (opt.context > cfg.max_position_embeddings)
    return Status::errorf("--context {} exceeds the model's max_position_embeddings = {}", opt.context,
                          cfg.max_position_embeddings);
  if (!(opt.host_memory_gib > 0) || !std::isfinite(opt.host_memory_gib))
    return Status::errorf("--host-memory {} must be a positive number of GiB", opt.host_memory_gib);
  if (opt.mtp && cfg.n_mtp_layers() < 1) return Status::errorf("--mtp: {}", cfg.no_mtp_reason());
  if (opt.tp < 1 || opt.dp < 1) return Status::errorf("--tp {} and --dp {} must be at least 1", opt.tp, opt.dp);
  if (static_cast<int64_t>(opt.tp) * opt.dp > kMaxWorld)
    return Status::errorf("--dp {} x --tp {} is more than {} ranks", opt.dp, opt.tp, kMaxWorld);
  return Status();
}

}  // namespace

Result<DeployPlan> plan_deployment(const ModelConfig& cfg, const PlanOptions& opt) {
  DSV4_RETURN_IF_ERROR(check_options(cfg, opt));
  const int world = opt.tp * opt.dp;
  Result<Topology> t0 = make_topology(world, 0, opt.tp, opt.dp, opt.ep);
  if (!t0.ok()) return t0.status();
  DSV4_RETURN_IF_ERROR(validate_topology(cfg, *t0));

  DeployPlan plan;
  plan.topology = *t0;
  plan.options = opt;
  plan.options.ep = t0->ep;
  plan.sequence = sequence_cache_bytes(cfg, opt.context);
  plan.block_forwards = cfg.num_hidden_layers + (opt.mtp ? 1 : 0);
  plan.head_runs = opt.mtp ? 2 : 1;
  std::map<std::pair<int, int>, RankWeights> weights;  // by (tp rank, ep rank)
  for (int w = 0; w < world; ++w) {
    const Topology t = *make_topology(world, w, opt.tp, opt.dp, opt.ep);
    const GroupRows g = group_rows(t, opt);
    RankPlan rp;
    rp.rank = w;
    rp.requests = requests_of(opt, t.tp_rank());
    rp.rows = g.tp_main[t.tp_rank()];
    auto [held, fresh] = weights.try_emplace({t.tp_rank(), t.ep_rank()});
    if (fresh) held->second = rank_weights(cfg, t);
    rp.weights = held->second;
    rp.cache_bytes = rp.requests * plan.sequence.total();
    rp.uniform = step_bytes(cfg, t, g, opt.mtp, RoutingCase::kUniform);
    rp.worst = step_bytes(cfg, t, g, opt.mtp, RoutingCase::kWorst);
    plan.ranks.push_back(rp);
  }
  return plan;
}

// ------------------------------------------------------------------------------------------
// Text

namespace {

constexpr double kGiB = 1073741824.0;

// Weights and caches of a plan: in GiB, or in MiB when no rank holds a GiB.
struct Unit {
  double bytes;
  const char* name;
  std::string operator()(int64_t b) const { return fmt::format("{:.3f} {}", static_cast<double>(b) / bytes, name); }
};

std::string human(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (b < 1048576.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  if (b < kGiB) return fmt::format("{:.2f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / kGiB);
}

// "rank 3", "ranks 0-7", "ranks 0, 2, 4-6".
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

// Ranks print one block when everything the block prints is equal.
bool same_figures(const RankPlan& a, const RankPlan& b) {
  return a.requests == b.requests && a.rows == b.rows &&
         std::equal(std::begin(a.weights.bytes), std::end(a.weights.bytes), std::begin(b.weights.bytes)) &&
         a.cache_bytes == b.cache_bytes && a.uniform == b.uniform && a.worst == b.worst;
}

std::string rank_block(const DeployPlan& plan, const RankPlan& r, const std::string& label, const Unit& unit) {
  const PlanOptions& opt = plan.options;
  std::string out = fmt::format("{}: {} request{}, {} row{} in the main forward\n", label, r.requests,
                                r.requests == 1 ? "" : "s", r.rows, r.rows == 1 ? "" : "s");
  out += fmt::format("  weights    {:>12} =", unit(r.weights.total()));
  for (int p = 0; p < 5; ++p)
    out += fmt::format("{} {} {:.3f}", p == 0 ? "" : " +", placement_name(static_cast<Placement>(p)),
                       static_cast<double>(r.weights.bytes[p]) / unit.bytes);
  out += "\n";
  out += fmt::format("  caches     {:>12} ({} sequence{} of {} positions)\n", unit(r.cache_bytes), r.requests,
                     r.requests == 1 ? "" : "s", opt.context);
  const double host = opt.host_memory_gib * kGiB;
  const bool fits = static_cast<double>(r.resident()) <= host;
  const double room = (host - static_cast<double>(r.weights.total())) / static_cast<double>(plan.sequence.total());
  out += fmt::format("  fits in {:g} GiB: {} ({}); {} sequences of {} positions fit beside the weights\n",
                     opt.host_memory_gib, fits ? "yes" : "no", unit(r.resident()),
                     room > 0 ? static_cast<int64_t>(room) : 0, opt.context);
  out += fmt::format("  collectives per step, bytes sent to other ranks:  {:>12}  {:>12}\n", "uniform", "worst case");
  const auto line = [&](const char* name, int64_t u, int64_t w) {
    out += fmt::format("    {:<46}  {:>12}  {:>12}\n", name, human(u), human(w));
  };
  line("attn_a2a     (bf16 head groups)", r.uniform.attn_a2a, r.worst.attn_a2a);
  line("o_reduce     (fp32 group partials)", r.uniform.o_reduce, r.worst.o_reduce);
  line("moe_counts   (rows, routes per peer)", r.uniform.moe_counts, r.worst.moe_counts);
  line("moe_dispatch (rows to expert ranks)", r.uniform.moe_dispatch, r.worst.moe_dispatch);
  line("moe_combine  (expert outputs back)", r.uniform.moe_combine, r.worst.moe_combine);
  line("head_gather  (final normed rows)", r.uniform.head_gather, r.worst.head_gather);
  line("head_logits  (vocab-shard logits)", r.uniform.head_logits, r.worst.head_logits);
  line("total", r.uniform.total(), r.worst.total());
  return out;
}

}  // namespace

std::string deploy_plan_text(const ModelConfig& cfg, const DeployPlan& plan) {
  const Topology& t = plan.topology;
  const PlanOptions& opt = plan.options;
  std::string out = fmt::format(
      "plan: {} ranks = dp {} x tp {}, ep {} ({} routed experts per rank); weights as stored ({}, experts {})\n",
      t.world, t.dp, t.tp, t.ep, cfg.n_routed_experts / t.ep, storage_form_name(cfg.dense_storage()),
      storage_form_name(cfg.expert_storage()));
  if (opt.mtp)
    out += fmt::format(
        "step: {} requests per DP group (MTP: 2 rows each in {} main block forwards and the LM head, 1 row in the "
        "MTP block and the MTP head)\n",
        opt.batch, cfg.num_hidden_layers);
  else
    out += fmt::format("step: {} requests per DP group, 1 row each, in {} block forwards and 1 LM head run\n",
                       opt.batch, cfg.num_hidden_layers);
  out += fmt::format(
      "cache per sequence at {} positions: {} = {} growing (floor(positions / ratio) rows per layer) + {} rings "
      "(window KV and compressor states, each counted at sliding_window = {} rows)\n",
      opt.context, human(plan.sequence.total()), human(plan.sequence.growing), human(plan.sequence.ring),
      cfg.sliding_window);
  out += "MoE traffic: uniform = expectation with each row's experts uniformly random; worst case = every route "
         "remote, spread evenly over the peers\n";

  // Ranks with equal figures fold into one block, in order of their first rank.
  std::vector<std::vector<int>> folds;
  for (const RankPlan& r : plan.ranks) {
    auto fold = std::find_if(folds.begin(), folds.end(),
                             [&](const std::vector<int>& f) { return same_figures(plan.ranks[f[0]], r); });
    if (fold == folds.end()) fold = folds.insert(folds.end(), std::vector<int>{});
    fold->push_back(r.rank);
  }
  int64_t largest = 0;
  for (const RankPlan& r : plan.ranks) largest = std::max(largest, r.resident());
  const Unit unit = largest >= int64_t{1} << 30 ? Unit{kGiB, "GiB"} : Unit{1048576.0, "MiB"};
  for (const std::vector<int>& ranks : folds)
    out += rank_block(plan, plan.ranks[ranks[0]], rank_list(ranks), unit);
  return out;
}

}  // namespace dsv4
