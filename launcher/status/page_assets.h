// The live page's files (launcher/status/page/), compiled into the binary: nothing is read from
// disk or fetched from elsewhere at run time. CMake turns each file into a string literal
// (page/embed_page.cmake writes status_page_files.cc); this header maps URL paths to them.
#pragma once

#include <string_view>

namespace dslaunch::launcher {

struct PageAsset {
  std::string_view path;          // "/", "/status.css", "/status.js"
  std::string_view content_type;
  std::string_view body;
};

// The asset served at `path`, or nullptr.
const PageAsset* FindPageAsset(std::string_view path);

// Generated: the content of launcher/status/page/NAME ("index.html", ...), empty if none.
std::string_view EmbeddedPageFile(std::string_view name);

}  // namespace dslaunch::launcher
