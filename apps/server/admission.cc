#include "admission.h"

namespace dsv4::server {

// The ApiRequest that the response builders share and the engine's copy of its GenerationRequest
// hold the prompt ids, the stop strings and the constraint text (the compiled grammar is linear
// in it: counted once more); the rendered prompt text is the builders' only. The choices share
// the engine's prompt ids (runtime/token_seq.h) and hold only their outputs, bounded apart.
int64_t request_footprint(const ApiRequest& request) {
  const GenerationRequest& g = request.gen;
  int64_t text = static_cast<int64_t>(g.constraint.json_schema.size() + g.constraint.tool_calls.size() +
                                      g.constraint.text.size());
  for (const std::string& stop : g.stop_strings) text += static_cast<int64_t>(stop.size());
  // The builders' prompt ids as allocated (the tokenizer grows the vector: up to 2x its size),
  // the engine's copy as used.
  const auto ids = static_cast<int64_t>((g.prompt.capacity() + g.prompt.size()) * sizeof(int32_t));
  const auto adjust = static_cast<int64_t>(g.adjust.logit_bias.size() * sizeof(g.adjust.logit_bias[0]));
  const int64_t shared = 3 * text + ids + 2 * adjust + static_cast<int64_t>(request.prompt_text.capacity());
  return kMinRequestCharge + shared;
}

}  // namespace dsv4::server
