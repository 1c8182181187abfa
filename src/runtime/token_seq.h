// A choice's tokens as one sequence: the request's prompt (immutable, one array shared by all n
// choices of the request) followed by this choice's committed outputs. A view of two pointers:
// valid while the scheduler's request lives (until the next plan() after it ends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/check.h"

namespace dsv4 {

class TokenSeq {
 public:
  TokenSeq(const std::vector<int32_t>& prompt, const std::vector<int32_t>& outputs)
      : prompt_(&prompt), outputs_(&outputs) {}

  size_t size() const { return prompt_->size() + outputs_->size(); }
  bool empty() const { return size() == 0; }
  // Position i of the sequence (i < size()).
  int32_t operator[](size_t i) const {
    const size_t n_prompt = prompt_->size();
    return i < n_prompt ? (*prompt_)[i] : (*outputs_)[i - n_prompt];
  }
  int32_t back() const {
    DSV4_CHECK(!empty());
    return outputs_->empty() ? prompt_->back() : outputs_->back();
  }
  const std::vector<int32_t>& prompt() const { return *prompt_; }
  const std::vector<int32_t>& outputs() const { return *outputs_; }

 private:
  const std::vector<int32_t>* prompt_;
  const std::vector<int32_t>* outputs_;
};

}  // namespace dsv4
