// One real-size layer as a checkpoint in the released format (random weights), cached on
// disk, mapped one layer kind at a time.
//
// Config: a preset (flash: FP8 attention, FP4 experts; tiny: its fp8 storage) with
// num_hidden_layers = 1 of the kind asked (CSA: ratio 4; HCA: the preset's first ratio
// above 4, 128 on flash), no MTP layer, score routing (num_hash_layers = 0). DSpark: the
// preset's DSpark form (flash-0731, tiny-ds) cut to one CSA main layer and one stage
// (compress_ratios [4, 0], dspark_target_layer_ids [0]; the stage carries main_proj and the
// drafter head, dspark.md §1.4).
// Values (speed matters, not accuracy; they only need to stay finite):
//   FP8 matrices: codes with random sign and |code| < 0x50 (|v| < 4), block scale 2^-8;
//   FP4 experts: random nibbles, scale 2^-7; BF16 matrices over 1 Mi elements uniform
//   with variance 1/in; every other tensor tiny_tensor_sample (oracle/tiny_checkpoint.h).
// The directory is reused while its stamp (generator version + config.json) matches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"

namespace dsv4::bench {

enum class LayerKind { kCsa, kHca, kDspark };
const char* layer_kind_name(LayerKind kind);  // "csa" | "hca" | "dspark"

// The whole model a kind is cut from: flash or tiny (fp8), their DSpark forms for kDspark.
// preset: "flash" | "tiny". Errors name the preset.
Result<ModelConfig> bench_preset_config(const std::string& preset, LayerKind kind);
// That model cut to the benchmarked layer(s) (above).
Result<ModelConfig> bench_layer_config(const std::string& preset, LayerKind kind);

// Writes dir/config.json and dir/model.safetensors once (streamed tensor by tensor),
// or reuses them. Progress goes to stdout.
Status ensure_layer_checkpoint(const ModelConfig& cfg, const std::string& dir);

// The mapped checkpoint and its weights, every page touched once before the load (no
// faults in timed steps; FP4 matrices the loader packs then live in Weights::fp4_dot, their
// file pages released). Destruction unmaps the file and drops its pages from the page cache
// (POSIX_FADV_DONTNEED), so the next layer kind starts from the same memory.
class MappedLayer {
 public:
  static Result<std::unique_ptr<MappedLayer>> open(const std::string& dir, const ModelConfig& cfg);
  ~MappedLayer();
  const Weights& weights() const { return *weights_; }

 private:
  MappedLayer() = default;
  std::string file_;
  std::unique_ptr<SafetensorsSet> files_;
  std::unique_ptr<Weights> weights_;
};

// Peak and current resident set of this process, bytes.
int64_t peak_rss_bytes();
int64_t current_rss_bytes();

}  // namespace dsv4::bench
