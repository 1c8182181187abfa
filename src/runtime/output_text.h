// A request's output text (text.md §4.2): the generated ids through a streaming UTF-8
// detokenizer, released piece by piece, with stop strings matched on the text across token
// boundaries. Released text never ends inside a UTF-8 character and never holds a possible
// beginning of a stop string (that suffix is held back until it is decided); after a match
// the text ends just before the stop string and nothing more is released.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace dsv4 {

class OutputText {
 public:
  OutputText(const Tokenizer& tokenizer, std::vector<std::string> stops);
  // Appends the text of `id` to `released` as far as it is decided. Returns true when a stop
  // string completed (then the request ends; later calls release nothing).
  bool push(int32_t id, std::string& released);
  // The request ended for another reason: releases the held-back text.
  void finish(std::string& released);
  bool stopped() const { return stopped_; }
  // The stop string that matched ("" before a match).
  const std::string& matched() const { return matched_; }

 private:
  void release_decided(std::string& released);

  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string held_;  // decoded, not yet released
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace dsv4
