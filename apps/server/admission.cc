#include "admission.h"

namespace dsv4::server {

// The ApiRequest that the response builders share and the engine's copy of its GenerationRequest
// hold the prompt ids, the stop strings and the constraint text (the compiled grammar is linear
// in it: counted once more); the rendered prompt text is the builders' only. Each choice holds the
// prompt's ids again (its tokens, runtime/scheduler.cc).
int64_t request_footprint(const ApiRequest& request) {
  const GenerationRequest& g = request.gen;
  int64_t text = static_cast<int64_t>(g.constraint.json_schema.size() + g.constraint.tool_calls.size() +
                                      g.constraint.text.size());
  for (const std::string& stop : g.stop_strings) text += static_cast<int64_t>(stop.size());
  const auto ids = static_cast<int64_t>(g.prompt.size() * sizeof(int32_t));
  const auto adjust = static_cast<int64_t>(g.adjust.logit_bias.size() * sizeof(g.adjust.logit_bias[0]));
  const int64_t shared = 3 * text + 2 * (ids + adjust) + static_cast<int64_t>(request.prompt_text.size());
  return kMinRequestCharge + shared + std::max<int64_t>(g.n, 1) * ids;
}

}  // namespace dsv4::server
