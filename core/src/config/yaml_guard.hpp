// Structural checks of an engine YAML file before it is built into nodes (config.cpp).
//
// yaml-cpp builds a document into nodes, and an alias (*name) makes a node shared: walking a
// tree of aliases of aliases (a "billion laughs" file) visits an exponential number of nodes,
// and a duplicate key or a second document is silently dropped. The checks here run over the
// parser's events, which see every alias once, so they take time linear in the text.
#pragma once

#include <cstddef>
#include <string>

namespace YAML {
class Node;
}

namespace specd::config {

inline constexpr int kMaxYamlDepth = 64;          // nested maps and sequences
inline constexpr size_t kMaxYamlNodes = 100'000;  // scalars, maps and sequences in one file

// Parses `text` and returns its root node after checking that it holds at most one document,
// no alias and no merge key (<<), only scalar and unique map keys, nesting at most
// kMaxYamlDepth deep and at most kMaxYamlNodes nodes. Throws specd::Error (kConfig) whose
// lines read "<source>:<line>: <problem>".
YAML::Node load_yaml_checked(const std::string& text, const std::string& source);

}  // namespace specd::config
