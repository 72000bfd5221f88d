// UTF-8 helpers and the character tables shared by the tokenizer components.
#include <unicode/uchar.h>

#include <array>
#include <string>
#include <string_view>

#include "tokenizer/components.hpp"

namespace specd::tokenizer::detail {

char32_t next_code_point(std::string_view text, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  const size_t n = utf8_length(b0);
  char32_t cp = 0;
  switch (n) {
    case 1:
      cp = b0;
      break;
    case 2:
      cp = b0 & 0x1Fu;
      break;
    case 3:
      cp = b0 & 0x0Fu;
      break;
    default:
      cp = b0 & 0x07u;
      break;
  }
  for (size_t i = 1; i < n && pos + i < text.size(); ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3Fu);
  pos += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

namespace {

// One step of the WHATWG UTF-8 decoder. Returns false when the byte must be processed again
// (it ended an invalid sequence).
struct Utf8Decoder {
  char32_t cp = 0;
  int needed = 0;
  int seen = 0;
  unsigned lower = 0x80;
  unsigned upper = 0xBF;

  void reset() {
    cp = 0;
    needed = seen = 0;
    lower = 0x80;
    upper = 0xBF;
  }

  bool feed(unsigned char b, std::string& out) {
    if (needed == 0) {
      if (b < 0x80) {
        out.push_back(static_cast<char>(b));
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed = 1;
        cp = b & 0x1Fu;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
        needed = 2;
        cp = b & 0x0Fu;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
        needed = 3;
        cp = b & 0x07u;
      } else {
        append_utf8(out, 0xFFFD);
      }
      return true;
    }
    if (b < lower || b > upper) {
      reset();
      append_utf8(out, 0xFFFD);
      return false;
    }
    lower = 0x80;
    upper = 0xBF;
    cp = (cp << 6) | (b & 0x3Fu);
    if (++seen == needed) {
      append_utf8(out, cp);
      reset();
    }
    return true;
  }
};

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    unsigned lower = 0x80, upper = 0xBF;
    size_t need;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) lower = 0xA0;
      if (b == 0xED) upper = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) lower = 0x90;
      if (b == 0xF4) upper = 0x8F;
    } else {
      return false;
    }
    for (size_t k = 1; k <= need; ++k) {
      if (i + k >= n) return false;
      const auto c = static_cast<unsigned char>(bytes[i + k]);
      if (c < lower || c > upper) return false;
      lower = 0x80;
      upper = 0xBF;
    }
    i += need + 1;
  }
  return true;
}

namespace {
thread_local int raw_bytes_depth = 0;
}  // namespace

RawBytesScope::RawBytesScope() {
  ++raw_bytes_depth;
}
RawBytesScope::~RawBytesScope() {
  --raw_bytes_depth;
}

std::string utf8_lossy(std::string_view bytes) {
  if (raw_bytes_depth > 0 || is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  Utf8Decoder dec;
  for (size_t i = 0; i < bytes.size();) {
    if (dec.feed(static_cast<unsigned char>(bytes[i]), out)) ++i;
  }
  if (dec.needed != 0) append_utf8(out, 0xFFFD);
  return out;
}

bool is_js_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string_view js_trim_start(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_js_whitespace(next_code_point(text, next))) break;
    pos = next;
  }
  return text.substr(pos);
}

std::string_view js_trim_end(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t p = start;
    if (!is_js_whitespace(next_code_point(text, p))) break;
    end = start;
  }
  return text.substr(0, end);
}

namespace {

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<char32_t, 256> code_points{};
  ByteTables() {
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      code_points[b] = direct[b] ? static_cast<char32_t>(b) : next++;
      append_utf8(to_unicode[b], code_points[b]);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

const std::string& byte_to_unicode(unsigned char byte) {
  return byte_tables().to_unicode[byte];
}

int unicode_to_byte(char32_t cp) {
  // The table maps bytes to U+0021..U+00FF (identity) or U+0100..U+0143 (in byte order).
  static const auto inverse = [] {
    std::array<int, 0x144> inv{};
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_tables().code_points[b]] = b;
    return inv;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

bool is_word_char(char32_t cp) {
  if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE)) return true;
  const auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC)) return true;
  const auto mask = U_GET_GC_MASK(c);
  return (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

}  // namespace specd::tokenizer::detail
