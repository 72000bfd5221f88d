// Python's str methods over UTF-8 text, by code point (what templates index, slice, strip and
// case-map). Case mapping uses ICU's full mappings, as Python's str.upper()/lower() do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specd::jinja::pystr {

// Code points of UTF-8 text (invalid bytes read as U+FFFD) and back.
std::u32string decode(std::string_view s);
// The code point at byte i (U+FFFD for an invalid byte, as decode reads it); advances i past it.
char32_t next_char(std::string_view s, size_t& i);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
bool is_ascii(std::string_view s);

bool is_space(char32_t c);  // str.isspace()
// str.strip(chars) / lstrip / rstrip; chars == nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit): sep == nullopt splits on runs of whitespace and drops empty parts.
// The first occurrence of sub in s at or after `from` (npos if none), in time linear in
// |s| + |sub| whatever the input (a naive search over a 20 MB string with a long, almost
// matching needle takes seconds inside one builtin call, where the render deadline cannot stop
// it); the last occurrence likewise.
size_t search(std::string_view s, std::string_view sub, size_t from = 0);
size_t search_last(std::string_view s, std::string_view sub);
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
int64_t count(std::string_view s, std::string_view sub);
// Code point index of the first (last) occurrence, -1 when absent.
int64_t find(std::string_view s, std::string_view sub, bool last);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title(): words start upper, rest lower
std::string capitalize(std::string_view s);  // first character upper, rest lower

// str.isdigit / isalpha / isalnum / islower / isupper / isspace (ICU character classes).
bool all_of(std::string_view s, const char* cls);

}  // namespace specd::jinja::pystr
