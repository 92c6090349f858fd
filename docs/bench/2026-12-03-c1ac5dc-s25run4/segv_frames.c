// Session 25 run 4 (scratch, kept for the record): LD_PRELOAD'ed into rank 0 (faulthandler off),
// prints each native frame as library + offset on SIGSEGV; the run fed them to addr2line against
// libtide built RelWithDebInfo (build/gpu-g).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static void handler(int sig, siginfo_t* info, void* ctx) {
  (void)sig; (void)ctx;
  void* frames[64];
  int n = backtrace(frames, 64);
  fprintf(stderr, "SEGV at %p, %d frames\n", info->si_addr, n);
  for (int i = 0; i < n; ++i) {
    Dl_info d;
    if (dladdr(frames[i], &d) && d.dli_fname)
      fprintf(stderr, "FRAME %s 0x%lx %s\n", d.dli_fname, (unsigned long)((char*)frames[i] - (char*)d.dli_fbase),
              d.dli_sname ? d.dli_sname : "?");
  }
  _exit(139);
}
__attribute__((constructor)) static void install(void) {
  struct sigaction sa = {0};
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
}
