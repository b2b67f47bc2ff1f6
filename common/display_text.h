// DisplayText: arbitrary bytes (a model's generated text, a program's output line) made safe to
// show on a terminal, in a web page or in report.html (docs/observability.md, "Text shown as
// text"). Pure.
//
// The result is valid UTF-8 holding no control character but newline and tab:
//   - every other C0 control byte (0x00-0x1f) and DEL (0x7f) becomes "\xHH" (lower-case hex):
//     ESC cannot start a terminal escape sequence, CR cannot overwrite a line, NUL cannot cut
//     the text short;
//   - the C1 control characters U+0080-U+009F (valid UTF-8, but a terminal may read U+009B as
//     CSI) become "\u0080".."\u009f";
//   - bytes that are not well-formed UTF-8 (a stray continuation byte, a truncated sequence, an
//     overlong form, a surrogate, a code point above U+10FFFF) become U+FFFD, one per maximal
//     ill-formed part, as the WHATWG decoder that browsers use counts them;
//   - everything else, multi-byte UTF-8 included, is kept as it is.
// Backslashes are kept: the escapes are for reading, not a reversible encoding, so a literal
// "\x1b" in the text and an escaped ESC look alike. Applying it twice changes nothing.
#pragma once

#include <string>
#include <string_view>

namespace dslaunch {

std::string DisplayText(std::string_view bytes);

}  // namespace dslaunch
