// memplug.hpp — memplug for C++17: a header-only layer over memplug_host.h.
//
//   memplug::registry reg;                                  // strict trust
//   memplug::handler arena = reg.load("libmemplug_arena.so");
//   memplug::instance big = arena.instantiate("region_size=1m");
//   memplug::memory_resource mr(big.handler());
//   std::pmr::vector<int> v(&mr);                           // served by the arena
//
// Exceptions: one rule for every path.
// - A call that hands out memory and gets none back throws
//   memplug::out_of_memory, derived from std::bad_alloc: handler::allocate,
//   allocate_zeroed, reallocate and allocate_aligned, the same calls on a
//   guard, memory_resource::allocate (through any std::pmr container) and
//   allocator<T>::allocate — whatever the reason (its code(): e.g.
//   "allocation-failed", "size-overflow", "instance-gone"), on the direct
//   path and the library's alike. (allocator<T>::allocate of more elements
//   than fit in a size_t throws std::bad_array_new_length, as
//   std::allocator does; also a std::bad_alloc.)
// - Every other failure (loading, policies, instances, locks, scopes)
//   throws memplug::error, a std::runtime_error.
// Both carry code(), the stable reason code of the C API (and of the Rust
// library), e.g. "untrusted-file", and what(), the message. No destructor
// and no deallocation throws.
// Link with `pkg-config --cflags --libs memplug-host`.
#ifndef MEMPLUG_HPP
#define MEMPLUG_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory_resource>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "memplug_host.h"

namespace memplug {

/// What a load did with a candidate (memplug_host_status): a skip
/// ("shadowed") is not a failure.
enum class status {
    loaded = MEMPLUG_HOST_STATUS_LOADED,
    skipped = MEMPLUG_HOST_STATUS_SKIPPED,
    failed = MEMPLUG_HOST_STATUS_FAILED,
};

/// A refusal or failure of the library (anything but an allocation that
/// got no memory): code() is the stable reason code.
class error : public std::runtime_error {
  public:
    error(std::string code, const std::string &message, std::string subject = "",
          memplug::status st = memplug::status::failed)
        : std::runtime_error(message), code_(std::move(code)), subject_(std::move(subject)), status_(st) {}
    /// The stable kebab-case reason code, e.g. "bad-options".
    const std::string &code() const noexcept { return code_; }
    /// What the error is about (the candidate a load refused), or "".
    const std::string &subject() const noexcept { return subject_; }
    /// For a refused load: skipped ("shadowed", not a failure) or failed.
    memplug::status status() const noexcept { return status_; }

  private:
    std::string code_;
    std::string subject_;
    memplug::status status_;
};

/// An allocation that got no memory: a std::bad_alloc, as std::pmr
/// containers and allocator users expect, carrying the reason code (e.g.
/// "allocation-failed", "size-overflow", "instance-gone") and the message.
class out_of_memory : public std::bad_alloc {
  public:
    out_of_memory(std::string code, std::string message) : code_(std::move(code)), message_(std::move(message)) {}
    /// The stable kebab-case reason code.
    const std::string &code() const noexcept { return code_; }
    /// The message: what happened and what to do.
    const char *what() const noexcept override { return message_.c_str(); }

  private:
    std::string code_;
    std::string message_;
};

namespace detail {
/// The code of `e`, or "unknown" without an error object.
inline std::string code_of(const memplug_host_error *e) { return e ? memplug_host_error_code(e) : "unknown"; }
/// The message of `e`.
inline std::string message_of(const memplug_host_error *e) {
    return e ? memplug_host_error_message(e) : "memplug failed without an error object";
}

/// Throw the error object `e` as memplug::error (taking ownership of it).
[[noreturn]] inline void raise(memplug_host_error *e) {
    const char *subject = e ? memplug_host_error_subject(e) : nullptr;
    error x(code_of(e), message_of(e), subject ? subject : "",
            static_cast<memplug::status>(memplug_host_error_status(e)));
    memplug_host_error_free(e);
    throw x;
}

/// Throw the error object `e` of an allocation as memplug::out_of_memory
/// (taking ownership of it).
[[noreturn]] inline void raise_oom(memplug_host_error *e) {
    out_of_memory x(code_of(e), message_of(e));
    memplug_host_error_free(e);
    throw x;
}

/// `p`, or memplug::out_of_memory for `e` when `p` is NULL. `e` is taken by
/// reference: it is read after the call that sets it, in the same
/// argument list, has returned.
inline void *allocated(void *p, memplug_host_error *&e) {
    if (!p) raise_oom(e);
    return p;
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

    /// The usable size of the live block `ptr` of this handler, if the
    /// handler answers usable sizes.
    std::optional<std::size_t> usable_size(const void *ptr) const {
        std::size_t n = 0;
        int r = memplug_host_usable_size(h_, ptr, &n);
        if (r < 0) throw error("null-argument", "memplug::handler::usable_size: no handler or no block");
        if (r == 0) return std::nullopt;
        return n;
    }

    /// Allocation throws memplug::out_of_memory (a std::bad_alloc) when no
    /// block comes back.
    void *allocate(std::size_t size) const {
        memplug_host_error *e = nullptr;
        return detail::allocated(memplug_host_alloc(h_, size, &e), e);
    }
    void *allocate_zeroed(std::size_t nelem, std::size_t elsize) const {
        memplug_host_error *e = nullptr;
        return detail::allocated(memplug_host_calloc(h_, nelem, elsize, &e), e);
    }
    void *reallocate(void *ptr, std::size_t old_size, std::size_t new_size) const {
        memplug_host_error *e = nullptr;
        return detail::allocated(memplug_host_realloc(h_, ptr, old_size, new_size, &e), e);
    }
    void deallocate(void *ptr, std::size_t size) const noexcept { memplug_host_free(h_, ptr, size); }
    void *allocate_aligned(std::size_t size, std::size_t alignment) const {
        memplug_host_error *e = nullptr;
        return detail::allocated(memplug_host_alloc_aligned(h_, size, alignment, &e), e);
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
        if (memplug_host_policy_set_probe(p_, on ? 1 : 0, timeout_ms) != 0)
            throw error("null-argument", "memplug::policy::probe: this policy was moved from; use a live policy");
        return *this;
    }
    policy &cache(const std::string &path) { return check(memplug_host_policy_set_cache(p_, path.c_str(), &e_)); }
    policy &require(const std::string &spec) { return check(memplug_host_policy_require(p_, spec.c_str(), &e_)); }
    /// An ABI version "MAJOR.MINOR" that still loads, with a warning.
    policy &deprecate_abi(const std::string &spec) {
        return check(memplug_host_policy_deprecate_abi(p_, spec.c_str(), &e_));
    }
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
/// it was refused. Tell a skip from a failure by `status`.
struct outcome {
    std::string candidate;
    memplug::handler handler;
    std::string code;    ///< empty when loaded
    std::string message; ///< empty when loaded
    memplug::status status = memplug::status::loaded;
};

/// An allocator made of a library's plain C functions (what an allocator
/// manifest says), for registry::load_symbols. Empty strings are "not
/// given".
struct symbol_spec {
    std::string name;
    std::string library; ///< a path, or a soname for the dynamic loader
    std::string malloc;  ///< void *(size_t)
    std::string free;    ///< void (void *)
    std::string calloc;        ///< optional: void *(size_t, size_t)
    std::string realloc;       ///< optional: void *(void *, size_t)
    std::string sized_free;    ///< optional: void (void *, size_t)
    std::string aligned_alloc; ///< optional: void *(size_t alignment, size_t)
    std::string usable_size;   ///< optional: size_t (void *)
    std::string version;       ///< optional: semver, default "0.0.0"
    std::uint64_t alignment = 0; ///< 0: 16
    bool thread_safe = false;    ///< false: the host locks every call
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
    /// Make, check and register a handler from a library's functions.
    memplug::handler load_symbols(const symbol_spec &spec) const {
        auto opt = [](const std::string &s) { return s.empty() ? nullptr : s.c_str(); };
        memplug_host_symbol_spec c{};
        c.struct_size = sizeof c;
        c.name = spec.name.c_str();
        c.library = spec.library.c_str();
        c.malloc = spec.malloc.c_str();
        c.free = spec.free.c_str();
        c.calloc = opt(spec.calloc);
        c.realloc = opt(spec.realloc);
        c.sized_free = opt(spec.sized_free);
        c.aligned_alloc = opt(spec.aligned_alloc);
        c.usable_size = opt(spec.usable_size);
        c.version = opt(spec.version);
        c.alignment = spec.alignment;
        c.thread_safe = spec.thread_safe ? 1 : 0;
        const memplug_host_handler *h = nullptr;
        memplug_host_error *e = nullptr;
        if (memplug_host_load_symbols(r_, &c, &h, &e) != 0) detail::raise(e);
        return memplug::handler(h);
    }
    /// The handler named `name`; throws "unknown-handler" if none.
    memplug::handler get(const std::string &name) const {
        const memplug_host_handler *h = memplug_host_registry_get(r_, name.c_str());
        if (!h) throw error("unknown-handler", "no handler named `" + name + "` is registered; load it first");
        return memplug::handler(h);
    }
    /// Every registered handler, by name ("default_allocator" included: a
    /// new registry holds it).
    std::vector<memplug::handler> handlers() const {
        std::vector<const memplug_host_handler *> raw(memplug_host_registry_handlers(r_, nullptr, 0));
        std::size_t n = memplug_host_registry_handlers(r_, raw.data(), raw.size());
        if (n < raw.size()) raw.resize(n); // another thread unregistered some meanwhile
        std::vector<memplug::handler> out;
        for (const memplug_host_handler *h : raw) out.push_back(memplug::handler(h));
        return out;
    }
    /// Remove `name` from the registry; its handler (a null one if none had
    /// that name) stays valid and keeps serving its blocks.
    memplug::handler unregister(const std::string &name) const {
        return memplug::handler(memplug_host_registry_unregister(r_, name.c_str()));
    }
    const memplug_host_registry *get() const noexcept { return r_; }

  private:
    explicit registry(const memplug_host_registry *g) noexcept
        : r_(const_cast<memplug_host_registry *>(g)), global_(true) {}
    static std::vector<outcome> collect(memplug_host_outcomes *o) {
        std::vector<outcome> out;
        for (std::size_t i = 0, n = memplug_host_outcomes_count(o); i < n; ++i) {
            outcome x{memplug_host_outcomes_candidate(o, i), memplug::handler(memplug_host_outcomes_handler(o, i)),
                      "", "", static_cast<memplug::status>(memplug_host_outcomes_status(o, i))};
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

/// The calls of a held guard (a view: it does not release the lock). A
/// memplug::guard is one; memplug::guards hands them out.
class guard_ref {
  public:
    explicit guard_ref(const memplug_host_guard *g) noexcept : g_(g) {}

    memplug::handler handler() const noexcept { return memplug::handler(memplug_host_guard_handler(g_)); }
    void *allocate(std::size_t size) const {
        memplug_host_error *e = nullptr;
        return detail::allocated(memplug_host_guard_alloc(g_, size, &e), e);
    }
    void *allocate_zeroed(std::size_t nelem, std::size_t elsize) const {
        memplug_host_error *e = nullptr;
        return detail::allocated(memplug_host_guard_calloc(g_, nelem, elsize, &e), e);
    }
    /// Resize a block of the guard's handler; on failure the old block is
    /// untouched.
    void *reallocate(void *ptr, std::size_t old_size, std::size_t new_size) const {
        memplug_host_error *e = nullptr;
        return detail::allocated(memplug_host_guard_realloc(g_, ptr, old_size, new_size, &e), e);
    }
    void deallocate(void *ptr, std::size_t size) const noexcept { memplug_host_guard_free(g_, ptr, size); }
    const memplug_host_guard *get() const noexcept { return g_; }

  private:
    const memplug_host_guard *g_;
};

/// A handler's lock held for a batch of calls; released on destruction.
/// Belongs to the thread that made it.
class guard : public guard_ref {
  public:
    explicit guard(memplug::handler h) : guard(take(h)) {}
    guard(const guard &) = delete;
    guard &operator=(const guard &) = delete;
    ~guard() { memplug_host_unlock(g_); }

  private:
    explicit guard(memplug_host_guard *g) noexcept : guard_ref(g), g_(g) {}
    static memplug_host_guard *take(memplug::handler h) {
        memplug_host_error *e = nullptr;
        memplug_host_guard *g = memplug_host_lock(h.get(), &e);
        if (!g) detail::raise(e);
        return g;
    }
    memplug_host_guard *g_;
};

/// The locks of several handlers taken at once, for a batch that uses them
/// together (taking them one by one is refused as "lock-order-violation");
/// released on destruction. Belongs to the thread that made it.
class guards {
  public:
    explicit guards(std::initializer_list<memplug::handler> hs) : guards(std::vector<memplug::handler>(hs)) {}
    explicit guards(const std::vector<memplug::handler> &hs) {
        std::vector<const memplug_host_handler *> raw;
        for (memplug::handler h : hs) raw.push_back(h.get());
        memplug_host_error *e = nullptr;
        g_ = memplug_host_lock_all(raw.data(), raw.size(), &e);
        if (!g_) detail::raise(e);
    }
    guards(const guards &) = delete;
    guards &operator=(const guards &) = delete;
    ~guards() { memplug_host_unlock_all(g_); }

    /// The guard of `h`; std::out_of_range if `h` is not among them.
    guard_ref at(memplug::handler h) const {
        const memplug_host_guard *g = memplug_host_guards_get(g_, h.get());
        if (!g) throw std::out_of_range("memplug::guards::at: handler `" + h.name() + "` is not locked here");
        return guard_ref(g);
    }
    /// How many distinct handlers are locked.
    std::size_t size() const noexcept { return memplug_host_guards_count(g_); }

  private:
    memplug_host_guards *g_;
};

/// Make a handler current on this thread for the life of this object.
/// Scopes nest; close them in reverse order (as locals are destroyed).
///
/// close() ends the scope and throws memplug::error ("scope-order") when it
/// is not this thread's innermost one — the scope then stays open, to be
/// closed once the inner ones are. The destructor closes a scope still
/// open; it cannot throw (it may run during unwinding), so if that fails it
/// writes the code and message to stderr and leaves the scope open. Call
/// close() where you want to handle the failure; a scope destroyed as a
/// local, in order, never fails.
class scope {
  public:
    explicit scope(memplug::handler h) {
        memplug_host_error *e = nullptr;
        token_ = memplug_host_scope_push(h.get(), &e);
        if (token_ == 0) detail::raise(e);
    }
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;
    ~scope() {
        if (token_ == 0) return;
        memplug_host_error *e = nullptr;
        if (memplug_host_scope_pop(token_, &e) != 0) {
            std::fprintf(stderr, "memplug::scope: the scope could not be closed in its destructor: [%s] %s\n",
                         memplug_host_error_code(e), memplug_host_error_message(e));
            memplug_host_error_free(e);
        }
    }

    /// End the scope: what was current before it is current again.
    void close() {
        if (token_ == 0) return;
        memplug_host_error *e = nullptr;
        if (memplug_host_scope_pop(token_, &e) != 0) detail::raise(e);
        token_ = 0;
    }
    /// Whether the scope is still open.
    bool is_open() const noexcept { return token_ != 0; }

  private:
    std::uint64_t token_;
};

/// This thread's current handler.
inline handler current() noexcept { return handler(memplug_host_current()); }
/// The built-in libc handler, "default_allocator".
inline handler builtin() noexcept { return handler(memplug_host_builtin()); }
/// The process default (the built-in handler until set).
inline handler default_handler() noexcept { return handler(memplug_host_default()); }
/// Make `h` the process default (a null handler: the built-in one); returns
/// the previous one.
inline handler set_default(handler h) noexcept { return handler(memplug_host_set_default(h.get())); }

/// A std::pmr::memory_resource served by one handler: alignment honoured
/// (above the handler's own, through its aligned path), deallocation told
/// the size, equal to another resource of the same handler. A handler that
/// allows direct calls is called with no call into libmemplug. allocate
/// throws memplug::out_of_memory (a std::bad_alloc) on every path.
class memory_resource : public std::pmr::memory_resource {
  public:
    explicit memory_resource(memplug::handler h) noexcept
        : h_(h), natural_(natural_alignment(h)), direct_(h && memplug_host_direct_calls(h.get(), &calls_) == 1) {}
    memplug::handler handler() const noexcept { return h_; }

  private:
    /// The handler's own alignment; 16 when it cannot be read (a null
    /// handler): never throws.
    static std::size_t natural_alignment(memplug::handler h) noexcept {
        memplug_host_info i{};
        i.struct_size = sizeof i;
        if (!h || memplug_host_handler_info(h.get(), &i) != 0 || i.alignment == 0) return 16;
        return static_cast<std::size_t>(i.alignment);
    }
    void *do_allocate(std::size_t bytes, std::size_t alignment) override {
        if (alignment > natural_) return h_.allocate_aligned(bytes, alignment);
        if (direct_) {
            if (void *p = memplug_host_direct_alloc(&calls_, bytes)) return p;
            // The plugin returned NULL: the full call asks again and says why.
            memplug_host_error *e = nullptr;
            return detail::allocated(memplug_host_alloc_call(h_.get(), bytes, &e), e);
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
/// allocator type (std::vector<T, memplug::allocator<T>>). allocate throws
/// memplug::out_of_memory (a std::bad_alloc) when no memory comes back.
template <class T> class allocator {
  public:
    using value_type = T;
    /// An allocator of this thread's current handler, as it is now (the
    /// innermost memplug::scope's, else the process default): a container
    /// made inside a scope keeps that handler after the scope ends, and
    /// frees through it.
    allocator() noexcept : h_(memplug::current()) {}
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
