#include "template/pystr.hpp"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cstring>

#include "template/budget.hpp"
#include "tokenizer/components.hpp"

namespace specd::jinja::pystr {

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

char32_t next_char(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
  for (int k = 1; ok && k < len; ++k) {
    const auto cb = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    ok = (cb & 0xC0) == 0x80;
    c = (c << 6) | (cb & 0x3F);
  }
  if (!ok) {
    ++i;
    return 0xFFFD;
  }
  i += static_cast<size_t>(len);
  return c;
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_char(s, i));
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  tokenizer::detail::append_utf8(out, c);
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool is_space(char32_t c) {
  // Python's str.isspace(): bidirectional class WS, B or S, or category Zs.
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string cs = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strip_it(cs[b])) ++b;
  if (right)
    while (e > b && strip_it(cs[e - 1])) --e;
  return encode(std::u32string_view(cs).substr(b, e - b));
}

namespace {

// Python's str.split() / str.rsplit() without a separator. The words are found on the UTF-8
// text as byte spans (decoding the whole string first took 4 bytes per character outside the
// budget); each is charged as the list element it becomes.
std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  struct Span {
    size_t begin, end;
  };
  std::vector<Span> words;
  auto space_at = [&](size_t at, size_t& next) {
    next = at;
    return is_space(next_char(s, next));
  };
  for (size_t i = 0, next = 0;;) {
    while (i < s.size() && space_at(i, next)) i = next;
    if (i == s.size()) break;
    size_t j = i;
    while (j < s.size() && !space_at(j, next)) j = next;
    charge_work(kListElementUnits + (j - i));
    words.push_back({i, j});
    i = j;
    if (!from_right && maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit) break;
  }
  // Invalid UTF-8 reads as U+FFFD, as everywhere else in the template's strings.
  auto text = [&](size_t begin, size_t end) { return encode(decode(s.substr(begin, end - begin))); };
  std::vector<std::string> out;
  const size_t n = words.size();
  if (maxsplit < 0 || n <= static_cast<size_t>(maxsplit)) {
    out.reserve(n);
    for (const Span& w : words) out.push_back(text(w.begin, w.end));
    return out;
  }
  const auto m = static_cast<size_t>(maxsplit);
  out.reserve(m + 1);
  if (!from_right) {  // m words, then the rest from the next word on (its trailing spaces kept)
    for (size_t k = 0; k < m; ++k) out.push_back(text(words[k].begin, words[k].end));
    out.push_back(text(words[m].begin, s.size()));
  } else {  // the text up to the end of word n-m-1 (its leading spaces kept), then m words
    out.push_back(text(0, words[n - m - 1].end));
    for (size_t k = n - m; k < n; ++k) out.push_back(text(words[k].begin, words[k].end));
  }
  return out;
}

}  // namespace

namespace {

// Needles up to this long use the library's search: its worst case is |s| x |sub| comparisons,
// bounded by 16 |s| here, and it is the faster one for short needles.
constexpr size_t kShortNeedle = 16;

// Knuth-Morris-Pratt: calls on_match(start) for every occurrence in s[from..] (overlapping ones
// too) until it returns false. O(|s| + |sub|).
template <class OnMatch>
void kmp(std::string_view s, std::string_view sub, size_t from, OnMatch on_match) {
  charge_work(sub.size() * sizeof(uint32_t));  // the table, against the render's budget
  std::vector<uint32_t> fail(sub.size(), 0);
  for (uint32_t i = 1, k = 0; i < sub.size(); ++i) {
    while (k > 0 && sub[i] != sub[k]) k = fail[k - 1];
    if (sub[i] == sub[k]) ++k;
    fail[i] = k;
  }
  for (size_t i = from, k = 0; i < s.size(); ++i) {
    while (k > 0 && s[i] != sub[k]) k = fail[k - 1];
    if (s[i] == sub[k]) ++k;
    if (k == sub.size()) {
      if (!on_match(i + 1 - k)) return;
      k = fail[k - 1];
    }
  }
}

}  // namespace

size_t search(std::string_view s, std::string_view sub, size_t from) {
  if (sub.size() <= kShortNeedle || from > s.size()) return s.find(sub, from);
  size_t found = std::string_view::npos;
  kmp(s, sub, from, [&](size_t at) {
    found = at;
    return false;
  });
  return found;
}

size_t search_last(std::string_view s, std::string_view sub) {
  if (sub.size() <= kShortNeedle) return s.rfind(sub);
  size_t found = std::string_view::npos;
  kmp(s, sub, 0, [&](size_t at) {
    found = at;
    return true;
  });
  return found;
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, false);
  std::vector<std::string> out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t at = search(s, *sep, pos);
    if (at == std::string_view::npos) break;
    charge_work(kListElementUnits + (at - pos));
    out.emplace_back(s.substr(pos, at - pos));
    pos = at + sep->size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, true);
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    charge_work(kListElementUnits + (end - at - sep->size()));
    out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string cs = decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  while (i < cs.size()) {
    if (!is_break(cs[i])) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (cs[i] == '\r' && end < cs.size() && cs[end] == '\n') ++end;
    out.push_back(encode(std::u32string_view(cs).substr(start, (keepends ? end : i) - start)));
    start = i = end;
  }
  if (start < cs.size()) out.push_back(encode(std::u32string_view(cs).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    const std::u32string cs = decode(s);
    int64_t done = 0;
    for (char32_t c : cs) {
      charge_work(with.size() + 4);
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = search(s, old, pos);
    if (at == std::string_view::npos) break;
    charge_work(at - pos + with.size());
    out.append(s.substr(pos, at - pos));
    out.append(with);
    pos = at + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(decode(s).size()) + 1;
  int64_t n = 0;
  for (size_t pos = search(s, sub); pos != std::string_view::npos; pos = search(s, sub, pos + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, bool last) {
  const size_t at = last ? search_last(s, sub) : search(s, sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(decode(s.substr(0, at)).size());
}

namespace {

icu::UnicodeString to_icu(std::string_view s) {
  return icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
}

std::string from_icu(const icu::UnicodeString& u) {
  std::string out;
  u.toUTF8String(out);
  return out;
}

}  // namespace

std::string upper(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return out;
  }
  return from_icu(to_icu(s).toUpper(icu::Locale::getRoot()));
}

std::string lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  return from_icu(to_icu(s).toLower(icu::Locale::getRoot()));
}

namespace {

bool is_cased(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED) != 0;
}

std::string title_char(char32_t c) {
  std::string out;
  append_utf8(out, static_cast<char32_t>(u_totitle(static_cast<UChar32>(c))));
  return out;
}

}  // namespace

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : decode(s)) {
    std::string one;
    append_utf8(one, c);
    out += prev_cased ? lower(one) : title_char(c);
    prev_cased = is_cased(c);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  const std::u32string cs = decode(s);
  if (cs.empty()) return "";
  return title_char(cs[0]) + lower(encode(std::u32string_view(cs).substr(1)));
}

bool all_of(std::string_view s, const char* cls) {
  const std::u32string cs = decode(s);
  if (cs.empty()) return false;
  auto test = [&](char32_t c) {
    const auto u = static_cast<UChar32>(c);
    if (std::strcmp(cls, "digit") == 0) return u_isdigit(u) != 0;
    if (std::strcmp(cls, "alpha") == 0) return u_isalpha(u) != 0;
    if (std::strcmp(cls, "alnum") == 0) return u_isalnum(u) != 0;
    if (std::strcmp(cls, "space") == 0) return is_space(c);
    return false;
  };
  if (std::strcmp(cls, "lower") == 0 || std::strcmp(cls, "upper") == 0) {
    // Python: at least one cased character and no cased character of the other case.
    const bool want_lower = cls[0] == 'l';
    bool any = false;
    for (char32_t c : cs) {
      const auto u = static_cast<UChar32>(c);
      if (!is_cased(c)) continue;
      if (want_lower ? (u_isUUppercase(u) || u_istitle(u)) : (u_isULowercase(u) || u_istitle(u))) return false;
      any = true;
    }
    return any;
  }
  return std::all_of(cs.begin(), cs.end(), test);
}

}  // namespace specd::jinja::pystr
