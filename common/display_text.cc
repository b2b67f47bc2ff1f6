#include "common/display_text.h"

#include <cstdint>
#include <cstdio>

namespace dslaunch {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The range the byte after lead byte `lead` must lie in (Unicode's table 3-7 of well-formed
// sequences): it rules out overlong forms (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and
// code points above U+10FFFF (F4 90..BF).
void SecondByteRange(unsigned char lead, unsigned char& low, unsigned char& high) {
  low = 0x80;
  high = 0xBF;
  if (lead == 0xE0) low = 0xA0;
  if (lead == 0xED) high = 0x9F;
  if (lead == 0xF0) low = 0x90;
  if (lead == 0xF4) high = 0x8F;
}

// The length of the sequence lead byte `c` starts; 0 for a byte that cannot start one (a
// continuation byte, C0 and C1 which only make overlong forms, F5..FF beyond U+10FFFF).
size_t SequenceLength(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

void AppendHexEscape(std::string& out, const char* form, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), form, value);
  out += buf;
}

}  // namespace

std::string DisplayText(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
        AppendHexEscape(out, "\\x%02x", c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t length = SequenceLength(c);
    if (length == 0) {  // cannot start a sequence: one replacement for this byte
      out += kReplacement;
      ++i;
      continue;
    }
    // Take continuation bytes while they fit; the first that does not ends an ill-formed part
    // (the maximal subpart, which gets one replacement) and is read again as a new start.
    unsigned char low = 0, high = 0;
    SecondByteRange(c, low, high);
    size_t taken = 1;
    while (taken < length && i + taken < bytes.size()) {
      const auto next = static_cast<unsigned char>(bytes[i + taken]);
      const bool fits = taken == 1 ? (next >= low && next <= high) : IsContinuation(next);
      if (!fits) break;
      ++taken;
    }
    if (taken < length) {
      out += kReplacement;
      i += taken;
      continue;
    }
    if (length == 2 && c == 0xC2 && static_cast<unsigned char>(bytes[i + 1]) <= 0x9F) {
      AppendHexEscape(out, "\\u%04x", static_cast<unsigned char>(bytes[i + 1]));  // a C1 control
    } else {
      out.append(bytes.substr(i, length));
    }
    i += length;
  }
  return out;
}

}  // namespace dslaunch
