// The one XLA FFI handler of every generated CPU kernel. A kernel library exports plain C
// functions (cc/codegen/cpu/emit_entry.h): compiling them without XLA's headers and
// threading takes a third of the time. This handler, registered once per process as the
// target "mirage_jax_cpu", finds the kernel named by the call's `kernel` attribute, checks
// the buffers XLA passes against the kernel's own signature, and runs the kernel's tasks on
// XLA's intra-op thread pool.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "cc/codegen/cpu/emit_entry.h"
#include "cc/python/bindings.h"
#include "xla/ffi/api/ffi.h"

namespace nb = nanobind;
namespace ffi = xla::ffi;
using namespace nb::literals;

extern "C" {
// As the generated code declares it (cc/codegen/cpu/prelude.cc).
typedef void (*MjCpuTaskFn)(const void* io, float* arena, int64_t task);
struct MjCpuGridV1 {
  void* context;
  void (*run)(void* context, MjCpuTaskFn task, const void* io, int64_t tasks, int64_t arena_floats);
};
}

namespace mj::python {
namespace {

using codegen::cpu::kCpuSignatureVersion;
constexpr int64_t kMaxBuffers = 1024, kMaxRank = 16;

struct Buffer {
  ffi::DataType dtype;
  std::vector<int64_t> dims;
};

struct Kernel {
  void (*entry)(const MjCpuGridV1*, void* const*);
  std::vector<Buffer> inputs, outputs;
};

// Kernels are registered, never removed: a compiled XLA program may call one at any time.
std::shared_mutex registry_mutex;
// An ordered map, to look a call's attribute up as a string_view (no allocation per call).
std::map<std::string, std::unique_ptr<const Kernel>, std::less<>> registry;

const Kernel* find_kernel(std::string_view name) {
  std::shared_lock<std::shared_mutex> lock(registry_mutex);
  const auto found = registry.find(name);
  return found == registry.end() ? nullptr : found->second.get();
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

// The kernel's signature words (see kCpuSignatureVersion) as buffers; invalid_argument when
// they are not a signature this dispatcher reads.
Kernel read_signature(const int64_t* words, const std::string& name) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("CPU kernel " + name + " has an unreadable signature: " + why);
  };
  if (words == nullptr) throw bad("none");
  if (words[0] != kCpuSignatureVersion) {
    throw bad("version " + std::to_string(words[0]) + ", expected " +
              std::to_string(kCpuSignatureVersion) +
              " (built by another mirage_jax: clear the "
              "kernel cache)");
  }
  const int64_t inputs = words[1], outputs = words[2];
  if (inputs < 0 || outputs < 1 || inputs + outputs > kMaxBuffers) throw bad("buffer counts");
  Kernel kernel{};
  int64_t at = 3;
  for (int64_t b = 0; b < inputs + outputs; ++b) {
    const int64_t code = words[at], rank = words[at + 1];
    if (code < 0 || code > 2 || rank < 0 || rank > kMaxRank)
      throw bad("buffer " + std::to_string(b));
    Buffer buffer;
    buffer.dtype = code == 0   ? ffi::DataType::F32
                   : code == 1 ? ffi::DataType::BF16
                               : ffi::DataType::F16;
    buffer.dims.assign(words + at + 2, words + at + 2 + rank);
    at += 2 + rank;
    (b < inputs ? kernel.inputs : kernel.outputs).push_back(std::move(buffer));
  }
  return kernel;
}

// ---- the grid -----------------------------------------------------------------------------

// A task's blocks keep their tiles in a per-thread arena, reused across tasks and calls.
float* thread_arena(int64_t floats) {
  static thread_local std::vector<float> storage;
  if (int64_t(storage.size()) < floats + 16) storage.resize(size_t(floats + 16));
  const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
  return reinterpret_cast<float*>((address + 63) & ~std::uintptr_t(63));
}

// Long enough for a worker's last chunk of a short kernel, short against a long one's.
constexpr std::chrono::microseconds kSpinBeforeSleep{200};

// Tells the core this is a spin loop (frees the pipeline to a hyperthread sibling).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Shared by the caller and the pool tasks through a shared_ptr: a pool task may start after
// the call has returned, finds no task left, and must still find this object alive (it then
// touches neither `io` nor `fn`).
struct GridJob {
  GridJob(MjCpuTaskFn fn, const void* io, int64_t tasks, int64_t chunk, int64_t arena_floats)
      : fn(fn), io(io), tasks(tasks), chunk(chunk), arena_floats(arena_floats) {}

  void work() {
    float* arena = nullptr;
    for (;;) {
      const int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= tasks) return;
      if (arena == nullptr) arena = thread_arena(arena_floats);
      const int64_t end = std::min(begin + chunk, tasks);
      for (int64_t t = begin; t < end; ++t) fn(io, arena, t);
      if (done.fetch_add(end - begin, std::memory_order_acq_rel) + (end - begin) == tasks) {
        std::lock_guard<std::mutex> lock(mu);
        finished.notify_all();
      }
    }
  }

  // Only tasks claimed by running workers can be outstanding, so this never waits on a
  // worker that has not started. The caller spins before it sleeps: the worker's last chunk
  // is short when the kernel is, and a sleeping caller is woken tens of microseconds after
  // the notify (a 2-block norm kernel of 0.02 ms ran 0.145 ms a call when its caller slept,
  // 0.07-0.08 spinning; decode steps of the zoo's GPT-2 and Llama ran 8-15% faster).
  void wait() {
    const auto sleep_after = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    do {
      for (int i = 0; i < 64; ++i) {
        if (done.load(std::memory_order_acquire) == tasks) return;
        cpu_relax();
      }
    } while (std::chrono::steady_clock::now() < sleep_after);
    std::unique_lock<std::mutex> lock(mu);
    finished.wait(lock, [&] { return done.load(std::memory_order_acquire) == tasks; });
  }

  const MjCpuTaskFn fn;
  const void* const io;
  const int64_t tasks, chunk, arena_floats;
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable finished;
};

void run_grid(void* context, MjCpuTaskFn fn, const void* io, int64_t tasks, int64_t arena_floats) {
  auto& pool = *static_cast<ffi::ThreadPool*>(context);
  const int64_t threads = tasks > 1 ? pool.num_threads() : 0;
  if (threads <= 0) {  // no pool (or one task): run every task here
    float* arena = thread_arena(arena_floats);
    for (int64_t t = 0; t < tasks; ++t) fn(io, arena, t);
    return;
  }
  // A few chunks per thread balance uneven tasks without an atomic per task.
  const int64_t chunk = std::max<int64_t>(1, tasks / ((threads + 1) * 4));
  const int64_t chunks = (tasks + chunk - 1) / chunk;
  auto job = std::make_shared<GridJob>(fn, io, tasks, chunk, arena_floats);
  // The caller works too, so threads - 1 helpers keep one worker per pool thread: more
  // would time-slice memory streams that each want a core.
  const int64_t helpers = std::min<int64_t>(threads - 1, chunks - 1);
  for (int64_t i = 0; i < helpers; ++i) pool.Schedule([job]() { job->work(); });
  job->work();
  job->wait();
}

// ---- the handler --------------------------------------------------------------------------

std::string dtype_text(ffi::DataType dtype) {
  switch (dtype) {
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::F16: return "float16";
    default: return "XLA dtype " + std::to_string(static_cast<int>(dtype));
  }
}

int64_t element_count(ffi::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A buffer of another shape with the same elements is accepted: XLA passes operands and
// results row-major, so a reshape is the same bytes, and a region hands the kernel its
// values as the model shaped them (a reshape at the call made XLA duplicate the
// dynamic_update_slice producing a KV cache, and copy the cache for each copy).
ffi::Error check_buffer(std::string_view kernel, const char* what, size_t index,
                        ffi::DataType dtype, ffi::Span<const int64_t> dims, const Buffer& want) {
  if (dtype == want.dtype &&
      element_count(dims) == element_count(ffi::Span<const int64_t>(want.dims))) {
    return ffi::Error::Success();
  }
  const std::vector<int64_t> got(dims.begin(), dims.end());
  return ffi::Error::InvalidArgument(
      std::string(kernel) + ": " + what + " " + std::to_string(index) + " must have shape " +
      shape_text(want.dims) + " (or a reshape of it) and dtype " + dtype_text(want.dtype) +
      ", got " + shape_text(got) + " " + dtype_text(dtype));
}

ffi::Error dispatch(ffi::ThreadPool pool, ffi::RemainingArgs args, ffi::RemainingRets rets,
                    std::string_view name) {
  const Kernel* kernel = find_kernel(name);
  if (kernel == nullptr) {
    return ffi::Error::InvalidArgument("mirage_jax CPU kernel " + std::string(name) +
                                       " is not registered in this process");
  }
  if (args.size() != kernel->inputs.size() || rets.size() != kernel->outputs.size()) {
    return ffi::Error::InvalidArgument(std::string(name) + ": expected " +
                                       std::to_string(kernel->inputs.size()) + " inputs and " +
                                       std::to_string(kernel->outputs.size()) + " outputs");
  }
  std::vector<void*> buffers;
  buffers.reserve(args.size() + rets.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto arg = args.get<ffi::AnyBuffer>(i);
    if (arg.has_error()) return arg.error();
    if (auto e = check_buffer(name, "input", i, arg->element_type(), arg->dimensions(),
                              kernel->inputs[i]);
        e.failure()) {
      return e;
    }
    buffers.push_back(arg->untyped_data());
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    auto ret = rets.get<ffi::AnyBuffer>(i);
    if (ret.has_error()) return ret.error();
    if (auto e = check_buffer(name, "output", i, (*ret)->element_type(), (*ret)->dimensions(),
                              kernel->outputs[i]);
        e.failure()) {
      return e;
    }
    buffers.push_back((*ret)->untyped_data());
  }
  const MjCpuGridV1 grid{&pool, &run_grid};
  kernel->entry(&grid, buffers.data());
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(
    cpu_dispatch, dispatch,
    ffi::Ffi::Bind().Ctx<ffi::ThreadPool>().RemainingArgs().RemainingRets().Attr<std::string_view>(
        "kernel"));

}  // namespace

void bind_cpu_dispatch(nb::module_& m) {
  m.def(
      "cpu_dispatch_handler", [] { return nb::capsule(reinterpret_cast<void*>(cpu_dispatch)); },
      "The XLA FFI handler that runs every registered CPU kernel (jax.ffi target "
      "\"mirage_jax_cpu\"; the call's `kernel` attribute names the kernel).");
  m.def(
      "register_cpu_kernel",
      [](const std::string& name, std::uintptr_t entry, std::uintptr_t signature) {
        using SignatureFn = const int64_t* (*)();
        Kernel kernel = read_signature(reinterpret_cast<SignatureFn>(signature)(), name);
        kernel.entry = reinterpret_cast<void (*)(const MjCpuGridV1*, void* const*)>(entry);
        std::unique_lock<std::shared_mutex> lock(registry_mutex);
        registry.try_emplace(name, std::make_unique<const Kernel>(std::move(kernel)));
      },
      "name"_a, "entry"_a, "signature"_a,
      "Makes the CPU kernel `name` callable through cpu_dispatch_handler: `entry` and "
      "`signature` are the addresses of the library's exported `name` and `name_signature`. "
      "A name registers once; later registrations are ignored (names are content hashes).");
}

}  // namespace mj::python
