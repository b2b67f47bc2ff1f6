#include "launcher/status/page_assets.h"

namespace dslaunch::launcher {

const PageAsset* FindPageAsset(std::string_view path) {
  static const PageAsset kAssets[] = {
      {"/", "text/html; charset=utf-8", EmbeddedPageFile("index.html")},
      {"/index.html", "text/html; charset=utf-8", EmbeddedPageFile("index.html")},
      {"/status.css", "text/css; charset=utf-8", EmbeddedPageFile("status.css")},
      {"/status.js", "text/javascript; charset=utf-8", EmbeddedPageFile("status.js")},
  };
  for (const PageAsset& a : kAssets) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace dslaunch::launcher
