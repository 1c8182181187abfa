// Local $ref targets: "#" followed by a JSON Pointer (RFC 6901) in a URI fragment (RFC 3986:
// percent-decoded first, then ~1 -> '/' and ~0 -> '~' per reference token). Any place of the
// document may be named: #/$defs/a, #/definitions/a~1b, #/properties/x/items, $defs at any depth.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"

namespace dsv4::grammar {

// ref as a local one ("#" and a JSON Pointer) where it names the root document: resolved against
// the root's $id (draft-04: id) by RFC 3986 ("https://json.schemastore.org/x.json#/definitions/a"
// and "x.json#/definitions/a" under that $id -> "#/definitions/a"), and a plain-name fragment
// ("#foo") -> the pointer of the schema declaring it ($anchor, or up to draft-07 $id "#foo").
// Otherwise (another document, an unknown anchor) ref itself. Nested $id resources do not
// change the base: refs resolve against the root's.
std::string local_ref(const OrderedJson& root, const std::string& ref);
// The value `ref` points to in `root`; errors name the $ref and what is wrong with it.
Result<const OrderedJson*> resolve_local_ref(const OrderedJson& root, const std::string& ref);

}  // namespace dsv4::grammar
