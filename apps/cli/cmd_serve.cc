// dsv4 serve [--model DIR] [--host 127.0.0.1] [--port 8000] [--api-key K] [--served-model-name N]
//   [--max-queue N] [--grace-seconds S] [--request-timeout S] [--max-body-bytes N] [--http-threads N]
//   [--mtp] [--batch-size B] [--threads N] [--max-chunk N] [--max-context N] [--page-tokens P]
//   [--cache-blocks N] [--prefix-blocks N] [--isa I] [--tp T [--dp D] [--ep E]] [--cp-prefill N]
// The OpenAI-compatible HTTP server (apps/server) over the engine's Service. Prints
// "dsv4 serve: listening on http://HOST:PORT" once bound (--port 0 picks a free port).
// SIGTERM / SIGINT: new requests get 503, running ones finish within --grace-seconds, the rest
// are cancelled, and the process exits 0.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

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
  std::string served_model_name;
  int max_queue = 256;
  double grace_seconds = 30;
  double request_timeout = 0;
  size_t max_body_bytes = 8u << 20;
  int http_threads = 128;
};

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

// Waits for SIGTERM / SIGINT (blocked in every thread) and drains the server; returns when
// `done` is set (the server stopped for another reason).
void watch_signals(server::HttpServer& http, double grace_seconds, const std::atomic<bool>& done) {
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
  }
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
  if (a.http_threads < 1) return fail(Status::errorf("--http-threads = {} must be at least 1", a.http_threads));

  Result<Limits> lim = engine_limits(ef);
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

  ServiceOptions so;
  so.max_queue = a.max_queue;
  std::unique_ptr<Service> service = Service::start(**engine, so);

  server::ServerOptions opt;
  opt.host = a.host;
  opt.port = a.port;
  opt.api_key = a.api_key;
  opt.max_body_bytes = a.max_body_bytes;
  opt.http_threads = a.http_threads;
  opt.request_timeout = a.request_timeout;
  server::HttpServer http(*service, card, opt);
  Result<int> port = http.bind();
  if (!port.ok()) {
    service->shutdown(0);
    return fail(port.status());
  }
  std::printf("dsv4 serve: model %s (%s), context %lld, batch %d%s\n", card.id.c_str(), dir->c_str(),
              static_cast<long long>(card.max_context), ef.batch_size,
              spec_label(*eo).empty() ? "" : (", " + spec_label(*eo) + " drafts").c_str());
  std::printf("dsv4 serve: listening on http://%s:%d\n", a.host.c_str(), *port);
  std::fflush(stdout);

  std::atomic<bool> done{false};
  std::thread watcher([&] { watch_signals(http, a.grace_seconds, done); });
  const Status served = http.run();
  done.store(true);
  watcher.join();
  service->shutdown(0);  // no-op after a drain
  const Status loop = service->loop_status();
  service.reset();
  std::printf("dsv4 serve: stopped\n");
  if (!served.ok()) return fail(served);
  if (!loop.ok()) return fail(loop.with_context("engine"));
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions)");
  a->engine.batch_size = 8;
  add_engine_options(sub, &a->engine);
  sub->add_option("--host", a->host, "Address to bind")->capture_default_str();
  sub->add_option("--port", a->port, "TCP port (0: any free port)")->capture_default_str();
  sub->add_option("--api-key", a->api_key, "Require \"Authorization: Bearer KEY\" on /v1/*");
  sub->add_option("--served-model-name", a->served_model_name,
                  "Model id of /v1/models and the requests' \"model\" (default: the model directory's name)");
  sub->add_option("--max-queue", a->max_queue, "Requests waiting for admission beyond this get 429")
      ->capture_default_str();
  sub->add_option("--grace-seconds", a->grace_seconds,
                  "On SIGTERM/SIGINT: how long running requests may finish before they are cancelled")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--request-timeout", a->request_timeout,
                  "Seconds a request may take (finish reason \"timeout\"; 0 = none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-body-bytes", a->max_body_bytes, "Largest request body (larger: 413)")->capture_default_str();
  sub->add_option("--http-threads", a->http_threads,
                  "HTTP worker threads: connections served at once (each stream holds one)")
      ->capture_default_str();
  return {sub, [a]() { return run_serve(*a); }};
}

}  // namespace dsv4::cli
