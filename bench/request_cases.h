// The request path's cost per body byte (issue 40): the worst bodies one can build for each
// route (many keys, deep nesting, long strings, many $defs, many tools, many stop strings,
// tool-call arguments of many keys), each at 64 KiB and at the largest body (--max-body-bytes'
// default, 8 MiB), through what the server runs on its parse pool: JSON parse, chat render,
// tokenize, grammar compile. Linear handling shows as the same microseconds per KiB at both
// sizes. The tokenizer: --tokenizer's tokenizer.json, else the tiny test vocabulary.
#pragma once

#include <string>

#include "base/status.h"

namespace dsv4::bench {

Status run_request_cases(const std::string& tokenizer_path, int repeats);
// The same shapes split by stage (body parse, chat render, tokenize, the rest) at 64 KiB,
// 512 KiB, 2 MiB and 8 MiB: thread CPU time per KiB, medians (case "request_stages").
Status run_request_stages(const std::string& tokenizer_path, int repeats);

}  // namespace dsv4::bench
