#include "runtime/output_text.h"

#include <algorithm>

#include "text/stop_prefix.h"

namespace dsv4 {

OutputText::OutputText(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : decoder_(tokenizer), stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

bool OutputText::push(int32_t id, std::string& released) {
  if (stopped_) return true;
  if (!decoder_.push(id, held_).ok()) return false;  // out of range: the engine never samples one
  // Earliest match; every match starts inside held_ (released text holds no stop prefix).
  size_t cut = std::string::npos;
  const std::string* match = nullptr;
  for (const std::string& s : stops_)
    if (const size_t at = held_.find(s); at < cut) {
      cut = at;
      match = &s;
    }
  if (match) {
    released.append(held_, 0, cut);
    held_.clear();
    stopped_ = true;
    matched_ = *match;
    return true;
  }
  release_decided(released);
  return false;
}

// Releases all of held_ except the tail that could still begin a stop string.
void OutputText::release_decided(std::string& released) {
  const size_t keep = stop_prefix_length(held_, stops_);
  released.append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
}

void OutputText::finish(std::string& released) {
  if (stopped_) return;
  decoder_.finish(held_);
  released += held_;
  held_.clear();
}

}  // namespace dsv4
