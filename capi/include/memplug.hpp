// memplug.hpp — memplug for C++17: a header-only layer over memplug_host.h.
//
//   memplug::registry reg;                                  // strict trust
//   memplug::handler arena = reg.load("libmemplug_arena.so");
//   memplug::instance big = arena.instantiate("region_size=1m");
//   memplug::memory_resource mr(big.handler());
//   std::pmr::vector<int> v(&mr);                           // served by the arena
//
// Errors are thrown as memplug::error, whose code() is the stable reason code
// of the C API (and of the Rust library), e.g. "untrusted-file".
// Link with `pkg-config --cflags --libs memplug-host`.
#ifndef MEMPLUG_HPP
#define MEMPLUG_HPP

#include <cstddef>
#include <memory_resource>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "memplug_host.h"

namespace memplug {

/// A refusal or failure of the library: code() is the stable reason code.
class error : public std::runtime_error {
  public:
    error(std::string code, const std::string &message) : std::runtime_error(message), code_(std::move(code)) {}
    /// The stable kebab-case reason code, e.g. "bad-options".
    const std::string &code() const noexcept { return code_; }

  private:
    std::string code_;
};

namespace detail {
/// Throw the error object `e` (taking ownership of it).
[[noreturn]] inline void raise(memplug_host_error *e) {
    std::string code = e ? memplug_host_error_code(e) : "unknown";
    std::string message = e ? memplug_host_error_message(e) : "memplug failed without an error object";
    memplug_host_error_free(e);
    throw error(code, message);
}
} // namespace detail

/// A loaded handler: a cheap, copyable reference that stays valid for the
/// rest of the process. Thread-safe.
class handler {
  public:
    handler() noexcept = default;
    explicit handler(const memplug_host_handler *h) noexcept : h_(h) {}

    const memplug_host_handler *get() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }
    friend bool operator==(handler a, handler b) noexcept { return a.h_ == b.h_; }
    friend bool operator!=(handler a, handler b) noexcept { return a.h_ != b.h_; }

    std::string name() const { return h_ ? memplug_host_handler_name(h_) : ""; }

    memplug_host_info info() const {
        memplug_host_info i{};
        i.struct_size = sizeof i;
        if (memplug_host_handler_info(h_, &i) != 0) throw error("null-argument", "memplug::handler::info: no handler");
        return i;
    }

    /// Statistics, if the plugin keeps them (false if not).
    bool stats(memplug_stats_t &out) const {
        memplug_host_error *e = nullptr;
        int r = memplug_host_stats(h_, &out, &e);
        if (r < 0) detail::raise(e);
        return r == 1;
    }

    void *allocate(std::size_t size) const {
        memplug_host_error *e = nullptr;
        void *p = memplug_host_alloc(h_, size, &e);
        if (!p) detail::raise(e);
        return p;
    }
    void *allocate_zeroed(std::size_t nelem, std::size_t elsize) const {
        memplug_host_error *e = nullptr;
        void *p = memplug_host_calloc(h_, nelem, elsize, &e);
        if (!p) detail::raise(e);
        return p;
    }
    void *reallocate(void *ptr, std::size_t old_size, std::size_t new_size) const {
        memplug_host_error *e = nullptr;
        void *p = memplug_host_realloc(h_, ptr, old_size, new_size, &e);
        if (!p) detail::raise(e);
        return p;
    }
    void deallocate(void *ptr, std::size_t size) const noexcept { memplug_host_free(h_, ptr, size); }
    void *allocate_aligned(std::size_t size, std::size_t alignment) const {
        memplug_host_error *e = nullptr;
        void *p = memplug_host_alloc_aligned(h_, size, alignment, &e);
        if (!p) detail::raise(e);
        return p;
    }
    void deallocate_aligned(void *ptr, std::size_t size, std::size_t alignment) const noexcept {
        memplug_host_free_aligned(h_, ptr, size, alignment);
    }

    /// A handler made from this one with options (see memplug::instance).
    class instance instantiate(const std::string &options) const;

  private:
    const memplug_host_handler *h_ = nullptr;
};

/// The owner of an instance: the plugin destroys the instance once this is
/// destroyed and the instance's last block is freed. Move-only.
class instance {
  public:
    explicit instance(memplug_host_instance *i) noexcept : i_(i) {}
    instance(instance &&o) noexcept : i_(std::exchange(o.i_, nullptr)) {}
    instance &operator=(instance &&o) noexcept {
        if (this != &o) {
            memplug_host_instance_free(i_);
            i_ = std::exchange(o.i_, nullptr);
        }
        return *this;
    }
    instance(const instance &) = delete;
    instance &operator=(const instance &) = delete;
    ~instance() { memplug_host_instance_free(i_); }

    memplug::handler handler() const noexcept { return memplug::handler(memplug_host_instance_handler(i_)); }

  private:
    memplug_host_instance *i_;
};

inline instance handler::instantiate(const std::string &options) const {
    memplug_host_instance *out = nullptr;
    memplug_host_error *e = nullptr;
    if (memplug_host_instantiate(h_, options.c_str(), &out, &e) != 0) detail::raise(e);
    return instance(out);
}

/// A policy: trust, probe, cache, requirements. Move-only; use from one
/// thread at a time.
class policy {
  public:
    policy() : p_(memplug_host_policy_new()) {
        if (!p_) throw std::bad_alloc();
    }
    static policy from_env() {
        memplug_host_error *e = nullptr;
        memplug_host_policy *p = memplug_host_policy_from_env(&e);
        if (!p) detail::raise(e);
        return policy(p);
    }
    policy(policy &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    policy &operator=(policy &&o) noexcept {
        if (this != &o) {
            memplug_host_policy_free(p_);
            p_ = std::exchange(o.p_, nullptr);
        }
        return *this;
    }
    policy(const policy &) = delete;
    policy &operator=(const policy &) = delete;
    ~policy() { memplug_host_policy_free(p_); }

    policy &trust(const std::string &level) { return check(memplug_host_policy_set_trust(p_, level.c_str(), &e_)); }
    policy &pin(const std::string &allowlist) { return check(memplug_host_policy_pin(p_, allowlist.c_str(), &e_)); }
    policy &probe(bool on, std::uint64_t timeout_ms = 0) {
        memplug_host_policy_set_probe(p_, on ? 1 : 0, timeout_ms);
        return *this;
    }
    policy &cache(const std::string &path) { return check(memplug_host_policy_set_cache(p_, path.c_str(), &e_)); }
    policy &require(const std::string &spec) { return check(memplug_host_policy_require(p_, spec.c_str(), &e_)); }
    const memplug_host_policy *get() const noexcept { return p_; }

  private:
    explicit policy(memplug_host_policy *p) noexcept : p_(p) {}
    policy &check(int r) {
        if (r != 0) detail::raise(std::exchange(e_, nullptr));
        return *this;
    }
    memplug_host_policy *p_;
    memplug_host_error *e_ = nullptr;
};

/// One candidate of a batch load: its description, and its handler or why
/// it was refused.
struct outcome {
    std::string candidate;
    memplug::handler handler;
    std::string code;    ///< empty when loaded
    std::string message; ///< empty when loaded
};

/// A registry of handlers by name. Move-only; thread-safe.
class registry {
  public:
    /// A registry under a strict policy of its own.
    registry() : registry(policy()) {}
    explicit registry(const policy &p) {
        memplug_host_error *e = nullptr;
        r_ = memplug_host_registry_new(p.get(), &e);
        if (!r_) detail::raise(e);
    }
    registry(registry &&o) noexcept : r_(std::exchange(o.r_, nullptr)), global_(o.global_) {}
    registry(const registry &) = delete;
    registry &operator=(const registry &) = delete;
    registry &operator=(registry &&) = delete;
    ~registry() {
        if (!global_) memplug_host_registry_free(r_);
    }

    /// The process's registry (policy from the environment).
    static registry global() noexcept { return registry(memplug_host_registry_global()); }

    /// Load a plugin library or an allocator manifest.
    memplug::handler load(const std::string &path, const char *symbol = nullptr) const {
        const memplug_host_handler *h = nullptr;
        memplug_host_error *e = nullptr;
        if (memplug_host_load_path(r_, path.c_str(), symbol, &h, &e) != 0) detail::raise(e);
        return memplug::handler(h);
    }
    std::vector<outcome> load_dir(const std::string &dir) const {
        memplug_host_outcomes *o = nullptr;
        memplug_host_error *e = nullptr;
        if (memplug_host_load_dir(r_, dir.c_str(), &o, &e) != 0) detail::raise(e);
        return collect(o);
    }
    std::vector<outcome> load_search_path() const {
        memplug_host_outcomes *o = nullptr;
        memplug_host_error *e = nullptr;
        if (memplug_host_load_search_path(r_, &o, &e) != 0) detail::raise(e);
        return collect(o);
    }
    /// The handler named `name`; throws "unknown-handler" if none.
    memplug::handler get(const std::string &name) const {
        const memplug_host_handler *h = memplug_host_registry_get(r_, name.c_str());
        if (!h) throw error("unknown-handler", "no handler named `" + name + "` is registered; load it first");
        return memplug::handler(h);
    }
    const memplug_host_registry *get() const noexcept { return r_; }

  private:
    explicit registry(const memplug_host_registry *g) noexcept
        : r_(const_cast<memplug_host_registry *>(g)), global_(true) {}
    static std::vector<outcome> collect(memplug_host_outcomes *o) {
        std::vector<outcome> out;
        for (std::size_t i = 0, n = memplug_host_outcomes_count(o); i < n; ++i) {
            outcome x{memplug_host_outcomes_candidate(o, i), memplug::handler(memplug_host_outcomes_handler(o, i)),
                      "", ""};
            if (const memplug_host_error *e = memplug_host_outcomes_error(o, i)) {
                x.code = memplug_host_error_code(e);
                x.message = memplug_host_error_message(e);
            }
            out.push_back(std::move(x));
        }
        memplug_host_outcomes_free(o);
        return out;
    }
    memplug_host_registry *r_ = nullptr;
    bool global_ = false;
};

/// A handler's lock held for a batch of calls; released on destruction.
/// Belongs to the thread that made it.
class guard {
  public:
    explicit guard(memplug::handler h) {
        memplug_host_error *e = nullptr;
        g_ = memplug_host_lock(h.get(), &e);
        if (!g_) detail::raise(e);
    }
    guard(const guard &) = delete;
    guard &operator=(const guard &) = delete;
    ~guard() { memplug_host_unlock(g_); }

    void *allocate(std::size_t size) const {
        memplug_host_error *e = nullptr;
        void *p = memplug_host_guard_alloc(g_, size, &e);
        if (!p) detail::raise(e);
        return p;
    }
    void deallocate(void *ptr, std::size_t size) const noexcept { memplug_host_guard_free(g_, ptr, size); }

  private:
    memplug_host_guard *g_;
};

/// Make a handler current on this thread for the life of this object.
/// Scopes nest; destroy them in reverse order (as locals are).
class scope {
  public:
    explicit scope(memplug::handler h) {
        memplug_host_error *e = nullptr;
        token_ = memplug_host_scope_push(h.get(), &e);
        if (token_ == 0) detail::raise(e);
    }
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;
    ~scope() { memplug_host_scope_pop(token_, nullptr); }

  private:
    std::uint64_t token_;
};

/// This thread's current handler.
inline handler current() noexcept { return handler(memplug_host_current()); }
/// Make `h` the process default; returns the previous one.
inline handler set_default(handler h) noexcept { return handler(memplug_host_set_default(h.get())); }

/// A std::pmr::memory_resource served by one handler: alignment honoured
/// (above the handler's own, through its aligned path), deallocation told
/// the size, equal to another resource of the same handler. A handler that
/// allows direct calls is called with no call into libmemplug.
class memory_resource : public std::pmr::memory_resource {
  public:
    explicit memory_resource(memplug::handler h) noexcept
        : h_(h), natural_(h ? static_cast<std::size_t>(h.info().alignment) : 16),
          direct_(h && memplug_host_direct_calls(h.get(), &calls_) == 1) {}
    memplug::handler handler() const noexcept { return h_; }

  private:
    void *do_allocate(std::size_t bytes, std::size_t alignment) override {
        if (alignment > natural_) return h_.allocate_aligned(bytes, alignment);
        if (direct_) {
            if (void *p = memplug_host_direct_alloc(&calls_, bytes)) return p;
            throw std::bad_alloc();
        }
        return h_.allocate(bytes);
    }
    void do_deallocate(void *p, std::size_t bytes, std::size_t alignment) override {
        if (alignment > natural_)
            h_.deallocate_aligned(p, bytes, alignment);
        else if (direct_)
            memplug_host_direct_free(&calls_, p, bytes);
        else
            h_.deallocate(p, bytes);
    }
    bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
        auto *o = dynamic_cast<const memory_resource *>(&other);
        return o && o->h_ == h_;
    }

    memplug::handler h_;
    std::size_t natural_;
    memplug_host_direct calls_{};
    bool direct_;
};

/// A standard allocator served by one handler, for containers that take an
/// allocator type (std::vector<T, memplug::allocator<T>>).
template <class T> class allocator {
  public:
    using value_type = T;
    explicit allocator(memplug::handler h) noexcept : h_(h) {}
    template <class U> allocator(const allocator<U> &o) noexcept : h_(o.handler()) {}

    T *allocate(std::size_t n) {
        if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
        if (alignof(T) > 16) return static_cast<T *>(h_.allocate_aligned(n * sizeof(T), alignof(T)));
        return static_cast<T *>(h_.allocate(n * sizeof(T)));
    }
    void deallocate(T *p, std::size_t n) noexcept {
        if (alignof(T) > 16)
            h_.deallocate_aligned(p, n * sizeof(T), alignof(T));
        else
            h_.deallocate(p, n * sizeof(T));
    }
    memplug::handler handler() const noexcept { return h_; }
    template <class U> bool operator==(const allocator<U> &o) const noexcept { return h_ == o.handler(); }
    template <class U> bool operator!=(const allocator<U> &o) const noexcept { return h_ != o.handler(); }

  private:
    memplug::handler h_;
};

} // namespace memplug

#endif // MEMPLUG_HPP
