#include "tests/support/allocation_counter.h"

#include <cstdlib>
#include <new>

namespace dslaunch::testing {
namespace {

thread_local AllocationCounter* active = nullptr;

}  // namespace

void CountAllocation(size_t n) {
  for (AllocationCounter* c = active; c != nullptr; c = c->outer_) {
    c->bytes_ += n;
    if (n > c->largest_) c->largest_ = n;
  }
}

AllocationCounter::AllocationCounter() : outer_(active) { active = this; }

AllocationCounter::~AllocationCounter() { active = outer_; }

}  // namespace dslaunch::testing

// The replacements: every non-aligned form of new and delete, on malloc and free, so that the
// pairs stay matched also under AddressSanitizer (which replaces them too and checks the pairing).
namespace {

void* CountedMalloc(std::size_t n) {
  dslaunch::testing::CountAllocation(n);
  return std::malloc(n == 0 ? 1 : n);
}

}  // namespace

void* operator new(std::size_t n) {
  if (void* p = CountedMalloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = CountedMalloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return CountedMalloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return CountedMalloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
