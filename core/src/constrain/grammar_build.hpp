// The constrain module's private helpers for building a Grammar (gbnf_parser.cpp, grammar.cpp).
#pragma once

#include <string_view>

#include "constrain/grammar.hpp"

namespace specd::constrain {

// Throws kInvalidArgument naming a rule that can reach itself before consuming a character.
void check_left_recursion(const Grammar& g, std::string_view what);

}  // namespace specd::constrain
