// dsv4 serve [--model DIR] [--host 127.0.0.1] [--port 8000] [--api-key K | --api-key-file F]
//   [--prefix-cache-scope global|key] [--metrics-auth]
//   [--served-model-name N] [--max-queue N] [--grace-seconds S] [--request-timeout S]
//   [--max-tokens-limit N] [--max-n N] [--max-body-bytes N] [--max-header-bytes N] [--max-headers N]
//   [--max-connections N] [--max-connections-per-client N] [--read-timeout S] [--idle-timeout S]
//   [--allowed-hosts H,...] [--cors-origin O] [--trusted-proxies A,...] [--http-threads N]
//   [--mtp] [--batch-size B] [--threads N] [--max-chunk N] [--max-context N] [--page-tokens P]
//   [--cache-blocks N] [--prefix-blocks N] [--isa I] [--tp T [--dp D] [--ep E]] [--cp-prefill N]
// The OpenAI-compatible HTTP server (apps/server) over the engine's Service. Prints
// "dsv4 serve: listening on http://HOST:PORT" once bound (--port 0 picks a free port).
// The API keys: --api-key, else --api-key-file (one per line, each a tenant), else
// $DSV4_API_KEY (none: /v1/* is open, and a non-loopback bind warns). Every limit and the
// security model: docs/serving.md.
// SIGTERM / SIGINT: new requests get 503, running ones finish within --grace-seconds, the rest
// are cancelled, and the process exits 0.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "io/file_util.h"
#include "model/config.h"
#include "engine_flags.h"
#include "ranks.h"
#include "runtime/engine.h"
#include "runtime/service.h"
#include "server/protocol.h"
#include "server/server.h"
#include "text/tokenizer_dir.h"

namespace dsv4::cli {
namespace {

struct ServeArgs {
  EngineFlags engine;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string api_key_file;
  std::string served_model_name;
  int max_queue = 256;
  double grace_seconds = 30;
  int64_t max_tokens_limit = 4096;
  int32_t max_n = 8;
  std::string json_whitespace = "compact";
  std::string allowed_hosts, cors_origin, trusted_proxies;
  std::string prefix_cache_scope;  // "global", "key" or "" (key with several keys, else global)
  bool metrics_auth = false;
  server::ServerOptions http;  // limits and timeouts (their defaults are the flags')
};

// The keys from --api-key, --api-key-file (one per line: server::parse_api_keys) or
// $DSV4_API_KEY; none: empty.
constexpr size_t kMaxApiKeyFileBytes = 16u << 20;

Result<std::vector<std::string>> api_keys(const ServeArgs& a) {
  if (!a.api_key.empty()) return std::vector<std::string>{a.api_key};
  if (!a.api_key_file.empty()) {
    Result<std::vector<uint8_t>> bytes = read_file(a.api_key_file, kMaxApiKeyFileBytes);
    if (!bytes.ok()) return bytes.status().with_context("--api-key-file");
    Result<std::vector<std::string>> keys = server::parse_api_keys(
        std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), a.api_key_file);
    if (!keys.ok()) return keys.status().with_context("--api-key-file");
    return keys;
  }
  const char* env = std::getenv("DSV4_API_KEY");
  if (env == nullptr || *env == '\0') return std::vector<std::string>{};
  return std::vector<std::string>{env};
}

// --prefix-cache-scope and --metrics-auth against the keys: true when each key gets its own
// prefix-cache namespace.
Result<bool> prefix_cache_per_key(const ServeArgs& a, size_t n_keys) {
  if (a.metrics_auth && n_keys == 0)
    return Status::error("--metrics-auth needs an API key (--api-key-file, --api-key or DSV4_API_KEY)");
  if (a.prefix_cache_scope == "key" && n_keys == 0)
    return Status::error("--prefix-cache-scope key needs API keys (--api-key-file)");
  if (a.prefix_cache_scope.empty()) return n_keys > 1;
  return a.prefix_cache_scope == "key";
}

// The HTTP server's options from the flags: limits, address, keys and access rules.
Result<server::ServerOptions> server_options(const ServeArgs& a) {
  Result<std::vector<std::string>> keys = api_keys(a);
  if (!keys.ok()) return keys.status();
  Result<bool> per_key = prefix_cache_per_key(a, keys->size());
  if (!per_key.ok()) return per_key.status();
  server::ServerOptions opt = a.http;
  opt.json_whitespace_flexible = a.json_whitespace == "flexible";
  opt.host = a.host;
  opt.port = a.port;
  opt.access.api_keys = std::move(*keys);
  opt.access.metrics_auth = a.metrics_auth;
  opt.prefix_cache_per_key = *per_key;
  opt.access.allowed_hosts = server::split_list(a.allowed_hosts);
  opt.access.cors_origin = a.cors_origin;
  opt.access.trusted_proxies = server::split_list(a.trusted_proxies);
  return opt;
}

// Each open connection is a descriptor: raise the soft limit to the hard one.
void raise_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// The model directory's name (without trailing slashes), e.g. "tiny-fp8-seed0".
std::string dir_name(const std::string& dir) {
  std::filesystem::path p(dir);
  while (p.has_relative_path() && p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? "dsv4" : name;
}

// generation_config.json's sampling defaults (absent file: temperature 1, top_p 1).
Result<server::GenerationDefaults> generation_defaults(const std::string& dir) {
  const std::string path = dir + "/generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return server::GenerationDefaults{};
  Result<std::vector<uint8_t>> bytes = read_file(path, 1u << 20);
  if (!bytes.ok()) return bytes.status();
  return server::parse_generation_config(
      std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), path);
}

// Waits for SIGTERM / SIGINT (blocked in every thread) and drains the server, or drains it for
// kFailedDrainSeconds once job_failed() (ranks: the engine's loop failed, so the job is over and
// the server answers what it holds, then ends); returns when `done` is set (the server stopped
// for another reason).
constexpr double kFailedDrainSeconds = 2;

void watch_signals(server::HttpServer& http, double grace_seconds, const std::atomic<bool>& done,
                   const std::function<bool()>& job_failed) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  const timespec tick{0, 200 * 1000 * 1000};
  while (!done.load()) {
    const int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      std::fprintf(stderr, "dsv4 serve: %s: draining (grace %.1f s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                   grace_seconds);
      http.drain(grace_seconds);
      return;
    }
    if (job_failed()) {
      std::fprintf(stderr, "dsv4 serve: the engine failed on a rank: ending the job\n");
      http.drain(kFailedDrainSeconds);
      return;
    }
  }
}

// --prefix-blocks auto (the serve default): a quarter of the compressed-cache blocks, at most
// kMaxAutoPrefixBlocks (each entry also keeps W - 1 window rows per layer); off below the pages
// a hit needs.
constexpr int kMaxAutoPrefixBlocks = 256;
constexpr int kMinPrefixPageTokens = 4;  // the CSA compress ratio (runner.cc)

int auto_prefix_blocks(const EngineFlags& f) {
  if (f.page_tokens < kMinPrefixPageTokens) return 0;
  const int64_t blocks = f.cache_blocks > 0 ? f.cache_blocks
                                            : (f.max_context + f.page_tokens - 1) / f.page_tokens * f.batch_size;
  return static_cast<int>(std::clamp<int64_t>(blocks / 4, 1, kMaxAutoPrefixBlocks));
}

int run_serve(const ServeArgs& a) {
  // Signals go to the watcher thread only; a client that closes its socket must not kill us.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const EngineFlags& ef = a.engine;
  Result<ModelSession> session = start_model_session(ef);
  if (!session.ok()) return fail(session.status());
  RankSession& rs = *session->ranks;
  const std::string* dir = &session->model->dir;
  const ModelConfig* cfg = &session->model->cfg;
  Result<TextModel> text = load_tokenizer_dir(*dir);
  Result<server::GenerationDefaults> defaults = text.ok() ? generation_defaults(*dir)
                                                          : Result<server::GenerationDefaults>(text.status());
  if (Status st = rs.agree(defaults.status()); !st.ok())
    return fail(st.with_context("serve needs the model's tokenizer.json"));
  if (a.max_queue < 0) return fail(Status::errorf("--max-queue = {} must not be negative", a.max_queue));
  if (a.http.io_threads < 1) return fail(Status::errorf("--http-threads = {} must be at least 1", a.http.io_threads));
  Result<server::ServerOptions> http_options = server_options(a);
  if (!http_options.ok()) return fail(http_options.status());

  EngineFlags limit_flags = ef;
  if (limit_flags.prefix_blocks < 0) limit_flags.prefix_blocks = auto_prefix_blocks(ef);
  Result<Limits> lim = engine_limits(limit_flags, rs.world_size());
  if (!lim.ok()) return fail(lim.status());
  Result<EngineOptions> eo = engine_options(ef, *cfg, rs);
  if (!eo.ok()) return fail(eo.status());
  eo->tokenizer = &text->tokenizer;
  auto engine = Engine::create(*cfg, session->model->weights, *lim, *eo);
  if (Status st = rs.agree(engine.status()); !st.ok()) return fail(st);
  if (!rs.primary()) return follow_rank0(**engine, rs);

  server::ModelCard card;
  card.id = a.served_model_name.empty() ? dir_name(*dir) : a.served_model_name;
  card.created = static_cast<int64_t>(std::time(nullptr));
  card.max_context = std::min<int64_t>(ef.max_context, cfg->max_position_embeddings > 0 ? cfg->max_position_embeddings
                                                                                         : ef.max_context);
  card.text = &*text;
  card.temperature = defaults->temperature;
  card.top_p = defaults->top_p;
  card.max_tokens_limit = a.max_tokens_limit;
  card.max_n = a.max_n;
  card.max_tokens_fit = [&e = **engine](int64_t n_prompt) { return e.max_tokens_that_fit(n_prompt); };

  ServiceOptions so;
  so.max_queue = a.max_queue;
  std::unique_ptr<Service> service = Service::start(**engine, so);

  const server::ServerOptions& opt = *http_options;
  const std::vector<std::string>& keys = opt.access.api_keys;
  raise_descriptor_limit();
  server::HttpServer http(*service, card, opt);
  Result<int> port = http.bind();
  if (!port.ok()) {
    service->shutdown(0);
    return fail(port.status());
  }
  std::printf("dsv4 serve: model %s (%s), context %lld, batch %d%s%s%s\n", card.id.c_str(), dir->c_str(),
              static_cast<long long>(card.max_context), ef.batch_size,
              rs.world_size() > 1 ? fmt::format(" per rank on {} ranks", rs.world_size()).c_str() : "",
              spec_label(*eo).empty() ? "" : (", " + spec_label(*eo) + " drafts").c_str(),
              lim->prefix_blocks > 0 ? fmt::format(", prefix cache {} blocks", lim->prefix_blocks).c_str() : "");
  if (keys.size() > 1)
    std::printf("dsv4 serve: %zu API keys (tenants), prefix cache %s\n", keys.size(),
                opt.prefix_cache_per_key ? "per key" : "shared (cache_salt separates)");
  if (!server::is_loopback_address(a.host) && keys.empty())
    std::fprintf(stderr, "dsv4 serve: warning: %s is not a loopback address and no API key is set: anyone who "
                         "reaches it can use /v1/* (--api-key-file, DSV4_API_KEY)\n", a.host.c_str());
  std::printf("dsv4 serve: listening on http://%s:%d\n", a.host.c_str(), *port);
  std::fflush(stdout);

  std::atomic<bool> done{false};
  const bool ranks = rs.groups() != nullptr;
  std::thread watcher(
      [&] { watch_signals(http, a.grace_seconds, done, [&] { return ranks && !service->loop_status().ok(); }); });
  const Status served = http.run();
  done.store(true);
  watcher.join();
  service->shutdown(0);  // no-op after a drain
  const Status loop = service->loop_status();
  service.reset();
  std::printf("dsv4 serve: stopped\n");
  if (ranks && !loop.ok()) rs.end_failed_job(loop.with_context("engine"));
  if (!served.ok()) return fail(served);
  if (!loop.ok()) return fail(loop.with_context("engine"));
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions)");
  a->engine.batch_size = 8;
  a->engine.prefix_blocks = -1;  // auto
  add_engine_options(sub, &a->engine);
  sub->get_option("--prefix-blocks")
      ->description("Prefix-cache entries (prompt blocks kept for reuse; 0 = off; default: a quarter of the cache "
                    "blocks, at most 256)")
      ->default_str("auto");
  sub->add_option("--host", a->host, "Address to bind")->capture_default_str();
  sub->add_option("--port", a->port, "TCP port (0: any free port)")->capture_default_str();
  server::ServerOptions& h = a->http;
  sub->add_option("--api-key", a->api_key, "Require \"Authorization: Bearer KEY\" on /v1/*, /tokenize and /detokenize (visible in the process "
                  "list: prefer --api-key-file or DSV4_API_KEY)");
  sub->add_option("--api-key-file", a->api_key_file,
                  "Read the API keys from FILE: one per line, each a tenant ('#' lines and empty lines skipped)");
  sub->add_option("--prefix-cache-scope", a->prefix_cache_scope,
                  "global: one prefix cache for every key (only a request's cache_salt separates); key: each API "
                  "key gets its own prefix-cache namespace")
      ->check(CLI::IsMember({"global", "key"}))
      ->default_str("key with several keys, else global");
  sub->add_flag("--metrics-auth", a->metrics_auth, "/metrics needs an API key too (401 without)");
  sub->add_option("--served-model-name", a->served_model_name,
                  "Model id of /v1/models and the requests' \"model\" (default: the model directory's name)");
  sub->add_option("--max-queue", a->max_queue, "Requests waiting for admission beyond this get 429 + Retry-After")
      ->capture_default_str();
  sub->add_option("--grace-seconds", a->grace_seconds,
                  "On SIGTERM/SIGINT: how long running requests may finish before they are cancelled")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--request-timeout", h.request_timeout,
                  "Seconds a request may take (then finish_reason \"length\", stop_reason \"timeout\"; 0 = none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-tokens-limit", a->max_tokens_limit,
                  "Largest max_tokens a request may ask (above: 400); without max_tokens a request gets the smaller "
                  "of this and the rest of the context (0 = the context)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--json-whitespace", a->json_whitespace,
                  "Structured output's whitespace: compact (\", \" and \": \" only) or flexible (up to 16 "
                  "characters per gap); a schema's root x-guidance overrides it per request")
      ->capture_default_str()
      ->check(CLI::IsMember({"compact", "flexible"}));
  sub->add_option("--max-n", a->max_n,
                  "Largest n (choices) and best_of a request may ask (above: 400); the choices share the "
                  "prompt's cache pages")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxChoices));
  sub->add_option("--max-body-bytes", h.limits.max_body_bytes,
                  "Largest request body, for every transfer encoding (larger: 413)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-header-bytes", h.limits.max_header_bytes, "Largest request header (larger: 431)")
      ->capture_default_str()
      ->check(CLI::Range(1024u, 1u << 20));
  sub->add_option("--max-pending-bytes", h.max_pending_bytes,
                  "Bytes the requests being parsed, queued and running may hold together, 4 per body byte "
                  "(beyond: 503 + Retry-After; 0: an eighth of the memory, 256 MiB to 8 GiB)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-headers", h.limits.max_headers, "Most header fields in a request (more: 431)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  sub->add_option("--max-connections", h.max_connections, "Open connections in all (beyond: closed at once)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-connections-per-client", h.max_connections_per_client,
                  "Open connections per client address (behind --trusted-proxies: per X-Forwarded-For client)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--read-timeout", h.limits.read_timeout,
                  "Seconds from a request's first byte to its last body byte (slower: the connection is closed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--idle-timeout", h.limits.idle_timeout, "Seconds a connection may wait for its next request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--allowed-hosts", a->allowed_hosts,
                  "Host names the Host header may carry besides the bound address and, on a loopback bind, "
                  "localhost/127.0.0.1/[::1] (comma-separated; on a non-loopback bind, given: only these)");
  sub->add_option("--cors-origin", a->cors_origin, "The one cross origin allowed (CORS answered for it only)");
  sub->add_option("--trusted-proxies", a->trusted_proxies,
                  "Reverse-proxy addresses whose X-Forwarded-For names the client (comma-separated)");
  sub->add_option_function<std::string>(
         "--access-log", [a](const std::string& v) { a->http.access_log = v == "on"; },
         "One JSON line per request on stderr: the server's id, the client's X-Request-Id, route, status, tokens, "
         "time to first token, total time (on|off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str("on");
  sub->add_option("--http-threads", h.io_threads, "Threads running the connections' I/O (no thread waits for a "
                  "request)")
      ->capture_default_str();
  return {sub, [a]() { return run_serve(*a); }};
}

}  // namespace dsv4::cli
