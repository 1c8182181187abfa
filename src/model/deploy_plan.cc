#include "model/deploy_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "base/check.h"
#include "model/cache_bytes.h"
#include "model/checkpoint_table.h"

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
// What a decode step reads

RankReadWeights rank_read_weights(const ModelConfig& cfg, const Topology& t) {
  RankReadWeights r;
  for (const TensorSpec& s : expected_tensors(cfg)) {
    const int64_t held = rank_share(s.name, static_cast<int64_t>(s.n_bytes()), cfg, t);
    const bool draft = s.layer >= cfg.num_hidden_layers;
    switch (placement_of(s.name)) {
      case Placement::kReplicated:
        if (s.name == "embed.weight")
          r.embed_row += held / cfg.vocab_size;
        else
          (draft ? r.draft_owned : r.owned) += held;
        break;
      case Placement::kExperts: (draft ? r.draft_experts : r.experts) += held; break;
      case Placement::kOutputGroups:
      case Placement::kInputGroups:
      case Placement::kVocab: (draft ? r.draft_sharded : r.sharded) += held; break;
    }
  }
  return r;
}

double experts_hit_fraction(const ModelConfig& cfg, int64_t rows) {
  const double k = static_cast<double>(cfg.num_experts_per_tok) / static_cast<double>(cfg.n_routed_experts);
  return 1 - std::pow(1 - k, static_cast<double>(rows));
}

int64_t cache_read_bytes(const ModelConfig& cfg, int64_t context, bool mtp) {
  int64_t bytes = 0;
  for (const CacheFamilyBytes& f : cache_bytes_per_token(cfg)) {
    int64_t rows = 0, layers = f.layers;
    if (f.family == "window KV") {
      rows = std::min(context, cfg.sliding_window);
      if (!mtp) layers -= cfg.n_mtp_layers();
    } else if (f.family == "CSA KV") {
      rows = std::min(context / f.ratio, cfg.index_topk);
    } else if (f.per_token) {
      rows = context / f.ratio;  // indexer keys, HCA KV
    }
    bytes += f.row_bytes * layers * rows;
  }
  return bytes;
}

// ------------------------------------------------------------------------------------------
// The whole plan

namespace {

// Rows of each rank of rank t.rank's TP and EP groups in the main and the MTP forward.
struct GroupRows {
  std::vector<int64_t> tp_main, tp_mtp, ep_main, ep_mtp;
};

int64_t requests_of(int64_t batch, int tp_rank, int tp) { return share_of(batch, tp_rank, tp).size(); }

GroupRows group_rows(const Topology& t, int64_t batch, bool mtp) {
  const int64_t rows_per_request = mtp ? 2 : 1;
  GroupRows g;
  for (int q = 0; q < t.tp; ++q) {
    g.tp_main.push_back(rows_per_request * requests_of(batch, q, t.tp));
    g.tp_mtp.push_back(requests_of(batch, q, t.tp));
  }
  for (int d = 0; d < t.ep; ++d) {
    const int tp_rank = (t.ep_group() * t.ep + d) % t.tp;
    g.ep_main.push_back(rows_per_request * requests_of(batch, tp_rank, t.tp));
    g.ep_mtp.push_back(requests_of(batch, tp_rank, t.tp));
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

// Shares of a rank's seams in one group that reach other hosts: by peers (a seam sized by
// the sender) and by the peers' rows (a seam sized by the receiver). Member q of the group
// is global rank first + q; `self` the sender's index.
struct CrossShare {
  double by_sender = 0, by_receiver = 0;
};

CrossShare cross_share(int first, std::span<const int64_t> rows, int self, int ranks_per_host) {
  const int host = (first + self) / ranks_per_host;
  int peers = 0, remote = 0;
  int64_t peer_rows = 0, remote_rows = 0;
  for (int q = 0; q < static_cast<int>(rows.size()); ++q) {
    if (q == self) continue;
    ++peers;
    peer_rows += rows[q];
    if ((first + q) / ranks_per_host != host) {
      ++remote;
      remote_rows += rows[q];
    }
  }
  return {peers > 0 ? static_cast<double>(remote) / peers : 0,
          peer_rows > 0 ? static_cast<double>(remote_rows) / static_cast<double>(peer_rows) : 0};
}

// Bytes of rank t.rank's step (b) that go to ranks on other hosts.
double sent_to_other_hosts(const StepCollectiveBytes& b, const Topology& t, const GroupRows& g, int ranks_per_host) {
  const CrossShare tp = cross_share(t.dp_group() * t.tp, g.tp_main, t.tp_rank(), ranks_per_host);
  const CrossShare ep = cross_share(t.ep_group() * t.ep, g.ep_main, t.ep_rank(), ranks_per_host);
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  return tp.by_sender * d(b.attn_a2a + b.head_gather) + tp.by_receiver * d(b.o_reduce + b.head_logits) +
         ep.by_sender * d(b.moe_counts + b.moe_dispatch) + ep.by_receiver * d(b.moe_combine);
}

int ranks_per_host(const DeployPlan& plan) { return plan.topology.world / plan.options.hosts; }

// The largest host's resident bytes with `batch` requests per DP group of `context` positions.
double largest_host_bytes(const ModelConfig& cfg, const DeployPlan& plan, int64_t batch, int64_t context) {
  const double sequence = static_cast<double>(sequence_cache_bytes(cfg, context).total());
  const int per_host = ranks_per_host(plan), tp = plan.topology.tp;
  double largest = 0;
  for (int h = 0; h < plan.options.hosts; ++h) {
    double bytes = 0;
    for (int w = h * per_host; w < (h + 1) * per_host; ++w)
      bytes += static_cast<double>(plan.ranks[w].weights.total()) +
               static_cast<double>(requests_of(batch, w % tp, tp)) * sequence;
    largest = std::max(largest, bytes);
  }
  return largest;
}

// Largest x in [lo, hi] with fits(x), given fits(lo) and fits falling in x.
template <class Fits>
int64_t largest_fitting(int64_t lo, int64_t hi, Fits fits) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

constexpr double kGiB = 1073741824.0;

void plan_fit(const ModelConfig& cfg, DeployPlan& plan) {
  const PlanOptions& opt = plan.options;
  const double memory = opt.mem_per_host_gib * kGiB;
  const auto batch_fits = [&](int64_t b) { return largest_host_bytes(cfg, plan, b, opt.context) <= memory; };
  const auto context_fits = [&](int64_t c) { return largest_host_bytes(cfg, plan, opt.batch, c) <= memory; };
  const double sequence = static_cast<double>(sequence_cache_bytes(cfg, opt.context).total());
  const int64_t batch_bound = plan.topology.tp * (static_cast<int64_t>(memory / sequence) + 1);
  plan.max_batch = batch_fits(1) ? largest_fitting(1, batch_bound, batch_fits) : 0;
  plan.max_context = context_fits(1) ? largest_fitting(1, cfg.max_position_embeddings, context_fits) : 0;
}

DecodeProjection project_decode(const ModelConfig& cfg, const DeployPlan& plan, int64_t batch,
                                const std::map<std::pair<int, int>, RankReadWeights>& reads) {
  const PlanOptions& opt = plan.options;
  const int world = plan.topology.world, per_host = ranks_per_host(plan);
  const int64_t cache = cache_read_bytes(cfg, opt.context, opt.mtp);
  std::vector<double> read(opt.hosts, 0), sent(opt.hosts, 0);
  for (int w = 0; w < world; ++w) {
    const Topology t = *make_topology(world, w, opt.tp, opt.dp, opt.ep);
    const GroupRows g = group_rows(t, batch, opt.mtp);
    const RankReadWeights& rw = reads.at({t.tp_rank(), t.ep_rank()});
    const int64_t requests = requests_of(batch, t.tp_rank(), t.tp);
    // Weights of one forward over own rows `mine` of the TP group's `group` and the EP group's `ep`.
    const auto forward = [&](int64_t owned, int64_t sharded, int64_t experts, int64_t mine, int64_t group,
                             int64_t ep) {
      return static_cast<double>((mine > 0 ? owned : 0) + (group > 0 ? sharded : 0) + rw.embed_row * mine) +
             static_cast<double>(experts) * experts_hit_fraction(cfg, ep);
    };
    double bytes = forward(rw.owned, rw.sharded, rw.experts, g.tp_main[t.tp_rank()], sum(g.tp_main), sum(g.ep_main)) +
                   static_cast<double>(requests * cache);
    if (opt.mtp)
      bytes += forward(rw.draft_owned, rw.draft_sharded, rw.draft_experts, g.tp_mtp[t.tp_rank()], sum(g.tp_mtp),
                       sum(g.ep_mtp));
    read[w / per_host] += bytes;
    sent[w / per_host] += sent_to_other_hosts(step_bytes(cfg, t, g, opt.mtp, RoutingCase::kUniform), t, g, per_host);
  }
  DecodeProjection p;
  p.batch = batch;
  if (opt.bench) {
    const BenchFraction& f = opt.bench->nearest(batch);
    p.fraction = f.fraction;
    p.bench_batch = f.batch;
  }
  for (int h = 0; h < opt.hosts; ++h) {
    DecodeProjection q = p;
    q.host = h;
    q.read_bytes = read[h];
    q.sent_bytes = sent[h];
    q.memory_s = read[h] / (opt.bandwidth_gbps * 1e9);
    q.network_s = sent[h] / (opt.interconnect_gbps * 1e9);
    if (h == 0 || q.step_s() > p.step_s()) p = q;
  }
  return p;
}

constexpr int64_t kMaxWorld = 65536;
constexpr double kMaxHostGiB = 1 << 20;  // 1 PiB: keeps the batch search in int64

Status check_options(const ModelConfig& cfg, const PlanOptions& opt) {
  if (opt.batch < 1) return Status::errorf("--batch {} must be at least 1", opt.batch);
  if (opt.context < 1) return Status::errorf("--context {} must be at least 1", opt.context);
  if (opt.context > cfg.max_position_embeddings)
    return Status::errorf("--context {} exceeds the model's max_position_embeddings = {}", opt.context,
                          cfg.max_position_embeddings);
  const auto positive = [](double x) { return x > 0 && std::isfinite(x); };
  if (!positive(opt.mem_per_host_gib) || opt.mem_per_host_gib > kMaxHostGiB)
    return Status::errorf("--mem-per-host {} must be a positive number of GiB up to {}", opt.mem_per_host_gib,
                          kMaxHostGiB);
  if (!positive(opt.bandwidth_gbps))
    return Status::errorf("--bandwidth-per-host {} must be a positive number of GB/s", opt.bandwidth_gbps);
  if (!positive(opt.interconnect_gbps))
    return Status::errorf("--interconnect {} must be a positive number of GB/s", opt.interconnect_gbps);
  if (opt.mtp && cfg.n_mtp_layers() < 1) return Status::errorf("--mtp: {}", cfg.no_mtp_reason());
  if (opt.tp < 1 || opt.dp < 1) return Status::errorf("--tp {} and --dp {} must be at least 1", opt.tp, opt.dp);
  if (static_cast<int64_t>(opt.tp) * opt.dp > kMaxWorld)
    return Status::errorf("--dp {} x --tp {} is more than {} ranks", opt.dp, opt.tp, kMaxWorld);
  const int world = opt.tp * opt.dp;
  if (opt.hosts < 1 || world % opt.hosts != 0)
    return Status::errorf("--hosts {} must divide the world of {} ranks (--dp {} x --tp {})", opt.hosts, world, opt.dp,
                          opt.tp);
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
  const int per_host = world / opt.hosts;
  for (int h = 0; h < opt.hosts; ++h) plan.hosts.push_back({h, h * per_host, per_host});
  std::map<std::pair<int, int>, RankWeights> weights;      // by (tp rank, ep rank)
  std::map<std::pair<int, int>, RankReadWeights> reads;  // by (tp rank, ep rank)
  for (int w = 0; w < world; ++w) {
    const Topology t = *make_topology(world, w, opt.tp, opt.dp, opt.ep);
    const GroupRows g = group_rows(t, opt.batch, opt.mtp);
    RankPlan rp;
    rp.rank = w;
    rp.requests = requests_of(opt.batch, t.tp_rank(), t.tp);
    rp.rows = g.tp_main[t.tp_rank()];
    auto [held, fresh] = weights.try_emplace({t.tp_rank(), t.ep_rank()});
    if (fresh) {
      held->second = rank_weights(cfg, t);
      reads[{t.tp_rank(), t.ep_rank()}] = rank_read_weights(cfg, t);
    }
    rp.weights = held->second;
    rp.cache_bytes = rp.requests * plan.sequence.total();
    rp.uniform = step_bytes(cfg, t, g, opt.mtp, RoutingCase::kUniform);
    rp.worst = step_bytes(cfg, t, g, opt.mtp, RoutingCase::kWorst);
    HostPlan& host = plan.hosts[w / per_host];
    host.weights += rp.weights.total();
    host.caches += rp.cache_bytes;
    host.sent_uniform += sent_to_other_hosts(rp.uniform, t, g, per_host);
    host.sent_worst += sent_to_other_hosts(rp.worst, t, g, per_host);
    plan.ranks.push_back(rp);
  }
  plan_fit(cfg, plan);
  for (int64_t b : kProjectedBatches) plan.projections.push_back(project_decode(cfg, plan, b, reads));
  return plan;
}

// ------------------------------------------------------------------------------------------
// Text

namespace {

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

// "rank 3", "ranks 0-7", "ranks 0, 2, 4-6" (ids ascending; noun "rank" or "host").
std::string id_list(const std::vector<int>& ids, const char* noun = "rank") {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return fmt::format("{}{} {}", noun, ids.size() == 1 ? "" : "s", s);
}

// Groups of equal items (by `same`) in order of their first index.
template <class T, class Same>
std::vector<std::vector<int>> fold(const std::vector<T>& items, Same same) {
  std::vector<std::vector<int>> folds;
  for (int i = 0; i < static_cast<int>(items.size()); ++i) {
    auto f = std::find_if(folds.begin(), folds.end(),
                          [&](const std::vector<int>& g) { return same(items[g[0]], items[i]); });
    if (f == folds.end()) f = folds.insert(folds.end(), std::vector<int>{});
    f->push_back(i);
  }
  return folds;
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

std::string hosts_text(const ModelConfig& cfg, const DeployPlan& plan, const Unit& unit) {
  const PlanOptions& opt = plan.options;
  std::string out = fmt::format(
      "hosts: {} of {:g} GiB, {} rank{} each in rank order; collectives between ranks of a host go through shared "
      "memory (counted free)\n",
      opt.hosts, opt.mem_per_host_gib, plan.hosts[0].n_ranks, plan.hosts[0].n_ranks == 1 ? "" : "s");
  const auto same = [](const HostPlan& a, const HostPlan& b) {
    return a.weights == b.weights && a.caches == b.caches && a.sent_uniform == b.sent_uniform &&
           a.sent_worst == b.sent_worst;
  };
  for (const std::vector<int>& hosts : fold(plan.hosts, same)) {
    const HostPlan& h = plan.hosts[hosts[0]];
    std::vector<int> ranks(h.n_ranks);
    std::iota(ranks.begin(), ranks.end(), h.first_rank);
    const std::string label = hosts.size() == 1 ? fmt::format("host {} ({})", h.host, id_list(ranks))
                                                : fmt::format("{}, each", id_list(hosts, "host"));
    const bool fits = static_cast<double>(h.resident()) <= opt.mem_per_host_gib * kGiB;
    out += fmt::format("{}: weights {} + caches {} = {}: {}; sends {} (uniform) / {} (worst case) per step to other "
                       "hosts\n",
                       label, unit(h.weights), unit(h.caches), unit(h.resident()), fits ? "fits" : "does not fit",
                       human(std::llround(h.sent_uniform)), human(std::llround(h.sent_worst)));
  }
  out += fmt::format("largest batch x context in {:g} GiB per host: {} requests per DP group ({} in all) at {} "
                     "positions; {} positions at {} requests per DP group{}\n",
                     opt.mem_per_host_gib, plan.max_batch, plan.max_batch * plan.topology.dp, opt.context,
                     plan.max_context, opt.batch,
                     plan.max_context == cfg.max_position_embeddings ? " (= max_position_embeddings)" : "");
  return out;
}

std::string projection_text(const ModelConfig& cfg, const DeployPlan& plan) {
  const PlanOptions& opt = plan.options;
  std::string out = fmt::format(
      "decode projection at {} positions: {:g} GB/s memory read and {:g} GB/s interconnect per host, 1 token per "
      "request per step, uniform routing, collective latency not counted\n",
      opt.context, opt.bandwidth_gbps, opt.interconnect_gbps);
  out += "  t_step = max over hosts [ read / (bandwidth x f) + sent to other hosts / interconnect ]\n";
  out += fmt::format(
      "  read   = per rank: replicated weights if it has rows + its wo_a, wo_b, head shards if its TP group has rows "
      "+ T_r embedding rows + routed experts held x (1 - (1 - K/E)^T_ep) (K = {}, E = {}, T_ep = the EP group's "
      "rows) + requests x caches read (per layer min(C, W) window rows; CSA min(C/{}, index_topk) KV rows + C/{} "
      "indexer keys; HCA C/ratio rows)\n",
      cfg.num_experts_per_tok, cfg.n_routed_experts, kCsaRatio, kCsaRatio);
  out += fmt::format("  tokens/s per request = 1 / t_step; in all = dp x B / t_step (dp = {})\n", plan.topology.dp);
  if (opt.bench)
    out += fmt::format("  f = the measured bandwidth fraction of {} (decode, S = 1, head and layer cases, {} threads) "
                       "at the nearest benchmarked B\n",
                       opt.bench->path, opt.bench->threads);
  else
    out += "  f = 1 (no --bench)\n";
  out += fmt::format("  {:>4}  {:>4}  {:>10}  {:>10}  {:>11}  {:>11}  {:>11}  {:>11}  {:>13}  {:>12}\n", "B", "host",
                     "read", "sent", "t_read", "t_sent", "f (at B)", "t_step", "tok/s/request", "tok/s in all");
  for (const DecodeProjection& p : plan.projections) {
    const std::string f = p.bench_batch > 0 ? fmt::format("{:.3f} ({})", p.fraction, p.bench_batch) : "1";
    out += fmt::format("  {:>4}  {:>4}  {:>10}  {:>10}  {:>8.2f} ms  {:>8.2f} ms  {:>11}  {:>8.2f} ms  {:>13.2f}  "
                       "{:>12.1f}\n",
                       p.batch, p.host, human(std::llround(p.read_bytes)), human(std::llround(p.sent_bytes)),
                       p.memory_s * 1e3, p.network_s * 1e3, f, p.step_s() * 1e3, 1 / p.step_s(),
                       static_cast<double>(plan.topology.dp * p.batch) / p.step_s());
  }
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

  int64_t largest = 0;
  for (const RankPlan& r : plan.ranks) largest = std::max(largest, r.resident());
  const Unit unit = largest >= int64_t{1} << 30 ? Unit{kGiB, "GiB"} : Unit{1048576.0, "MiB"};
  // Ranks with equal figures fold into one block, in order of their first rank.
  for (const std::vector<int>& ranks : fold(plan.ranks, same_figures))
    out += rank_block(plan, plan.ranks[ranks[0]], id_list(ranks), unit);
  out += hosts_text(cfg, plan, unit);
  out += projection_text(cfg, plan);
  return out;
}

}  // namespace dsv4
