// fake-torch: a training loop that does with the real libkineto what PyTorch does, for the
// tests of npuprofd's libkineto (dynolog) endpoint. Built by tests/kineto/build.sh against
// libkineto's own source (shared/testdata/kineto); C++20, as libkineto's headers are.
//
//   fake-torch [--steps N] [--step-ms MS] [--exit-at-step N]
//
//   --steps N         iterations: step() calls, each followed by the iteration's work (200)
//   --step-ms MS      the work: a sleep of MS milliseconds an iteration (50)
//   --exit-at-step N  end the process abruptly where step() call N would be made (after
//                     iterations 0..N-1), with _exit(0): no destructors, so libkineto does not
//                     finish a trace in progress, as when a job is killed
//
// It prints one line to stdout, "pid <pid>", at once, and exits 0 after N steps. libkineto's
// log goes to stderr, with one "[fake-torch] ..." line at each start() and stop() of the client.
//
// What PyTorch does, and where:
//   - torch/csrc/profiler/kineto_client_interface.cpp: a static RegisterLibKinetoClient
//     registers its LibKinetoClient (a libkineto::ClientInterface) with
//     libkineto::api().registerClient() as the library loads; global_kineto_init() then
//     calls libkineto_init(cpuOnly, /*logOnError=*/true), only when KINETO_USE_DAEMON is set
//     (it then calls api().suppressLogMessages(); fake-torch keeps libkineto's log for the
//     tests to read). With KINETO_USE_DAEMON set, libkineto_init registers the daemon config
//     loader and starts the thread that polls the daemon. LibKinetoClient::start() enables
//     torch's profiler, stop() disables it, and torch hands the events recorded in between
//     to libkineto with transferCpuTrace() (torch/csrc/profiler/kineto_shim.cpp).
//   - torch/autograd/profiler.py (KinetoStepTracker), on the optimizer's step() post-hook,
//     calls torch._C._kineto_step() -> profilerStep() (torch/csrc/autograd/profiler_kineto.cpp)
//     -> libkineto::api().activityProfiler().step(), once per training iteration, and only
//     when libkineto::api().isProfilerInitialized().
//   - torch.profiler's profile.step() wraps each iteration in a record_function
//     "ProfilerStep#<n>": a USER_ANNOTATION span in the trace.
//
// Iteration numbering. libkineto counts step() calls from -1: the first call makes it 0
// (AsyncActivityProfilerHandler::step()), and an iteration-mode config
// (PROFILE_START_ITERATION=S, ACTIVITIES_ITERATIONS=K) starts the client inside step() call S
// and stops it after step() call S+K. So libkineto's iteration k is the work between step()
// call k and step() call k+1: the work that follows the step() call that k step() calls came
// before. The loop here calls step() and then does the iteration's work, which is the
// sequence torch's post-hook makes (one step() between consecutive iterations' work) without
// the iteration torch runs before its first step(). The span of the work after step() call k
// is named "ProfilerStep#k": a config for S=20, K=5 yields ProfilerStep#20..#24.
//
// What the client hands over. start() and stop() note the loop's current iteration (the one
// the latest step() call opened) and the time. stop() hands libkineto one CpuTraceBuffer with a
// USER_ANNOTATION "ProfilerStep#k" for each iteration k from start()'s up to, not including,
// stop()'s whose work ran whole between start() and stop(), with the start and end times the
// loop recorded for it (a ring of the last kRing iterations). In iteration mode stop() runs on
// a thread libkineto starts from within step() call S+K, while the loop works on iteration S+K:
// it is exact unless that thread is held up longer than an iteration. In duration mode
// (ACTIVITIES_DURATION_MSECS) start() and stop() come from libkineto's own thread, mid-iteration,
// and only the whole iterations between them are named.

#include <libkineto.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace {

int64_t nowNs() {
  // libkineto's timestamps are the system clock's nanoseconds since the epoch
  // (libkineto::timeSinceEpoch, include/time_since_epoch.h).
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The start and end of each of the last kRing iterations' work.
constexpr int64_t kRing = 4096;
struct IterTimes {
  int64_t iter = -1;
  int64_t startNs = 0;
  int64_t endNs = 0;
};
std::mutex ringMutex;
IterTimes ring[kRing];

// The iteration the latest step() call opened; -1 before the first.
std::atomic<int64_t> currentIter{-1};
// The loop's thread, for the spans' tid.
std::atomic<int32_t> loopTid{0};

void recordIteration(int64_t k, int64_t startNs, int64_t endNs) {
  std::lock_guard<std::mutex> lock(ringMutex);
  ring[k % kRing] = IterTimes{k, startNs, endNs};
}

class FakeTorchClient : public libkineto::ClientInterface {
 public:
  void init() override {}

  void prepare(bool shapes, bool memory, bool stack, bool flops, bool modules) override {
    fprintf(stderr, "[fake-torch] prepare shapes=%d memory=%d stack=%d flops=%d modules=%d\n",
            shapes, memory, stack, flops, modules);
  }

  void start() override {
    std::lock_guard<std::mutex> lock(mutex_);
    startIter_ = currentIter.load();
    startNs_ = nowNs();
    fprintf(stderr, "[fake-torch] start at iteration %lld\n", (long long)startIter_);
  }

  void stop() override {
    std::unique_ptr<libkineto::CpuTraceBuffer> buf;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      int64_t stopIter = currentIter.load();
      int64_t stopNs = nowNs();
      // As torch's TraceWrapper: one buffer, its span the profiler's whole run.
      buf = std::make_unique<libkineto::CpuTraceBuffer>();
      buf->span = libkineto::TraceSpan(startNs_, stopNs, "PyTorch Profiler");
      buf->gpuOpCount = 0;
      int64_t first = -1, last = -1, n = 0;
      int64_t from = startIter_ < 0 ? 0 : startIter_;
      if (stopIter - from > kRing) {
        fprintf(stderr, "[fake-torch] %lld iterations collected, only the last %lld kept\n",
                (long long)(stopIter - from), (long long)kRing);
        from = stopIter - kRing;
      }
      std::lock_guard<std::mutex> ringLock(ringMutex);
      for (int64_t k = from; k < stopIter; k++) {
        const IterTimes& t = ring[k % kRing];
        if (t.iter != k || t.startNs < startNs_ || t.endNs > stopNs) {
          continue;  // not whole inside [start(), stop()]
        }
        buf->emplace_activity(buf->span, libkineto::ActivityType::USER_ANNOTATION,
                              "ProfilerStep#" + std::to_string(k));
        libkineto::GenericTraceActivity& a = *buf->activities.back();
        a.startTime = t.startNs;
        a.endTime = t.endNs;
        a.id = k + 1;  // the correlation id libkineto keys activities by: unique, non-zero
        a.device = getpid();
        a.resource = loopTid.load();
        a.threadId = loopTid.load();
        if (first < 0) {
          first = k;
        }
        last = k;
        n++;
      }
      fprintf(stderr, "[fake-torch] stop at iteration %lld: %lld ProfilerStep spans (#%lld..#%lld)\n",
              (long long)stopIter, (long long)n, (long long)first, (long long)last);
    }
    libkineto::api().activityProfiler().transferCpuTrace(std::move(buf));
  }

  void start_memory_profile() override {}
  void stop_memory_profile() override {}
  void export_memory_profile(const std::string&) override {}

 private:
  std::mutex mutex_;
  int64_t startIter_ = -1;
  int64_t startNs_ = 0;
};

[[noreturn]] void usage(const char* why) {
  if (why) {
    fprintf(stderr, "fake-torch: %s\n", why);
  }
  fprintf(stderr, "usage: fake-torch [--steps N] [--step-ms MS] [--exit-at-step N]\n");
  exit(2);
}

long long number(const char* opt, const char* s) {
  if (!s) {
    usage((std::string(opt) + " needs a value").c_str());
  }
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < 0 || v > INT_MAX) {
    usage((std::string(opt) + ": not a number from 0 to " + std::to_string(INT_MAX) + ": " + s).c_str());
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  long long steps = 200, stepMs = 50, exitAt = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps")) {
      steps = number(argv[i], argv[i + 1]), i++;
    } else if (!strcmp(argv[i], "--step-ms")) {
      stepMs = number(argv[i], argv[i + 1]), i++;
    } else if (!strcmp(argv[i], "--exit-at-step")) {
      exitAt = number(argv[i], argv[i + 1]), i++;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(nullptr);
    } else {
      usage((std::string("unknown argument: ") + argv[i]).c_str());
    }
  }

  printf("pid %d\n", (int)getpid());
  fflush(stdout);
  loopTid = libkineto::systemThreadId();

  // torch: RegisterLibKinetoClient, a static initializer, before libkineto_init and on the
  // same thread (libkineto calls the client's init() only on the registering thread).
  static FakeTorchClient client;
  libkineto::api().registerClient(&client);
  // torch: global_kineto_init(), CPU only here: no CUDA, XPU or MTIA.
  if (getenv("KINETO_USE_DAEMON")) {
    libkineto_init(/*cpuOnly=*/true, /*logOnError=*/true);
  }

  for (long long k = 0; k < steps; k++) {
    if (exitAt >= 0 && k == exitAt) {
      fprintf(stderr, "[fake-torch] exiting abruptly at step %lld\n", k);
      _exit(0);
    }
    // Published before the call: a start() made inside it notes iteration k.
    currentIter = k;
    // torch: the optimizer's post-hook -> profilerStep(), guarded as torch guards it.
    if (libkineto::api().isProfilerInitialized()) {
      libkineto::api().activityProfiler().step();
    }
    int64_t t0 = nowNs();
    std::this_thread::sleep_for(std::chrono::milliseconds(stepMs));
    recordIteration(k, t0, nowNs());
  }
  fprintf(stderr, "[fake-torch] done after %lld steps\n", steps);
  return 0;
}
