// Value formatting and conversion shared by Schema and Config; internal to
// the core module (the public API is topspin/core/config.h).
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "topspin/core/config.h"
#include "topspin/core/error.h"

namespace topspin::config_internal {

// YAML text of a value: strings plain when unambiguous, double-quoted
// otherwise; floats in shortest round-trip form that still reads as a float
// ("1.0", not "1"); lists as "[a, b]".
std::string YamlValue(const ConfigValue& value);

// A node as error messages name it: "a mapping", "a list", "nothing", or the
// quoted scalar text.
std::string DescribeNode(const YAML::Node& node);

// Converts `text` to spec.type and checks spec's range (kInt, kFloat) or
// choices (kString); a kStringList becomes a one-item list, a kIntList
// reads comma-separated integers ("128,64"; "" is empty), each in range. Throws
// Error{kConfig} at `where`, with a hint naming the key's doc and default.
ConfigValue ConvertScalar(const FieldSpec& spec, const std::string& text, const ErrorWhere& where);

// Same for a YAML node: a kStringList or kIntList takes a sequence of
// scalars (null means empty; a kIntList also a scalar, as in ConvertScalar);
// every other type takes a scalar, as in ConvertScalar.
ConfigValue ConvertNode(const FieldSpec& spec, const YAML::Node& node, const ErrorWhere& where);

}  // namespace topspin::config_internal
