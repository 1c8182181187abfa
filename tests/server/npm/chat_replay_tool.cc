// Test helper of the OpenAI SDK test (openai_sdk.mjs): the chat response dsv4 serve sends for a
// scripted generation, without an engine (the built-in tiny models do not write tool calls).
// Feeds TEXT_FILE's text (UTF-8, EOS string included) to server::ResponseBuilder in updates of
// CHARS characters and writes OUT_DIR/stream.sse (stream: true) and OUT_DIR/complete.json.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "server/protocol.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer_dir.h"

namespace {

using namespace dsv4;

int fail(const std::string& what) {
  std::fprintf(stderr, "chat_replay_tool: %s\n", what.c_str());
  return 1;
}

// The response to the scripted text, in the stream or the complete form.
std::string respond(const server::ModelCard& card, const std::string& text, size_t chars, bool stream) {
  server::ApiRequest request;
  request.endpoint = server::Endpoint::kChat;
  request.stream = stream;
  server::ResponseBuilder builder(request, card, "chatcmpl-replay", card.created);
  std::string out;
  for (size_t at = 0; at < text.size();) {
    size_t end = at;
    for (size_t n = 0; n < chars && end < text.size(); ++n)
      for (++end; end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80; ++end) {}
    RequestUpdate u;
    u.tokens = {0};
    u.text = text.substr(at, end - at);
    u.finished = end == text.size();
    u.reason = u.finished ? FinishReason::kStop : FinishReason::kNone;
    out += builder.add(u);
    at = end;
  }
  return stream ? out : *builder.response();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: chat_replay_tool TEXT_FILE CHARS OUT_DIR\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return fail(std::string("cannot read ") + argv[1]);
  const size_t chars = std::strtoul(argv[2], nullptr, 10);
  if (chars == 0) return fail("CHARS must be at least 1");
  Result<TinyTokenizerFiles> files = make_tiny_tokenizer();
  if (!files.ok()) return fail(files.message());
  Result<Tokenizer> tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
  if (!tok.ok()) return fail(tok.message());
  Result<TokenizerConfig> cfg = parse_tokenizer_config(files->tokenizer_config_json, "tiny", *tok);
  if (!cfg.ok()) return fail(cfg.message());
  const TextModel model{std::move(*tok), *cfg};
  server::ModelCard card;
  card.id = "tiny";
  card.created = 1700000000;
  card.max_context = 4096;
  card.text = &model;
  for (bool stream : {true, false}) {
    const std::string path = std::string(argv[3]) + (stream ? "/stream.sse" : "/complete.json");
    std::ofstream out(path, std::ios::binary);
    out << respond(card, text.str(), chars, stream);
    if (!out) return fail("cannot write " + path);
  }
  return 0;
}
