// The worked examples of text.md §3.15: the messages, and each prompt as the spec's
// JSON string literal (parse it to get the exact bytes).
#pragma once

#include <string>

namespace dsv4::chat::examples {

// The special tokens as the tests spell them (text.md §3.2).
inline const std::string kBos = "<｜begin▁of▁sentence｜>";
inline const std::string kEos = "<｜end▁of▁sentence｜>";
inline const std::string kUser = "<｜User｜>";
inline const std::string kAssistant = "<｜Assistant｜>";
inline const std::string kThinkOpen = "<think>";
inline const std::string kThinkClose = "</think>";

// The messages of examples 1-3 (JSON arrays).
inline constexpr const char* kExample1 = R"([{"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": "Hello!"}])";
inline constexpr const char* kExample2 = R"([{"role": "system", "content": "You are a helpful assistant."},
 {"role": "user", "content": "What is 2+2?"},
 {"role": "assistant", "reasoning_content": "Simple arithmetic.", "content": "2 + 2 = 4."},
 {"role": "user", "content": "And 3+3?"}])";
inline constexpr const char* kExample3 = R"([{"role": "system", "content": "You are a helpful assistant.",
  "tools": [{"type": "function", "function": {"name": "get_weather",
             "description": "Get the current weather for a city",
             "parameters": {"type": "object",
                            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                            "required": ["city"]}}}]},
 {"role": "user", "content": "Weather in Paris for 2 days?"},
 {"role": "assistant", "reasoning_content": "Need the weather tool.", "content": "",
  "tool_calls": [{"id": "call_1", "type": "function",
                  "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
 {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 18, \"sky\": \"cloudy\"}"}])";

inline constexpr const char* kPrompt1Json =
    R"json("<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello!<｜Assistant｜></think>")json";

inline constexpr const char* kPrompt2Json =
    R"json("<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is 2+2?<｜Assistant｜></think>2 + 2 = 4.<｜end▁of▁sentence｜><｜User｜>And 3+3?<｜Assistant｜><think>")json";

inline constexpr const char* kPrompt3Json =
    R"json("<｜begin▁of▁sentence｜>You are a helpful assistant.\n\n## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"$TOOL_NAME\">\n<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n...\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"$TOOL_NAME2\">\n...\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n\nString parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\nOtherwise, output directly after </think> with tool calls or final response.\n\n### Available Tool Schemas\n\n{\"name\": \"get_weather\", \"description\": \"Get the current weather for a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n<｜User｜>Weather in Paris for 2 days?<｜Assistant｜><think>Need the weather tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜User｜><tool_result>{\"temp_c\": 18, \"sky\": \"cloudy\"}</tool_result><｜Assistant｜><think>")json";

}  // namespace dsv4::chat::examples
