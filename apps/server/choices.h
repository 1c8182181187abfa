// Several choices of one request (n, best_of; runtime/request.h): one ResponseBuilder per
// generated choice, fed the engine's updates by id (choice k: the request's id + k), and the
// response they make together:
//   stream:   each choice's chunks carry its index; after the last choice's last chunk, the
//             usage chunk when asked and one "data: [DONE]"
//   complete: the n choices; with best_of > n the n of highest cumulative logprob (the sum of
//             the generated tokens' logprobs, as vLLM ranks them), best first
// usage counts the prompt once: prompt_tokens and cached_tokens of choice 0, completion and
// reasoning tokens summed over every generated choice. One choice: ResponseBuilder's output.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "protocol.h"

namespace dsv4::server {

class ChoicesBuilder {
 public:
  // first_id: the engine id of choice 0. The request is shared by every choice's builder.
  ChoicesBuilder(std::shared_ptr<const ApiRequest> request, const ModelCard& model, const std::string& id,
                 int64_t created, int64_t first_id);
  ChoicesBuilder(const ApiRequest& request, const ModelCard& model, const std::string& id, int64_t created,
                 int64_t first_id)
      : ChoicesBuilder(std::make_shared<const ApiRequest>(request), model, id, created, first_id) {}

  std::string add(const RequestUpdate& update);
  bool finished() const { return n_finished_ == static_cast<int32_t>(choices_.size()); }
  ApiResult<std::string> response() const;
  int32_t n_generated() const { return static_cast<int32_t>(choices_.size()); }

 private:
  OrderedJson usage_json() const;
  OrderedJson envelope() const;  // a stream chunk's

  std::shared_ptr<const ApiRequest> request_;
  std::string id_, model_id_, fingerprint_;
  int64_t created_ = 0;
  int64_t first_id_;
  std::vector<std::unique_ptr<ResponseBuilder>> choices_;  // [best_of]
  std::vector<double> cumulative_;                         // [best_of] sum of logprobs
  int32_t n_finished_ = 0;
};

}  // namespace dsv4::server
